/**
 * Layout 4, what this frontend writes: layout 3's text chunks (layout3.ts) under keys derived
 * from the entries they hold (chunkKeys.ts `keyedKey`), so two git branches that each add a turn
 * never take one key for different entries. Nothing in a key orders the chunks: a session's keyed
 * chunks are read parents first (a chunk after the chunks that hold its entries' parents; ties:
 * the smallest `at`, then key). A chunk written with a turn carries the session's `leaf` and the
 * writer's clock `at`; the index carries the `at` of its writing; the latest chunk written after
 * the index gives the leaf. The Python reader is store/keyed_chunks.py; docs/protocol.md, "Layout 4".
 */

import { integral, isObject, own } from '../json';
import type { Json, JsonObject } from '../protocol';

export const LAYOUT_KEYED = 4;

/** A keyed chunk as read: its key, its value and its entries. */
export interface IKeyedChunk {
  key: string;
  chunk: JsonObject;
  entries: Json[];
}

/** The writer's clock of a chunk or an index (0 when it has none). */
export function chunkAt(value: unknown): number {
  return isObject(value) ? (integral(own(value, 'at')) ?? 0) : 0;
}

function before(a: [number, string], b: [number, string]): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
}

/** The reading order of one session's keyed chunks (indexes into `chunks`); chunks in a parent
 * loop (only a hostile notebook holds one) come last, by `at` and key. */
export function keyedOrder(chunks: IKeyedChunk[]): number[] {
  const owner = new Map<string, number>();
  chunks.forEach((c, i) => {
    for (const e of c.entries) {
      if (isObject(e) && typeof e.id === 'string' && !owner.has(e.id)) {
        owner.set(e.id, i);
      }
    }
  });
  const waits = chunks.map(() => 0);
  const after: number[][] = chunks.map(() => []);
  chunks.forEach((c, i) => {
    const parents = new Set<number>();
    for (const e of c.entries) {
      const p = isObject(e) ? own(e, 'parentId') : undefined;
      const j = typeof p === 'string' ? owner.get(p) : undefined;
      if (j !== undefined && j !== i) {
        parents.add(j);
      }
    }
    parents.forEach(j => after[j].push(i));
    waits[i] = parents.size;
  });
  const rank = chunks.map((c): [number, string] => [chunkAt(c.chunk), c.key]);
  const ready = chunks.map((_, i) => i).filter(i => waits[i] === 0);
  const order: number[] = [];
  while (ready.length) {
    let best = 0;
    for (let r = 1; r < ready.length; r++) {
      if (before(rank[ready[r]], rank[ready[best]])) {
        best = r;
      }
    }
    const i = ready.splice(best, 1)[0];
    order.push(i);
    for (const j of after[i]) {
      waits[j] -= 1;
      if (waits[j] === 0) {
        ready.push(j);
      }
    }
  }
  if (order.length < chunks.length) {
    const placed = new Set(order);
    const rest = chunks.map((_, i) => i).filter(i => !placed.has(i));
    rest.sort((a, b) => (before(rank[a], rank[b]) ? -1 : before(rank[b], rank[a]) ? 1 : 0));
    order.push(...rest);
  }
  return order;
}

/** A chunk's claim on its session's leaf: written after the index (`at` past `indexAt`) with a
 * leaf. */
export interface ILeafClaim {
  at: number;
  key: string;
  leaf: Json;
}

/** Whether `claim` wins over `other` (the later one; a tie: the larger key). */
export function newer(claim: ILeafClaim, other: ILeafClaim | undefined): boolean {
  return other === undefined || before([other.at, other.key], [claim.at, claim.key]);
}

/** The claim of the keyed chunk `chunk` under `key` on its session's leaf, or null. */
export function leafClaim(key: string, chunk: JsonObject, indexAt: number): ILeafClaim | null {
  const at = chunkAt(chunk);
  if (!Object.prototype.hasOwnProperty.call(chunk, 'leaf') || at <= indexAt) {
    return null;
  }
  return { at, key, leaf: chunk.leaf as Json };
}
