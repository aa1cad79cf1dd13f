/**
 * Layout 1 (store/layout1.ts): updates are idempotent by entry id, and a journal never moves the
 * leaf back.
 */

import { updateFromMessage } from '../messages';
import { updateFromJournal } from '../outputs';
import type { JsonObject } from '../protocol';
import { applyUpdate } from '../store/layout1';
import { entry, id, idsOf } from './support';

describe('applyUpdate', () => {
  it('is idempotent by id', () => {
    const msg = {
      type: 'entries',
      seq: 1,
      session: 's',
      leaf: id(2),
      active: true,
      header: { type: 'session', id: 'h' },
      settings: { model: 'm' },
      entries: [entry(1), entry(2, id(1)), entry(1), { no: 'id' }]
    };
    const update = updateFromMessage(msg)!;
    const a = applyUpdate(undefined, update);
    const b = applyUpdate(a.metadata, update);
    expect(a.stored).toBe(2);
    expect(a.changed).toBe(true);
    expect(a.ids).toEqual([id(1), id(2), id(1)]);
    const meta = a.metadata;
    expect(meta.version).toBe(1);
    expect(meta.active).toBe('s');
    expect(idsOf(meta.sessions.s.entries)).toEqual([id(1), id(2)]);
    expect(meta.sessions.s.header).toEqual({ type: 'session', id: 'h' });
    expect(b.stored).toBe(0);
    expect(b.changed).toBe(false);
    expect(b.metadata).toEqual(meta);
  });

  it('never moves the leaf back for a journal', () => {
    const stored = {
      version: 1,
      active: 'default',
      sessions: { default: { leaf: id(3), entries: [entry(1), entry(2), entry(3)] } }
    };
    const oldJournal = { version: 1, session: 'default', leaf: id(1), entries: [entry(1)] };
    const newJournal = { version: 1, session: 'default', leaf: id(4), entries: [entry(3), entry(4)] };
    const a = applyUpdate(stored, updateFromJournal(oldJournal)!, true);
    const b = applyUpdate(a.metadata, updateFromJournal(newJournal)!, true);
    expect(a.changed).toBe(false);
    expect((a.metadata.sessions.default as JsonObject).leaf).toBe(id(3));
    expect(b.stored).toBe(1);
    expect((b.metadata.sessions.default as JsonObject).leaf).toBe(id(4));
  });

  it('leaves its input as it was', () => {
    const stored = { version: 1, sessions: { s: { leaf: id(1), entries: [entry(1)] } } };
    const before = JSON.stringify(stored);
    applyUpdate(stored, { session: 's', entries: [entry(2, id(1))], leaf: id(2) });
    expect(JSON.stringify(stored)).toBe(before);
  });
});
