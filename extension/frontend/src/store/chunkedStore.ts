/**
 * The session store in the notebook's metadata, written in layout 3 (layout3.ts): a small index
 * under `ipyagent` and immutable chunks under `ipyagent/NNNNNN`, so a turn writes only its new
 * entries (one new key per chunk) and the small index. A notebook in layout 1 is moved into
 * layout 3 a chunk at a time while the page is idle (`migrateStep`, migration.ts), or at its
 * first write if that comes first; layout 2's chunks are kept as they are (new chunks are text).
 * The ids held are read once and then kept up to date from the chunks written (here or, through
 * `noteChunk`, by another page): no message copies, serialises or compares the whole store.
 */

import { entryIds, integral, isObject, own, put } from '../json';
import type { Json, JsonObject } from '../protocol';
import { CHUNK_LIMIT, chunkKey, chunkNumber, isStrayKey, strayNotice } from './chunkKeys';
import { entriesIn } from './layout1';
import { chunkIds, isChunk, isChunked, leavesFromOf, readChunked } from './layout2';
import { LAYOUT_TEXT, textChunks } from './layout3';
import { IMetadataAccess, IUpdate, METADATA_KEY } from './metadata';
import { IMoved, LayoutMove, outside } from './migration';

const NUMBERS_USED_UP =
  `ipyagent: this notebook's chunk numbers are used up (a chunk numbered near ${CHUNK_LIMIT}): ` +
  "new entries are not stored in its metadata (the kernel keeps them, and a run's journal output holds them).";

/** What storing an update did. */
export interface IStored {
  /** entries newly added */
  stored: number;
  /** ids of the update's entries that the store now holds (new or already there) */
  ids: string[];
  /** whether the metadata changed */
  changed: boolean;
}

/** The update's entries with string ids that `held` lacks (each once), and all their ids. */
function freshEntries(entries: Json[] | undefined, held: Set<string>): { fresh: Json[]; ids: string[] } {
  const fresh: Json[] = [];
  const ids: string[] = [];
  const seen = new Set<string>();
  for (const e of entries ?? []) {
    if (!isObject(e) || typeof e.id !== 'string') {
      continue;
    }
    if (!held.has(e.id) && !seen.has(e.id)) {
      seen.add(e.id);
      fresh.push(e);
    }
    ids.push(e.id);
  }
  return { fresh, ids };
}

/** Take the update's leaf, header, settings and active into the index and its session. */
function takeFields(index: JsonObject, session: JsonObject, update: IUpdate, onlyIfNew: boolean): void {
  for (const field of ['leaf', 'header', 'settings'] as const) {
    if (update[field] !== undefined) {
      session[field] = update[field] as Json;
    }
  }
  if (update.active || (onlyIfNew && typeof index.active !== 'string')) {
    index.active = update.session;
  }
}

/** The set under `name` in `map`, made when missing. */
function setIn(map: Map<string, Set<string>>, name: string): Set<string> {
  let set = map.get(name);
  if (!set) {
    set = new Set();
    map.set(name, set);
  }
  return set;
}

export class ChunkedStore {
  private loaded = false;
  /** the number of the next chunk written */
  private next = 0;
  /** chunks numbered from here carry leaves newer than the index's */
  private leavesFrom = 0;
  /** per session, the leaf of its newest chunk numbered from `leavesFrom` */
  private readonly chunkLeaf = new Map<string, Json>();
  /** per session, the ids of the entries stored */
  private readonly ids = new Map<string, Set<string>>();
  /** per session, the ids of the entries in chunks (also in layout 1, where readers ignore them:
   * a move cut short, another page's move), which a move into layout 3 never writes again */
  private readonly inChunks = new Map<string, Set<string>>();
  /** a move into layout 3 (`migrateStep`), and the layout-1 value as last read */
  private readonly move = new LayoutMove();

  /** `report` is told each problem of the store once (a stray key, no chunk number left). */
  constructor(
    private readonly access: IMetadataAccess,
    private readonly report: (text: string) => void = () => undefined
  ) {}

  /** What the last finished move into layout 3 moved. */
  get moved(): IMoved | null {
    return this.move.moved;
  }

  /** Read again on the next use (the metadata was replaced: a reload from disk, a deletion). */
  invalidate(): void {
    this.loaded = false;
    this.move.reset();
  }

