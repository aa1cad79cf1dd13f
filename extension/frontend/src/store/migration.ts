/**
 * The move of a layout-1 store (layout1.ts) into layout 3 (layout3.ts): planned from the
 * layout-1 value, then a chunk at a time (`ChunkedStore.migrateStep`, while the page is idle),
 * the index last, so a move cut short loses nothing (until the index is written, readers read
 * layout 1: they ignore chunk keys there). Or all at once (`convert`), when a write comes first.
 * This module keeps the move's state; the store writes the chunks and the index.
 */

import { copyExcept, entryIds, isObject, jsonType, own, put } from '../json';
import type { Json, JsonObject } from '../protocol';
import { CHUNK_LIMIT } from './chunkKeys';
import { hasSessions } from './layout1';
import { isChunked } from './layout2';
import { CHUNK_ENTRIES, LAYOUT_TEXT } from './layout3';

/** Entries of one session to write into chunks. */
export interface IPiece {
  name: string;
  entries: Json[];
}

/** Entries of a layout-1 store waiting to be moved into chunks. */
interface IMovePlan {
  /** the layout-1 index as read when the move began (its entries are dropped at the end) */
  index: JsonObject;
  /** what is left to write, at most CHUNK_ENTRIES entries a piece */
  pieces: IPiece[];
  entries: number;
  chunks: number;
}

/** What a finished move moved. */
export interface IMoved {
  entries: number;
  chunks: number;
}

/** Ids per session: the entries that sit in chunks already (another page's move wrote them, or
 * a move cut short), which a move never writes again. */
export type ChunkedIds = ReadonlyMap<string, ReadonlySet<string>>;

/** Put each session's `entries` that is not a list under the index's `set_aside` (as the Python
 * reader sets it aside: store/validation.py), so the move, which leaves the entries out of the
 * index, does not drop it. `index` is changed in place. */
function setAsideUnlisted(index: JsonObject): void {
  const sessions = own(index, 'sessions');
  if (!isObject(sessions)) {
    return;
  }
  const found: JsonObject[] = [];
  for (const [name, sess] of Object.entries(sessions)) {
    const entries = isObject(sess) ? own(sess, 'entries') : undefined;
    if (entries !== undefined && !Array.isArray(entries)) {
      const where = `metadata.ipyagent.sessions.${name}.entries`;
      found.push({ session: name, where, reason: `must be a list of entries, not ${jsonType(entries)}`, raw: entries });
    }
  }
  if (found.length === 0) {
    return;
  }
  const kept = own(index, 'set_aside');
  const aside: Json[] = Array.isArray(kept)
    ? [...kept]
    : kept === undefined
      ? []
      : [{ session: null, where: 'metadata.ipyagent.set_aside', reason: 'not a list', raw: kept }];
  index.set_aside = [...aside, ...found];
}

/** The entries of `list` whose ids `ids` lacks (all of them without `ids`). */
export function outside(list: Json[], ids: ReadonlySet<string> | undefined): Json[] {
  return ids && ids.size ? list.filter(e => !(isObject(e) && typeof e.id === 'string' && ids.has(e.id))) : list;
}

/** A layout-1 index without its sessions' entries (a new object: the value read may still be in
 * a caller's hands, the push's), as the index of layout 3; entries that are no list set aside. */
function indexWithoutEntries(layout1: JsonObject): JsonObject {
  const index = copyExcept(layout1, []);
  setAsideUnlisted(index);
  const sessions = own(layout1, 'sessions');
  if (isObject(sessions)) {
    const kept: JsonObject = {};
    for (const [name, sess] of Object.entries(sessions)) {
      put(kept, name, isObject(sess) ? copyExcept(sess, ['entries']) : sess);
    }
    index.sessions = kept;
  }
  index.version = LAYOUT_TEXT;
  return index;
}

