/**
 * The chunked store (store/chunkedStore.ts) over a plain object: a turn writes one new chunk, keyed
 * by its entries, and leaves the index alone; a layout-2 store keeps its chunks; what another page
 * writes is held; two git branches' turns never share a key and their union reads both; a journal
 * of a kernel that had not loaded the session never takes it over.
 */

import { readChunk } from '../store/layout2';
import type { Json, JsonObject } from '../protocol';
import { fnv1a64, keyedKey } from '../store/chunkKeys';
import { ChunkedStore } from '../store/chunkedStore';
import { applyUpdate } from '../store/layout1';
import { entry, id, idsOf, plainMetadata } from './support';

type Sessions = { sessions: { [name: string]: { entries: Json[]; leaf: Json; header?: Json } }; active?: Json };
const sessionsOf = (st: ChunkedStore) => st.assemble() as Sessions;

describe('ChunkedStore', () => {
  it('converts layout 1 on its first write, then writes only new chunks, and reads back', () => {
    const old = {
      version: 1,
      active: 's',
      sessions: { s: { header: { id: 'h' }, leaf: id(2), entries: [entry(1), entry(2, id(1))] } }
    };
    const { md, access, writes } = plainMetadata({ ipyagent: old });
    const st = new ChunkedStore(access);
    const a = st.apply({ session: 's', entries: [entry(2, id(1))], leaf: id(2) });
    expect(writes.splice(0)).toEqual([keyedKey('s', [id(1), id(2)]), 'ipyagent']); // the conversion
    expect(a.stored).toBe(0);
    const index = md.ipyagent as { version: number; at: number };
    expect(index.version).toBe(4);
    expect(index.at).toBeGreaterThan(0);

    const b = st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    const key = keyedKey('s', [id(3)]);
    expect(writes.splice(0)).toEqual([key]); // one chunk, the index untouched
    expect(b.stored).toBe(1);
    // a chunk is its entries' JSON text (ASCII) with their ids beside it, the leaf and the clock
    const chunk = md[key] as { ids: string[]; entries: string; leaf: string; at: number };
    expect(chunk.ids).toEqual([id(3)]);
    expect(typeof chunk.entries).toBe('string');
    expect(/^[\x00-\x7f]*$/.test(chunk.entries)).toBe(true);
    expect(idsOf(JSON.parse(chunk.entries))).toEqual([id(3)]);
    expect(chunk.leaf).toBe(id(3));
    expect(chunk.at).toBeGreaterThan(index.at);

    const c = st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    expect(writes.splice(0)).toEqual([]);
    expect(c.stored).toBe(0);
    expect(c.ids).toEqual([id(3)]);

    st.apply({ session: 's', entries: [], leaf: id(1) });
    expect(writes.splice(0)).toEqual(['ipyagent']); // a leaf moved without entries: the index
    expect((md.ipyagent as { at: number }).at).toBeGreaterThan(chunk.at); // past every chunk's leaf
    for (const view of [sessionsOf(st), sessionsOf(new ChunkedStore(access))]) {
      const sess = view.sessions.s;
      expect(idsOf(sess.entries)).toEqual([id(1), id(2), id(3)]);
      expect(sess.leaf).toBe(id(1));
      expect(sess.header).toEqual({ id: 'h' });
    }
  });

  it('reads layout 2 and writes keyed text chunks after it', () => {
    // Text is ASCII: an entry with non-ASCII text is written with escapes and reads back the same.
    const list = { session: 's', entries: [entry(1), entry(2, id(1))] };
    const { md, access } = plainMetadata({
      ipyagent: { version: 2, active: 's', next_chunk: 1, sessions: { s: { header: { id: 'h' }, leaf: id(2) } } },
      'ipyagent/000000': list
    });
    const third = entry(3, id(2), { note: 'café ☕ 日本' });
    const st = new ChunkedStore(access);
    expect(st.apply({ session: 's', entries: [entry(2, id(1))], leaf: id(2) }).stored).toBe(0); // in the list chunk
    expect(st.apply({ session: 's', entries: [third], leaf: id(3) }).stored).toBe(1);
    expect((md.ipyagent as { version: number; next_chunk: number }).version).toBe(4);
    expect((md.ipyagent as { next_chunk: number }).next_chunk).toBe(1); // the numbered chunk's leaf: the past
    expect(md['ipyagent/000000']).toEqual(list); // never rewritten
    const text = (md[keyedKey('s', [id(3)])] as { entries: string }).entries;
    expect(/^[\x00-\x7f]*$/.test(text)).toBe(true);
    expect(JSON.parse(text)).toEqual([third]);
    const sess = sessionsOf(new ChunkedStore(access)).sessions.s;
    expect(idsOf(sess.entries)).toEqual([id(1), id(2), id(3)]);
    expect(sess.entries[2]).toEqual(third);
    expect(sess.leaf).toBe(id(3));
  });

  it('holds the chunks another page writes', () => {
    const first = { session: 's', ids: [id(1)], entries: JSON.stringify([entry(1)]) };
    const { md, access, writes } = plainMetadata({
      ipyagent: { version: 4, active: 's', at: 10, sessions: { s: { leaf: id(1) } } },
      [keyedKey('s', [id(1)])]: first
    });
    const st = new ChunkedStore(access);
    st.apply({ session: 's', entries: [entry(1)] }); // loads what is there
    const theirs = { session: 's', ids: [id(2)], entries: JSON.stringify([entry(2, id(1))]), leaf: id(2), at: 20 };
    md[keyedKey('s', [id(2)])] = theirs;
    st.noteChunk(keyedKey('s', [id(2)]), theirs);
    const again = st.apply({ session: 's', entries: [entry(2, id(1))], leaf: id(2) });
    expect(again.stored).toBe(0);
    expect(writes.splice(0)).toEqual([]);
    st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    expect(writes).toEqual([keyedKey('s', [id(3)])]);
    expect((md[keyedKey('s', [id(3)])] as { at: number }).at).toBeGreaterThan(20); // later than what it read
    const view = sessionsOf(new ChunkedStore(access));
    expect(idsOf(view.sessions.s.entries)).toEqual([id(1), id(2), id(3)]);
    expect(view.sessions.s.leaf).toBe(id(3));
  });

  it("derives its keys as the Python store does (FNV-1a 64 of the session's name and the ids)", () => {
    const bytes = (text: string) => new TextEncoder().encode(text);
    expect(fnv1a64(bytes(''))).toBe('cbf29ce484222325');
    expect(fnv1a64(bytes('a'))).toBe('af63dc4c8601ec8c');
    expect(fnv1a64(bytes('foobar'))).toBe('85944171f73967e8');
    expect(keyedKey('probe', ['feedf00d'])).toBe('ipyagent/a30bc92ba9c1ac8b'); // tests/store/test_keyed_layout.py
    expect(keyedKey('s', ['a', 'b'])).toBe(`ipyagent/${fnv1a64(bytes('s\na\nb'))}`);
  });

  it("writes two git branches' turns under keys of their own, and their union reads both", () => {
    const base = () =>
      plainMetadata({
        ipyagent: { version: 4, active: 's', at: 10, sessions: { s: { header: { id: 'h' }, leaf: id(1) } } },
        [keyedKey('s', [id(1)])]: { session: 's', ids: [id(1)], entries: JSON.stringify([entry(1)]) }
      });
    const ours = base();
    const theirs = base();
    // two machines' clocks, ours later (the same millisecond on both would be a tie)
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_000);
    new ChunkedStore(theirs.access).apply({ session: 's', entries: [entry(3, id(1))], leaf: id(3) });
    now.mockReturnValue(2_000);
    new ChunkedStore(ours.access).apply({ session: 's', entries: [entry(2, id(1))], leaf: id(2) });
    now.mockRestore();
    expect(ours.writes).toHaveLength(1);
    expect(theirs.writes).toHaveLength(1);
    expect(ours.writes[0]).not.toBe(theirs.writes[0]);
    const merged = plainMetadata({ ...theirs.md, ...ours.md }); // git's merge of the keys: both
    const sess = sessionsOf(new ChunkedStore(merged.access)).sessions.s;
    expect(idsOf(sess.entries).sort()).toEqual([id(1), id(2), id(3)]);
    expect(idsOf(sess.entries)[0]).toBe(id(1)); // parents first
    expect(sess.leaf).toBe(id(2)); // the later turn's (our store wrote last)
  });

  it('never lets a journal of a kernel that had not loaded the session take it over', () => {
    const { md, access } = plainMetadata({
      ipyagent: { version: 4, active: 's', at: 10, sessions: { s: { header: { id: 'h-stored' }, leaf: id(2) } } },
      [keyedKey('s', [id(1), id(2)])]: {
        session: 's',
        ids: [id(1), id(2)],
        entries: JSON.stringify([entry(1), entry(2, id(1))])
      }
    });
    const st = new ChunkedStore(access);
    const foreign = { session: 's', header: { id: 'a1b2c3d4-other' }, leaf: id(11), settings: { model: 'x' } };
    st.apply({ ...foreign, entries: [entry(10), entry(11, id(10))] }, true); // a new root: its own session
    st.apply({ ...foreign, entries: [entry(12, id(1))], leaf: id(12) }, true); // from a stored entry: a branch
    const view = sessionsOf(new ChunkedStore(access));
    expect(view.active).toBe('s');
    expect(view.sessions.s.header).toEqual({ id: 'h-stored' });
    expect(view.sessions.s.leaf).toBe(id(2));
    expect(idsOf(view.sessions.s.entries)).toEqual([id(1), id(2), id(12)]);
    expect(idsOf(view.sessions['s-a1b2c3d4'].entries)).toEqual([id(10), id(11)]);
    expect(view.sessions['s-a1b2c3d4'].header).toEqual({ id: 'a1b2c3d4-other' });
    expect(Object.keys(md)).toContain(keyedKey('s-a1b2c3d4', [id(10), id(11)]));
    // layout 1's pure update does the same
    const one: JsonObject = {
      version: 1,
      active: 's',
      sessions: { s: { header: { id: 'h-stored' }, leaf: id(1), entries: [entry(1)] } }
    };
    const lifted = applyUpdate(one, { ...foreign, entries: [entry(10)] }, true).metadata.sessions;
    expect(idsOf(lifted.s.entries)).toEqual([id(1)]);
    expect(idsOf(lifted['s-a1b2c3d4'].entries)).toEqual([id(10)]);
  });

  it('sets aside a chunk whose text is not a list, with the reason the Python reader gives', () => {
    expect(readChunk({ session: 's', entries: '{"a": 1}' })).toEqual({
      session: 's',
      entries: null,
      problem: "the chunk's entries are a JSON object, not a list"
    });
    expect(readChunk({ session: 's', entries: '[' }).problem).toMatch(/^the chunk's entries are not valid JSON/);
    expect(readChunk({ entries: [] }).session).toBeNull();
  });
});