  /** A chunk key was added (here or by another page): its entries are held. */
  noteChunk(key: string, value: unknown): void {
    const n = chunkNumber(key);
    if (!this.loaded || n === null) {
      return;
    }
    this.next = Math.max(this.next, n + 1);
    if (isChunk(value)) {
      chunkIds(value, this.held(value.session as string));
      chunkIds(value, this.chunked(value.session as string));
      if (n >= this.leavesFrom && Object.prototype.hasOwnProperty.call(value, 'leaf')) {
        this.chunkLeaf.set(value.session as string, value.leaf as Json);
      }
    }
  }

  /** The index was written (here or by another page): chunk leaves before its `next_chunk` are
   * older than its own. A move into layout 3 under way starts again from the new index (what it
   * moved stays moved). */
  noteIndex(value: unknown): void {
    this.move.forget();
    if (!this.loaded || !isObject(value)) {
      return;
    }
    const from = leavesFromOf(value);
    if (from !== this.leavesFrom) {
      this.leavesFrom = from;
      this.chunkLeaf.clear();
    }
  }

  /** The store as layout 1 (`{version: 1, active, sessions: {name: {…, entries}}}`), or the
   * stored value as it is when it is not an object. What cannot be read is under `set_aside`
   * with its key and reason (layout2.ts `readChunked`). */
  assemble(): unknown {
    const index = this.move.layout1 ?? this.access.get(METADATA_KEY);
    if (!isChunked(index) || !isObject(index)) {
      // layout 1: the value itself (kept, unchanged, for a move into layout 3 to plan from)
      this.move.layout1 = isObject(index) ? index : null;
      return index;
    }
    const { value, strays } = readChunked(index, this.access);
    this.noteStrays(strays);
    return value;
  }

  /** Store an update (idempotent by entry id); with `onlyIfNew` (journals) leaf, header,
   * settings and active are taken only when it added an entry. */
  apply(update: IUpdate, onlyIfNew = false): IStored {
    this.load();
    const name = update.session;
    const held = this.held(name);
    const { fresh, ids } = freshEntries(update.entries, held);
    if (onlyIfNew && fresh.length === 0) {
      return { stored: 0, ids, changed: false }; // a journal that adds nothing changes nothing
    }
    const raw = this.access.get(METADATA_KEY);
    const index: JsonObject = isObject(raw) ? raw : {};
    const converting = !isChunked(index);
    if (this.next + fresh.length + (converting ? entriesIn(index) : 0) > CHUNK_LIMIT) {
      this.report(NUMBERS_USED_UP);
      return { stored: 0, ids: [], changed: false };
    }
    for (const e of fresh) {
      held.add((e as JsonObject).id as string);
    }
    const upgraded = this.upgrade(index, converting);
    const session = this.sessionIn(index, name);
    const before = JSON.stringify(index);
    const oldLeaf = session.leaf;
    if (!onlyIfNew || fresh.length > 0) {
      takeFields(index, session, update, onlyIfNew);
    }
    // The usual turn changes only the leaf: it goes into the new chunk, and the index stays.
    let leafOnly = false;
    if (!upgraded && fresh.length > 0) {
      const leaf = session.leaf;
      session.leaf = oldLeaf;
      leafOnly = JSON.stringify(index) === before;
      session.leaf = leaf;
    }
    if (leafOnly) {
      this.writeChunks(name, fresh, session.leaf ?? null);
      return { stored: fresh.length, ids, changed: true };
    }
    this.writeChunks(name, fresh);
    const changed = (upgraded || JSON.stringify(index) !== before) && this.writeIndex(index);
    return { stored: fresh.length, ids, changed: changed || fresh.length > 0 };
  }

  /**
   * One step of moving a layout-1 store into layout 3 (call it while the page is idle): the
   * first step reads the store and plans the chunks, each next one writes one chunk (at most
   * CHUNK_ENTRIES entries), and the last one writes the index, which then no longer holds the
   * entries. Until then readers read layout 1 (they ignore chunk keys there), so a move cut
   * short loses nothing. 'more' while steps remain; 'done' once the index is written (then
   * `moved` says what was moved); 'none' when there is nothing to move.
   */
  migrateStep(): 'none' | 'more' | 'done' {
    this.load();
    const move = this.move;
    if (!move.underWay) {
      // a layout-1 value read for the push already is the store as it is now (a copy: reading
      // a long session's value again would be the one long task of the move)
      const raw = move.layout1 ?? this.access.get(METADATA_KEY);
      return move.begin(raw, this.next, this.inChunks) ? 'more' : 'none'; // apply() says why when no numbers are left
    }
    const piece = move.nextPiece();
    if (piece) {
      // what another page's move wrote since the plan is not written again
      const left = outside(piece.entries, this.inChunks.get(piece.name));
      const first = this.next;
      this.writeChunks(piece.name, left);
      move.wrote(this.next - first);
      return 'more';
    }
    // every entry is in a chunk now: the index is the value without them
    this.writeIndex(move.finish());
    return 'done';
  }

