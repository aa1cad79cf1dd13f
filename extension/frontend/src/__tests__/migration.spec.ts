/**
 * The move of a layout-1 store into layout 3 (store/migration.ts through
 * `ChunkedStore.migrateStep`): a chunk a step, the index last; a write during a move finishes it
 * without writing an entry twice.
 */

import type { Json, JsonObject } from '../protocol';
import { ChunkedStore } from '../store/chunkedStore';
import { entry, id, idsOf, plainMetadata } from './support';

const LONG = () => ({
  version: 1,
  active: 's',
  sessions: { s: { header: { id: 'h' }, leaf: id(249), entries: Array.from({ length: 250 }, (_, i) => entry(i)) } }
});

const ALL = (n: number) => Array.from({ length: n }, (_, i) => id(i));

function view(st: ChunkedStore): Json[] {
  return (st.assemble() as { sessions: { s: { entries: Json[] } } }).sessions.s.entries;
}

describe('migrateStep', () => {
  it('moves a layout-1 store into layout 3 a chunk a step, and the index last', () => {
    const { md, access, writes, indexReads } = plainMetadata({ ipyagent: LONG() });
    const st = new ChunkedStore(access);
    const pushed = view(st); // the push's read, which the move then plans from
    const steps: [string, string[], number][] = [];
    for (let r = 'more'; r === 'more';) {
      r = st.migrateStep();
      steps.push([r, writes.splice(0), (md.ipyagent as { version: number }).version]);
    }
    expect(steps[0]).toEqual(['more', [], 1]); // the plan
    expect(steps.slice(1, 4).map(s => s[1])).toEqual([['ipyagent/000000'], ['ipyagent/000001'], ['ipyagent/000002']]);
    expect(steps.slice(1, 4).every(s => s[0] === 'more' && s[2] === 1)).toBe(true); // still layout 1 for every reader
    expect(steps[4]).toEqual(['done', ['ipyagent'], 3]);
    expect(steps).toHaveLength(5);
    expect(pushed).toHaveLength(250);
    expect(indexReads()).toBe(1); // the long value read once, for the push and the move
    expect(st.migrateStep()).toBe('none');
    expect(st.moved).toEqual({ entries: 250, chunks: 3 });
    expect(st.apply({ session: 's', entries: [entry(250)], leaf: id(250) }).stored).toBe(1);
    expect(writes).toEqual(['ipyagent/000003']);
    expect(idsOf(view(new ChunkedStore(access)))).toEqual(ALL(251));
  });

  it('is finished by a write during it, without writing an entry twice', () => {
    const { md, access, writes } = plainMetadata({ ipyagent: LONG() });
    const st = new ChunkedStore(access);
    st.migrateStep(); // planned
    st.migrateStep(); // one chunk written
    writes.splice(0);
    expect(st.apply({ session: 's', entries: [entry(250)], leaf: id(250) }).stored).toBe(1);
    expect(writes).toEqual(['ipyagent/000001', 'ipyagent/000002', 'ipyagent/000003', 'ipyagent']);
    expect(st.migrateStep()).toBe('none');
    const chunks = Object.keys(md).filter(k => k.startsWith('ipyagent/'));
    expect(chunks.reduce((n, k) => n + (md[k] as { ids: string[] }).ids.length, 0)).toBe(251); // each entry in one chunk
    expect(idsOf(view(new ChunkedStore(access)))).toEqual(ALL(251));
  });

  it('has nothing to move in a store that is chunked already', () => {
    const { access, writes } = plainMetadata({
      ipyagent: { version: 3, next_chunk: 0, sessions: { s: { leaf: null } } }
    });
    const st = new ChunkedStore(access);
    expect(st.migrateStep()).toBe('none');
    expect(writes).toEqual([]);
    expect(st.moved).toBeNull();
  });
});

/** The store of `LONG()` (250 entries) with the chunks a move by another page wrote before it
 * stopped, or before this page's write: entries `from`..`to` (exclusive), numbered from `first`. */