/** The state of a move into layout 3: the plan under way, and what its steps wrote. */
export class LayoutMove {
  /** What the last finished move into layout 3 moved. */
  moved: IMoved | null = null;
  /** the layout-1 value as last read, while no write changed it (dropped by `forget`) */
  layout1: JsonObject | null = null;
  /** a move under way (`begin`) */
  private plan: IMovePlan | null = null;
  /** per session, the ids of the entries a move's steps wrote into chunks */
  private readonly written = new Map<string, Set<string>>();

  get underWay(): boolean {
    return this.plan !== null;
  }

  /** The index changed: a move under way starts again from it (what it moved stays moved). */
  forget(): void {
    this.plan = null;
    this.layout1 = null;
  }

  /** The store is read again, or was moved: nothing is under way, nothing was moved. */
  reset(): void {
    this.forget();
    this.written.clear();
  }

  /** A layout-1 session's entries that no step of a move wrote into a chunk yet, and that sit in
   * no chunk (`inChunks`: another page's move wrote them, or a move cut short). */
  unmoved(name: string, entries: unknown, inChunks: ChunkedIds = new Map()): Json[] {
    const list = Array.isArray(entries) ? (entries as Json[]) : [];
    return outside(outside(list, this.written.get(name)), inChunks.get(name));
  }

  /** Plan the move of `raw` (the value under `ipyagent`) with chunks numbered from `next`, leaving
   * out what sits in chunks already: false when there is nothing to move (or no chunk numbers
   * left for it: a write says why). */
  begin(raw: unknown, next: number, inChunks: ChunkedIds = new Map()): boolean {
    this.layout1 = null;
    if (!isObject(raw) || isChunked(raw) || !hasSessions(raw)) {
      return false;
    }
    const pieces: IPiece[] = [];
    let count = 0;
    for (const [name, s] of Object.entries(raw.sessions as JsonObject)) {
      const left = this.unmoved(name, isObject(s) ? s.entries : null, inChunks);
      for (let i = 0; i < left.length; i += CHUNK_ENTRIES) {
        pieces.push({ name, entries: left.slice(i, i + CHUNK_ENTRIES) });
      }
      count += left.length;
    }
    if (next + count > CHUNK_LIMIT) {
      return false;
    }
    this.plan = { index: raw, pieces, entries: count, chunks: 0 };
    this.layout1 = raw; // until the index is written: what the store reads
    return true;
  }

  /** The next piece to write (its entries count as moved from now on), or undefined when every
   * piece is written. */
  nextPiece(): IPiece | undefined {
    const piece = this.plan?.pieces.shift();
    if (piece) {
      let moved = this.written.get(piece.name);
      if (!moved) {
        moved = new Set();
        this.written.set(piece.name, moved);
      }
      entryIds(piece.entries, moved);
    }
    return piece;
  }

  /** A piece was written into `chunks` chunks. */
  wrote(chunks: number): void {
    if (this.plan) {
      this.plan.chunks += chunks;
    }
  }

  /** Every piece is written: the index of layout 3 to write (without `next_chunk`). */
  finish(): JsonObject {
    const plan = this.plan as IMovePlan;
    this.reset();
    this.moved = { entries: plan.entries, chunks: plan.chunks };
    return indexWithoutEntries(plan.index);
  }

  /**
   * Layout 1 → 3 at once, in place on `index` (a copy): each session's entries out of the index,
   * and returned to be written into new chunks (those a move's steps did not write already, and
   * those in no chunk: `inChunks`); entries that are no list set aside. Nothing is under way
   * after it.
   */
  convert(index: JsonObject, inChunks: ChunkedIds = new Map()): IPiece[] {
    index.version = LAYOUT_TEXT;
    index.next_chunk = 0;
    setAsideUnlisted(index);
    const pieces: IPiece[] = [];
    const sessions = own(index, 'sessions');
    if (isObject(sessions)) {
      for (const [name, s] of Object.entries(sessions)) {
        if (!isObject(s)) {
          continue;
        }
        const left = this.unmoved(name, s.entries, inChunks);
        delete s.entries;
        pieces.push({ name, entries: left });
      }
    }
    this.reset();
    return pieces;
  }
}