  private held(name: string): Set<string> {
    return setIn(this.ids, name);
  }

  private chunked(name: string): Set<string> {
    return setIn(this.inChunks, name);
  }

  private noteStrays(keys: string[]): void {
    const text = strayNotice(keys);
    if (text) {
      this.report(text);
    }
  }

  /** Read the ids held, the chunk leaves and the next chunk number (once, until `invalidate`). */
  private load(): void {
    if (this.loaded) {
      return;
    }
    this.ids.clear();
    this.inChunks.clear();
    this.chunkLeaf.clear();
    this.next = 0;
    const index = this.move.layout1 ?? this.access.get(METADATA_KEY);
    const chunked = isChunked(index);
    this.move.layout1 = !chunked && isObject(index) ? index : null;
    this.leavesFrom = leavesFromOf(index);
    const sessions = isObject(index) ? own(index, 'sessions') : undefined;
    if (!chunked && isObject(sessions)) {
      for (const [name, s] of Object.entries(sessions)) {
        entryIds(isObject(s) ? s.entries : null, this.held(name));
      }
    }
    const strays = this.holdChunks(chunked);
    if (chunked) {
      this.noteStrays(strays.sort());
    }
    this.loaded = true;
  }

  /** Hold the chunks' ids and leaves (in layout 1 only their numbers count for its readers, and
   * their ids for a move) and number after them; the stray keys. */
  private holdChunks(chunked: boolean): string[] {
    const leaves: [number, string, Json][] = [];
    const strays: string[] = [];
    for (const key of this.access.keys()) {
      const n = chunkNumber(key);
      if (n === null) {
        if (isStrayKey(key)) {
          strays.push(key);
        }
        continue;
      }
      this.next = Math.max(this.next, n + 1);
      const chunk = this.access.get(key);
      if (!isChunk(chunk)) {
        continue;
      }
      chunkIds(chunk, this.chunked(chunk.session as string));
      if (!chunked) {
        continue; // layout 1: its readers ignore chunks; a move leaves out what they hold
      }
      chunkIds(chunk, this.held(chunk.session as string));
      if (n >= this.leavesFrom && Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        leaves.push([n, chunk.session as string, chunk.leaf as Json]);
      }
    }
    for (const [, name, leaf] of leaves.sort((a, b) => a[0] - b[0])) {
      this.chunkLeaf.set(name, leaf);
    }
    return strays;
  }

  /** Bring `index` (a copy) to layout 3 before a write: a layout-1 store's entries into chunks,
   * a layout-2 index's version (its chunks stay as they are; readers take both). Whether it
   * changed. */
  private upgrade(index: JsonObject, converting: boolean): boolean {
    if (converting) {
      for (const piece of this.move.convert(index, this.inChunks)) {
        this.writeChunks(piece.name, piece.entries);
      }
      return true;
    }
    if ((integral(own(index, 'version')) as number) < LAYOUT_TEXT) {
      index.version = LAYOUT_TEXT;
      return true;
    }
    return false;
  }

  /** The index's session `name` (made when missing), every session with the leaf in effect (the
   * newest chunk leaf wins over the index's), so the index compares as it would be written. */
  private sessionIn(index: JsonObject, name: string): JsonObject {
    if (!isObject(own(index, 'sessions'))) {
      index.sessions = {};
    }
    const sessions = index.sessions as JsonObject;
    if (!isObject(own(sessions, name))) {
      put(sessions, name, { leaf: null });
    }
    for (const [n, leaf] of this.chunkLeaf) {
      const s = own(sessions, n);
      if (isObject(s)) {
        s.leaf = leaf;
      }
    }
    return own(sessions, name) as JsonObject;
  }

  /** Write the index, which now holds every session's leaf in effect: chunk leaves from here on
   * are newer. True (it changed the metadata). */
  private writeIndex(index: JsonObject): boolean {
    index.next_chunk = this.next;
    this.leavesFrom = this.next;
    this.chunkLeaf.clear();
    this.access.set(METADATA_KEY, index);
    return true;
  }

  /** New immutable chunks (layout3.ts `textChunks`) under the next numbers. */
  private writeChunks(name: string, entries: Json[], leaf?: Json): void {
    for (const chunk of textChunks(name, entries, leaf)) {
      if (Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        this.chunkLeaf.set(name, chunk.leaf as Json);
      }
      this.access.set(chunkKey(this.next++), chunk);
    }
  }
}