function midMove(from: number, to: number, first = 0): { [key: string]: Json } {
  const md: { [key: string]: Json } = { ipyagent: LONG() };
  for (let start = from, n = first; start < to; start += 100, n++) {
    const part = Array.from({ length: Math.min(100, to - start) }, (_, i) => entry(start + i));
    md[`ipyagent/${String(n).padStart(6, '0')}`] = {
      session: 's',
      ids: part.map(e => e.id as string),
      entries: JSON.stringify(part)
    };
  }
  return md;
}

/** Every entry id the chunks hold, chunk by chunk (an entry in two chunks counts twice). */
function chunkedIds(md: { [key: string]: Json }): string[] {
  return Object.keys(md)
    .filter(k => k.startsWith('ipyagent/'))
    .sort()
    .flatMap(k => (md[k] as { ids: string[] }).ids);
}

describe('a move into layout 3 skips what sits in chunks (issue 35, item 7)', () => {
  it('when a write converts a store another page had begun to move', () => {
    const { md, access } = plainMetadata(midMove(0, 200));
    const st = new ChunkedStore(access);
    expect(st.apply({ session: 's', entries: [entry(250)], leaf: id(250) }).stored).toBe(1);
    expect(chunkedIds(md).sort()).toEqual(ALL(251).sort()); // before: 451, the 200 twice
    expect(idsOf(view(new ChunkedStore(access)))).toEqual(ALL(251));
  });

  it('when its own idle move starts from a move cut short', () => {
    const { md, access } = plainMetadata(midMove(0, 100));
    const st = new ChunkedStore(access);
    for (let r = st.migrateStep(); r === 'more'; r = st.migrateStep()) {
      // a step at a time
    }
    expect(st.moved).toEqual({ entries: 150, chunks: 2 });
    expect(chunkedIds(md).sort()).toEqual(ALL(250).sort());
    expect(idsOf(view(new ChunkedStore(access)))).toEqual(ALL(250));
  });

  it('when another page moves the same store at the same time', () => {
    const { md, access } = plainMetadata({ ipyagent: LONG() });
    const st = new ChunkedStore(access);
    expect(st.migrateStep()).toBe('more'); // planned: all 250
    // the other page's first step lands: its chunk, noted here as collaboration delivers it
    const other = midMove(100, 200, 0)['ipyagent/000000'] as JsonObject;
    access.set('ipyagent/000000', other);
    st.noteChunk('ipyagent/000000', other);
    for (let r = st.migrateStep(); r === 'more'; r = st.migrateStep()) {
      // the rest of this page's steps
    }
    expect(chunkedIds(md).sort()).toEqual(ALL(250).sort()); // before: 350
    // every entry once (in the order of the chunks: the other page's came first)
    expect((idsOf(view(new ChunkedStore(access))) as string[]).sort()).toEqual(ALL(250).sort());
  });

  it('and sets aside a session whose entries are no list, on a write and on an idle move', () => {
    const broken = () => {
      const value = LONG() as { sessions: { [n: string]: Json } };
      value.sessions.b = { header: {}, leaf: null, entries: { not: 'a list' } };
      return value as unknown as Json;
    };
    const aside = [
      {
        session: 'b',
        where: 'metadata.ipyagent.sessions.b.entries',
        reason: 'must be a list of entries, not object',
        raw: { not: 'a list' }
      }
    ];
    const written = plainMetadata({ ipyagent: broken() });
    new ChunkedStore(written.access).apply({ session: 's', entries: [entry(250)], leaf: id(250) });
    expect((written.md.ipyagent as { set_aside: Json }).set_aside).toEqual(aside);
    const moved = plainMetadata({ ipyagent: broken() });
    const st = new ChunkedStore(moved.access);
    for (let r = st.migrateStep(); r === 'more'; r = st.migrateStep()) {
      // every step
    }
    expect((moved.md.ipyagent as { set_aside: Json }).set_aside).toEqual(aside);
    expect(chunkedIds(moved.md).sort()).toEqual(ALL(250).sort());
  });
});
