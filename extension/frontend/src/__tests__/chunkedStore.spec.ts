/**
 * The chunked store (store/chunkedStore.ts) over a plain object: a turn writes one new chunk and
 * leaves the index alone; a layout-2 store keeps its chunks; what another page writes is held.
 */

import { readChunk } from '../store/layout2';
import type { Json } from '../protocol';
import { ChunkedStore } from '../store/chunkedStore';
import { entry, id, idsOf, plainMetadata } from './support';

describe('ChunkedStore', () => {
  it('converts layout 1 on its first write, then writes only new chunks, and reads back', () => {
    const old = {
      version: 1,
      active: 's',
      sessions: { s: { header: { id: 'h' }, leaf: id(2), entries: [entry(1), entry(2)] } }
    };
    const { md, access, writes } = plainMetadata({ ipyagent: old });
    const st = new ChunkedStore(access);
    const a = st.apply({ session: 's', entries: [entry(2)], leaf: id(2) });
    expect(writes.splice(0)).toEqual(['ipyagent/000000', 'ipyagent']); // the conversion
    expect(a.stored).toBe(0);
    expect((md.ipyagent as { version: number }).version).toBe(3);

    const b = st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    expect(writes.splice(0)).toEqual(['ipyagent/000001']); // one chunk, the index untouched
    expect(b.stored).toBe(1);
    // a chunk is its entries' JSON text (ASCII) with their ids beside it
    const chunk = md['ipyagent/000001'] as { ids: string[]; entries: string; leaf: string };
    expect(chunk.ids).toEqual([id(3)]);
    expect(typeof chunk.entries).toBe('string');
    expect(/^[\x00-\x7f]*$/.test(chunk.entries)).toBe(true);
    expect(idsOf(JSON.parse(chunk.entries))).toEqual([id(3)]);
    expect(chunk.leaf).toBe(id(3));

    const c = st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    expect(writes.splice(0)).toEqual([]);
    expect(c.stored).toBe(0);
    expect(c.ids).toEqual([id(3)]);

    st.apply({ session: 's', entries: [], leaf: id(1) });
    expect(writes.splice(0)).toEqual(['ipyagent']); // a leaf moved without entries: the index
    for (const view of [st.assemble(), new ChunkedStore(access).assemble()]) {
      const sess = (view as { sessions: { s: { entries: Json[]; leaf: Json; header: Json } } }).sessions.s;
      expect(idsOf(sess.entries)).toEqual([id(1), id(2), id(3)]);
      expect(sess.leaf).toBe(id(1));
      expect(sess.header).toEqual({ id: 'h' });
    }
  });

  it('reads layout 2 and writes text chunks after it', () => {
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
    expect((md.ipyagent as { version: number }).version).toBe(3);
    expect(md['ipyagent/000000']).toEqual(list); // never rewritten
    const text = (md['ipyagent/000001'] as { entries: string }).entries;
    expect(/^[\x00-\x7f]*$/.test(text)).toBe(true);
    expect(JSON.parse(text)).toEqual([third]);
    const sess = (new ChunkedStore(access).assemble() as { sessions: { s: { entries: Json[]; leaf: Json } } }).sessions
      .s;
    expect(idsOf(sess.entries)).toEqual([id(1), id(2), id(3)]);
    expect(sess.entries[2]).toEqual(third);
    expect(sess.leaf).toBe(id(3));
  });

  it('holds the chunks another page writes, and numbers after them', () => {
    const { md, access, writes } = plainMetadata({
      ipyagent: { version: 3, active: 's', next_chunk: 1, sessions: { s: { leaf: id(1) } } },
      'ipyagent/000000': { session: 's', ids: [id(1)], entries: JSON.stringify([entry(1)]) }
    });
    const st = new ChunkedStore(access);
    st.apply({ session: 's', entries: [entry(1)] }); // loads what is there
    const theirs = { session: 's', ids: [id(2)], entries: JSON.stringify([entry(2, id(1))]), leaf: id(2) };
    md['ipyagent/000001'] = theirs;
    st.noteChunk('ipyagent/000001', theirs);
    const again = st.apply({ session: 's', entries: [entry(2, id(1))], leaf: id(2) });
    expect(again.stored).toBe(0);
    expect(writes.splice(0)).toEqual([]);
    st.apply({ session: 's', entries: [entry(3, id(2))], leaf: id(3) });
    expect(writes).toEqual(['ipyagent/000002']);
    const view = new ChunkedStore(access).assemble() as { sessions: { s: { entries: Json[]; leaf: Json } } };
    expect(idsOf(view.sessions.s.entries)).toEqual([id(1), id(2), id(3)]);
    expect(view.sessions.s.leaf).toBe(id(3));
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
