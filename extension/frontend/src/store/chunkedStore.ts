/**
 * The session store in the notebook's metadata, written in layout 4 (layout4.ts): a small index
 * under `ipyagent` and immutable chunks under keys derived from the entries they hold, so a turn
 * writes only its new entries (one new key per chunk, carrying the leaf and the writer's clock)
 * and two git branches never write one key. A notebook in layout 1 is moved into layout 4 a
 * chunk at a time while the page is idle (`migrateStep`, migration.ts), or at its first write if
 * that comes first; the numbered chunks of layouts 2 and 3 are kept as they are. The ids held are
 * read once and then kept up to date from the chunks written (here or, through `noteChunk`, by
 * another page): no message copies, serialises or compares the whole store.
 */

import { entryIds, integral, isObject, own, put } from '../json';
import type { Json, JsonObject } from '../protocol';
import { chunkNumber, isKeyedKey, isStrayKey, keyedKey, strayNotice } from './chunkKeys';
import { chunkIds, isChunk, isChunked, leavesFromOf, readChunked } from './layout2';
import { textChunks } from './layout3';
import { ILeafClaim, LAYOUT_KEYED, chunkAt, leafClaim, newer } from './layout4';
import { IMetadataAccess, IUpdate, METADATA_KEY, journalUpdate } from './metadata';
import { IMoved, LayoutMove, outside } from './migration';

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
  /** after the largest number of a numbered chunk (layouts 2, 3): the index's `next_chunk` */
  private next = 0;
  /** numbered chunks from here carry leaves newer than the index's */
  private leavesFrom = 0;
  /** per session, the leaf of its newest numbered chunk from `leavesFrom` */
  private readonly chunkLeaf = new Map<string, Json>();
  /** the index's clock: keyed chunks with a later `at` carry leaves newer than its own */
  private indexAt = 0;
  /** per session, the latest keyed chunk's leaf written after the index */
  private readonly claims = new Map<string, ILeafClaim>();
  /** the latest clock written or read: the next `at` is later than it */
  private clock = 0;
  /** per session, the ids of the entries stored */
  private readonly ids = new Map<string, Set<string>>();
  /** per session, the ids of the entries in chunks (also in layout 1, where readers ignore them:
   * a move cut short, another page's move), which a move into layout 4 never writes again */
  private readonly inChunks = new Map<string, Set<string>>();
  /** a move into layout 4 (`migrateStep`), and the layout-1 value as last read */
  private readonly move = new LayoutMove();

  /** `report` is told each problem of the store once (a stray key, no chunk number left). */
  constructor(
    private readonly access: IMetadataAccess,
    private readonly report: (text: string) => void = () => undefined
  ) {}

  /** What the last finished move into layout 4 moved. */
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
    if (!this.loaded || (n === null && !isKeyedKey(key))) {
      return;
    }
    if (n !== null) {
      this.next = Math.max(this.next, n + 1);
    }
    if (isChunk(value)) {
      chunkIds(value, this.held(value.session as string));
      chunkIds(value, this.chunked(value.session as string));
      this.holdLeaf(key, n, value);
    }
  }

  /** The index was written (here or by another page): chunk leaves older than it (numbered before
   * its `next_chunk`, keyed with an earlier `at`) are its past. A move into layout 4 under way
   * starts again from the new index (what it moved stays moved). */
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
    this.indexAt = chunkAt(value);
    this.clock = Math.max(this.clock, this.indexAt);
    for (const [name, claim] of [...this.claims]) {
      if (claim.at <= this.indexAt) {
        this.claims.delete(name);
      }
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
   * settings and active are taken only when it added an entry, and a journal of a kernel that
   * had not loaded the notebook's session never takes the session over (metadata.ts `journalUpdate`). */
  apply(update: IUpdate, onlyIfNew = false): IStored {
    this.load();
    const raw = this.access.get(METADATA_KEY);
    const index: JsonObject = isObject(raw) ? raw : {};
    if (onlyIfNew) {
      update = journalUpdate(update, this.held(update.session), this.headerId(index, update.session));
    }
    const name = update.session;
    const held = this.held(name);
    const { fresh, ids } = freshEntries(update.entries, held);
    if (onlyIfNew && fresh.length === 0) {
      return { stored: 0, ids, changed: false }; // a journal that adds nothing changes nothing
    }
    for (const e of fresh) {
      held.add((e as JsonObject).id as string);
    }
    const upgraded = this.upgrade(index, !isChunked(index));
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
   * One step of moving a layout-1 store into layout 4 (call it while the page is idle): the
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
      return move.begin(raw, this.inChunks) ? 'more' : 'none';
    }
    const piece = move.nextPiece();
    if (piece) {
      // what another page's move wrote since the plan is not written again
      move.wrote(this.writeChunks(piece.name, outside(piece.entries, this.inChunks.get(piece.name))));
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

  /** The stored header id of session `name` (undefined when none). */
  private headerId(index: JsonObject, name: string): unknown {
    const sessions = own(index, 'sessions');
    const session = isObject(sessions) ? own(sessions, name) : undefined;
    const header = isObject(session) ? own(session, 'header') : undefined;
    return isObject(header) ? own(header, 'id') : undefined;
  }

  /** Read the ids held, the chunk leaves, the clocks and the numbered chunks' next number (once,
   * until `invalidate`). */
  private load(): void {
    if (this.loaded) {
      return;
    }
    this.ids.clear();
    this.inChunks.clear();
    this.chunkLeaf.clear();
    this.claims.clear();
    this.next = 0;
    const index = this.move.layout1 ?? this.access.get(METADATA_KEY);
    const chunked = isChunked(index);
    this.move.layout1 = !chunked && isObject(index) ? index : null;
    this.leavesFrom = leavesFromOf(index);
    this.indexAt = chunkAt(index);
    this.clock = Math.max(this.clock, this.indexAt);
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
    const leaves: [number, string, JsonObject][] = [];
    const strays: string[] = [];
    for (const key of this.access.keys()) {
      const n = chunkNumber(key);
      if (n === null && !isKeyedKey(key)) {
        if (isStrayKey(key)) {
          strays.push(key);
        }
        continue;
      }
      if (n !== null) {
        this.next = Math.max(this.next, n + 1);
      }
      const chunk = this.access.get(key);
      if (!isChunk(chunk)) {
        continue;
      }
      chunkIds(chunk, this.chunked(chunk.session as string));
      if (!chunked) {
        continue; // layout 1: its readers ignore chunks; a move leaves out what they hold
      }
      chunkIds(chunk, this.held(chunk.session as string));
      leaves.push([n ?? -1, key, chunk]);
    }
    for (const [n, key, chunk] of leaves.sort((a, b) => a[0] - b[0])) {
      this.holdLeaf(key, n < 0 ? null : n, chunk);
    }
    return strays;
  }

  /** A chunk's leaf, where it is newer than the index's: a numbered chunk's from `leavesFrom` on
   * (call them in number order), a keyed chunk's when written after the index (the latest wins). */
  private holdLeaf(key: string, n: number | null, chunk: JsonObject): void {
    const name = chunk.session as string;
    if (n !== null) {
      if (n >= this.leavesFrom && Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        this.chunkLeaf.set(name, chunk.leaf as Json);
      }
      return;
    }
    this.clock = Math.max(this.clock, chunkAt(chunk));
    const claim = leafClaim(key, chunk, this.indexAt);
    if (claim && newer(claim, this.claims.get(name))) {
      this.claims.set(name, claim);
    }
  }

  /** Bring `index` (a copy) to layout 4 before a write: a layout-1 store's entries into chunks,
   * an older chunked index's version (its chunks stay as they are; readers take all). Whether it
   * changed. */
  private upgrade(index: JsonObject, converting: boolean): boolean {
    if (converting) {
      for (const piece of this.move.convert(index, this.inChunks)) {
        this.writeChunks(piece.name, piece.entries);
      }
      return true;
    }
    if ((integral(own(index, 'version')) as number) < LAYOUT_KEYED) {
      index.version = LAYOUT_KEYED;
      return true;
    }
    return false;
  }

  /** The index's session `name` (made when missing), every session with the leaf in effect (a
   * keyed chunk's written after the index, else the newest numbered chunk's, else the index's),
   * so the index compares as it would be written. */
  private sessionIn(index: JsonObject, name: string): JsonObject {
    if (!isObject(own(index, 'sessions'))) {
      index.sessions = {};
    }
    const sessions = index.sessions as JsonObject;
    if (!isObject(own(sessions, name))) {
      put(sessions, name, { leaf: null });
    }
    const leaves = new Map<string, Json>(this.chunkLeaf);
    for (const [n, claim] of this.claims) {
      leaves.set(n, claim.leaf);
    }
    for (const [n, leaf] of leaves) {
      const s = own(sessions, n);
      if (isObject(s)) {
        s.leaf = leaf;
      }
    }
    return own(sessions, name) as JsonObject;
  }

  /** A clock later than every one written or read (milliseconds). */
  private tick(): number {
    this.clock = Math.max(Date.now(), this.clock + 1);
    return this.clock;
  }

  /** Write the index, which now holds every session's leaf in effect: chunk leaves written from
   * here on are newer. True (it changed the metadata). */
  private writeIndex(index: JsonObject): boolean {
    if (this.next > 0) {
      index.next_chunk = this.next; // the numbered chunks' leaves are the index's past
    } else {
      delete index.next_chunk;
    }
    index.at = this.tick();
    this.indexAt = index.at;
    this.leavesFrom = this.next;
    this.chunkLeaf.clear();
    this.claims.clear();
    this.access.set(METADATA_KEY, index);
    return true;
  }

  /** New immutable chunks (layout3.ts `textChunks`) under the keys of their entries (a key that
   * holds another chunk already is salted); the one with the leaf gets the clock. How many. */
  private writeChunks(name: string, entries: Json[], leaf?: Json): number {
    let count = 0;
    for (const chunk of textChunks(name, entries, leaf)) {
      if (Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        chunk.at = this.tick();
      }
      const ids = (chunk.ids as Json[]).map(i => (typeof i === 'string' ? i : ''));
      let key = keyedKey(name, ids);
      for (let salt = 1; this.takenBy(key, chunk); salt++) {
        key = keyedKey(name, ids, salt);
      }
      const claim = leafClaim(key, chunk, this.indexAt);
      if (claim) {
        this.claims.set(name, claim);
      }
      this.access.set(key, chunk);
      count += 1;
    }
    return count;
  }

  /** Whether `key` holds a chunk other than `chunk` (the same entries again is no other chunk). */
  private takenBy(key: string, chunk: JsonObject): boolean {
    const there = this.access.get(key);
    if (there === undefined) {
      return false;
    }
    if (!isObject(there)) {
      return true;
    }
    return (
      there.session !== chunk.session ||
      JSON.stringify(there.ids) !== JSON.stringify(chunk.ids) ||
      there.entries !== chunk.entries
    );
  }
}
