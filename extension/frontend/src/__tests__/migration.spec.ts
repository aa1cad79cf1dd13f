/**
 * The move of a layout-1 store into layout 3 (store/migration.ts through
 * `ChunkedStore.migrateStep`): a chunk a step, the index last; a write during a move finishes it
 * without writing an entry twice.
 */

import type { Json } from '../protocol';
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
