/**
 * Pure functions: reading the kernel's comm messages into the types of protocol.ts, and updating
 * `metadata["ipyagent"]` (docs/protocol.md) with an `entries` message or a journal output,
 * idempotently by entry id. No JupyterLab imports (and only type imports), so the logic reads
 * (and is tested with Node, tests/browser/test_frontend_store.py) on its own.
 */

import type { Entries, Feature, FromKernel, InsertCell, Invalid, Json, JsonObject, Placement } from './protocol';

export const METADATA_KEY = 'ipyagent';
export const JOURNAL_MIME = 'application/vnd.ipyagent.entries+json';
export const PROTOCOL = 1;

export interface ISession extends JsonObject {
  entries: JsonObject[];
}

export interface IAgentMetadata extends JsonObject {
  version: number;
  sessions: { [name: string]: ISession };
}

/** The parts of an `entries` message or a journal output that change the store. */
export interface IUpdate {
  session: string;
  entries: Json[];
  leaf?: Json;
  header?: Json;
  settings?: Json;
  active?: boolean;
}

export interface IApplyResult {
  /** the new metadata value (a fresh object; the input is not modified) */
  metadata: IAgentMetadata;
  /** entries newly added */
  stored: number;
  /** ids of the update's entries that the metadata now holds (new or already there) */
  ids: string[];
  /** whether anything changed (so `setMetadata` is needed) */
  changed: boolean;
}

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function clone<T>(v: T): T {
  return v === undefined ? v : JSON.parse(JSON.stringify(v));
}

/** A copy of the stored value, normalised enough to be updated (malformed parts are kept). */
export function normalise(raw: unknown): IAgentMetadata {
  const meta: JsonObject = isObject(raw) ? clone(raw) : {};
  if (typeof meta.version !== 'number') {
    meta.version = PROTOCOL;
  }
  if (!isObject(meta.sessions)) {
    meta.sessions = {};
  }
  return meta as IAgentMetadata;
}

/** True when the stored value holds at least one session. */
export function hasSessions(raw: unknown): boolean {
  return isObject(raw) && isObject(raw.sessions) && Object.keys(raw.sessions).length > 0;
}

/**
 * Apply one update. Entries are appended in order, skipping ids already present (and entries
 * without a string id). `leaf` is set when present in the update; `header` / `settings` replace
 * the stored ones when present. With `onlyIfNew`, leaf/header/settings/active are applied only
 * when the update added at least one entry (used for journals, so lifting an old journal never
 * moves the leaf back).
 */
export function applyUpdate(raw: unknown, update: IUpdate, onlyIfNew = false): IApplyResult {
  const before = normalise(raw);
  const meta = normalise(raw);
  const name = update.session;
  let sess = own(meta.sessions, name) as unknown;
  if (!isObject(sess)) {
    sess = { leaf: null, entries: [] };
    put(meta.sessions, name, sess as ISession);
  }
  const session = sess as JsonObject;
  if (!Array.isArray(session.entries)) {
    session.entries = [];
  }
  const list = session.entries as Json[];
  const have = new Set<string>();
  for (const e of list) {
    if (isObject(e) && typeof e.id === 'string') {
      have.add(e.id);
    }
  }
  let stored = 0;
  const ids: string[] = [];
  for (const e of update.entries ?? []) {
    if (!isObject(e) || typeof e.id !== 'string') {
      continue;
    }
    if (!have.has(e.id)) {
      list.push(clone(e));
      have.add(e.id);
      stored += 1;
    }
    ids.push(e.id);
  }
  if (!onlyIfNew || stored > 0) {
    if (update.leaf !== undefined) {
      session.leaf = clone(update.leaf);
    }
    if (update.header !== undefined) {
      session.header = clone(update.header);
    }
    if (update.settings !== undefined) {
      session.settings = clone(update.settings);
    }
    if (update.active || (onlyIfNew && typeof meta.active !== 'string')) {
      meta.active = name;
    }
  }
  const changed = JSON.stringify(before) !== JSON.stringify(meta);
  return { metadata: meta, stored, ids, changed };
}

/**
 * Read a comm message from the kernel: null when it is not an object or its type is none the
 * protocol knows (it is ignored), `Invalid` when a known type's fields are not valid.
 */
export function readMessage(data: unknown): FromKernel | Invalid | null {
  if (!isObject(data)) {
    return null;
  }
  const seq = data.seq ?? null;
  switch (data.type) {
    case 'hello':
      return { type: 'hello', protocol: data.protocol ?? null };
    case 'entries':
      return updateFromMessage(data) ?? { type: 'invalid', of: 'entries', seq };
    case 'insert_cell':
      return insertRequest(data) ?? { type: 'invalid', of: 'insert_cell', seq };
    case 'read_cells':
      return { type: 'read_cells', seq };
    default:
      return null;
  }
}

/** Read an `entries` comm message (or null when it is not one); it is also the store's update. */
export function updateFromMessage(data: unknown): Entries | null {
  if (!isObject(data) || data.type !== 'entries' || typeof data.session !== 'string') {
    return null;
  }
  return {
    type: 'entries',
    seq: data.seq ?? null,
    session: data.session,
    entries: Array.isArray(data.entries) ? data.entries : [],
    leaf: 'leaf' in data ? data.leaf : undefined,
    header: 'header' in data ? data.header : undefined,
    settings: 'settings' in data ? data.settings : undefined,
    active: data.active === true
  };
}

/** Read a journal output's data into an update (or null when it is not one). */
export function updateFromJournal(payload: unknown): IUpdate | null {
  if (!isObject(payload) || !Array.isArray(payload.entries)) {
    return null;
  }
  const session = typeof payload.session === 'string' ? payload.session : 'default';
  return {
    session,
    entries: payload.entries,
    leaf: 'leaf' in payload ? payload.leaf : undefined,
    header: 'header' in payload ? payload.header : undefined,
    settings: 'settings' in payload ? payload.settings : undefined,
    active: false
  };
}

/** The largest part of a push, in characters of (ASCII) JSON text: far below the server's
 * websocket limit (tornado's 10 MiB default, which operators may lower). */
export const PUSH_PART_CHARS = 1 << 20;

/** JSON text with every non-ASCII character written as a `\uXXXX` escape (still the same JSON),
 * so one character is one byte and the text can be cut between any two characters. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')
  );
}

function pushRequest(call: string): string {
  return [
    'try:',
    '    import ipyagent.bridge.comm as _ipyagent_b',
    `    _ipyagent_b.${call}`,
    '    del _ipyagent_b',
    'except (ImportError, AttributeError):',
    '    pass',
    ''
  ].join('\n');
}

/**
 * The silent execute requests' code (protocol.md "Rehydration"): one request when the JSON is
 * small, else one per part of at most `partChars` characters (bytes: the text is ASCII), sent in
 * order. The JSON goes into a Python raw triple-quoted string; every `'` is written `\u0027`
 * (still the same JSON), so no part can hold three quotes, and no part ends with an odd run of
 * backslashes (a raw string cannot end with one).
 */
export function pushCodes(meta: unknown, source: string, push: string, partChars = PUSH_PART_CHARS): string[] {
  const json = asciiJson(meta).replace(/'/g, '\\u0027');
  const src = JSON.stringify(source);
  const q = "'''";
  if (json.length <= partChars) {
    return [pushRequest(`receive_push(r${q}${json}${q}, source=${src})`)];
  }
  const parts: string[] = [];
  let start = 0;
  while (start < json.length) {
    let end = Math.min(start + partChars, json.length);
    let slashes = 0;
    while (end - slashes > start && json[end - 1 - slashes] === '\\') {
      slashes++;
    }
    if (slashes % 2 === 1) {
      end -= 1;
    }
    if (end <= start) {
      end = start + 2; // a part of one backslash: JSON always follows it with the escaped character
    }
    parts.push(json.slice(start, end));
    start = end;
  }
  const id = JSON.stringify(push);
  return parts.map((part, index) =>
    pushRequest(
      `receive_push_part(r${q}${part}${q}, push=${id}, index=${index}, count=${parts.length}, source=${src})`
    )
  );
}

/** The push as one request's code (small sessions; kept for callers and tests of version 1). */
export function pushCode(meta: unknown, source: string): string {
  return pushCodes(meta, source, 'push', Infinity)[0];
}

// ---- the notebook tool: `insert_cell` and `read_cells` requests (docs/protocol.md) -----------

/** Message types this frontend answers besides `entries`, announced in `hello_ack`. */
export const FEATURES: Feature[] = ['insert_cell', 'read_cells'];

const CELL_ID = /^[a-zA-Z0-9_-]{1,64}$/;
/** Characters of one output kept when the kernel reads the cells. */
export const MAX_OUTPUT_TEXT = 10000;

/** Read an `insert_cell` message (or null when it is not a valid one). */
function insertRequest(data: unknown): InsertCell | null {
  if (!isObject(data) || data.type !== 'insert_cell') {
    return null;
  }
  const cellType = data.cell_type;
  if ((cellType !== 'code' && cellType !== 'markdown') || typeof data.source !== 'string') {
    return null;
  }
  const text = (v: Json | undefined) => (typeof v === 'string' && v ? v : null);
  const cellId = text(data.cell_id);
  return {
    type: 'insert_cell',
    seq: data.seq ?? null,
    cell_id: cellId && CELL_ID.test(cellId) ? cellId : null,
    cell_type: cellType,
    source: data.source,
    after: text(data.after),
    anchor: text(data.anchor)
  };
}

/**
 * Where a new cell goes among cells with ids `ids`: after the cell `after` names, else after
 * `anchor` (the running cell), else at the end.
 */
export function insertPosition(
  ids: string[],
  after: string | null,
  anchor: string | null
): { index: number; placement: Placement } {
  const a = after ? ids.indexOf(after) : -1;
  if (a >= 0) {
    return { index: a + 1, placement: 'after' };
  }
  const b = anchor ? ids.indexOf(anchor) : -1;
  if (b >= 0) {
    return { index: b + 1, placement: 'anchor' };
  }
  return { index: ids.length, placement: 'end' };
}

function joined(v: unknown): string {
  return Array.isArray(v) ? v.map(String).join('') : typeof v === 'string' ? v : '';
}

/** A cell's outputs (nbformat JSON) as text: streams, `text/plain`, errors, placeholders. */
export function outputsText(outputs: unknown): string {
  const parts: string[] = [];
  for (const o of Array.isArray(outputs) ? outputs : []) {
    if (!isObject(o)) {
      continue;
    }
    let text = '';
    if (o.output_type === 'stream') {
      text = joined(o.text);
    } else if (o.output_type === 'error') {
      text = `${joined(o.ename) || 'Error'}: ${joined(o.evalue)}`;
    } else if (isObject(o.data)) {
      const data = o.data;
      if (JOURNAL_MIME in data) {
        text = "[ipyagent: this run's session entries]";
      } else if ('text/plain' in data) {
        text = joined(data['text/plain']);
      } else {
        text = `[${Object.keys(data).sort().join(', ')} output]`;
      }
    }
    if (text.length > MAX_OUTPUT_TEXT) {
      text = text.slice(0, MAX_OUTPUT_TEXT) + '\n… (cut)';
    }
    parts.push(text.replace(/\n+$/, ''));
  }
  return parts.join('\n');
}

// ---- layouts 2 and 3: the entries in chunks under keys of their own (docs/protocol.md) -------

/** What the chunked store needs of the notebook's metadata (the model, or a plain object). */
export interface IMetadataAccess {
  /** every metadata key (without copying the values) */
  keys(): Iterable<string>;
  /** one key's value (the model returns a copy) */
  get(key: string): unknown;
  set(key: string, value: JsonObject): void;
}

export const LAYOUT_CHUNKED = 2;
/** What this frontend writes: layout 2 with each chunk's entries as (ASCII) JSON text next to
 * their ids, so the model, the shared document and the server copy, compare, sign and write one
 * string per chunk, never thousands of small objects. */
export const LAYOUT_TEXT = 3;
export const CHUNK_PREFIX = `${METADATA_KEY}/`;
/** A chunk holds at most this many entries, and at most about this many characters of JSON. */
export const CHUNK_ENTRIES = 100;
export const CHUNK_CHARS = 1 << 20;

/** Chunk numbers are below this, here and in the Python readers (store/chunks.py). */
export const CHUNK_LIMIT = 1e9;
/** The one key of each number below CHUNK_LIMIT: six digits, or seven to nine without a leading
 * zero. Any other key under `ipyagent/` (`ipyagent/` and 17 digits, beyond a double's precision;
 * 400 digits, `Infinity` as a number) is stray: set aside, never read, never numbered after. */
const CHUNK_KEY = /^ipyagent\/([0-9]{6}|[1-9][0-9]{6,8})$/;
export const STRAY_REASON =
  'not a chunk key (ipyagent/ and a number below 10^9 in six digits or more, no other leading zero): ' +
  'not read, and no chunk is numbered after it';
export const SESSION_REASON = "a session of the index must be a JSON object; its chunks' entries are read without it";
export const SESSIONS_REASON =
  "the index's sessions must be a JSON object mapping names to sessions; the chunks are read without it";
const NOT_A_CHUNK = 'not a chunk ({"session": name, "entries": [...] or its JSON text})';

export function chunkKey(n: number): string {
  return CHUNK_PREFIX + String(n).padStart(6, '0');
}

/** The chunk's number, or null when `key` is no chunk key. */
export function chunkNumber(key: string): number | null {
  const m = CHUNK_KEY.exec(key);
  return m ? Number(m[1]) : null;
}

/** A key under `ipyagent/` that is no chunk key. */
export function isStrayKey(key: string): boolean {
  return key.startsWith(CHUNK_PREFIX) && chunkNumber(key) === null;
}

/** An own property (names such as `__proto__` or `constructor` are data here, never the
 * prototype's). */
function own(obj: JsonObject, key: string): Json | undefined {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

function put(obj: JsonObject, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

function integral(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) ? v : null;
}

function isChunked(index: unknown): boolean {
  const version = isObject(index) ? integral(own(index, 'version')) : null;
  return version !== null && version >= LAYOUT_CHUNKED;
}

function entryIds(entries: unknown, into: Set<string>): void {
  for (const e of Array.isArray(entries) ? entries : []) {
    if (isObject(e) && typeof e.id === 'string') {
      into.add(e.id);
    }
  }
}

function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'object' ? 'object' : typeof v;
}

/** A chunk's session and entries (the list of layout 2, or parsed from the text of layout 3), or
 * why it is not a chunk (the reasons of the Python reader, store/chunks.py). */
export function readChunk(chunk: unknown): { session: string | null; entries: Json[] | null; problem: string } {
  const name = isObject(chunk) ? own(chunk, 'session') : undefined;
  const entries = isObject(chunk) ? own(chunk, 'entries') : undefined;
  const session = typeof name === 'string' ? name : null;
  if (session === null || !(Array.isArray(entries) || typeof entries === 'string')) {
    return { session, entries: null, problem: NOT_A_CHUNK };
  }
  if (Array.isArray(entries)) {
    return { session, entries, problem: '' };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(entries);
  } catch (e) {
    return { session, entries: null, problem: `the chunk's entries are not valid JSON (${String(e)})` };
  }
  if (!Array.isArray(parsed)) {
    return { session, entries: null, problem: `the chunk's entries are a JSON ${jsonType(parsed)}, not a list` };
  }
  return { session, entries: parsed as Json[], problem: '' };
}

/** A chunk's entries ([] when it is no chunk). */
export function chunkEntries(chunk: JsonObject): Json[] {
  return readChunk(chunk).entries ?? [];
}

/** The ids a chunk holds, without parsing its text when it lists them. */
function chunkIds(chunk: JsonObject, into: Set<string>): void {
  if (typeof chunk.entries === 'string' && Array.isArray(chunk.ids)) {
    for (const id of chunk.ids) {
      if (typeof id === 'string') {
        into.add(id);
      }
    }
    return;
  }
  entryIds(chunkEntries(chunk), into);
}

function isChunk(value: unknown): value is JsonObject {
  return (
    isObject(value) &&
    typeof value.session === 'string' &&
    (Array.isArray(value.entries) || typeof value.entries === 'string')
  );
}

/** Entries of a layout-1 store waiting to be moved into chunks (`ChunkedStore.migrateStep`). */
interface IMigration {
  /** the layout-1 index as read when the move began (its entries are dropped at the end) */
  index: JsonObject;
  /** what is left to write, at most CHUNK_ENTRIES entries a piece */
  pieces: { name: string; entries: Json[] }[];
  entries: number;
  chunks: number;
}

/**
 * The session store in the notebook's metadata, written in layout 3: a small index under
 * `ipyagent` and immutable chunks under `ipyagent/NNNNNN`, so a turn writes only its new entries
 * (one new key per chunk) and the small index. A notebook in layout 1 is moved into layout 3 a
 * chunk at a time while the page is idle (`migrateStep`), or at its first write if that comes
 * first; layout 2's chunks are kept as they are (new chunks are text). The ids held are read
 * once and then kept up to date from the chunks written (here or, through `noteChunk`, by another
 * page): no message copies, serialises or compares the whole store.
 */
export class ChunkedStore {
  /** `report` is told each problem of the store once (a stray key, no chunk number left). */
  constructor(
    private readonly access: IMetadataAccess,
    private readonly report: (text: string) => void = () => undefined
  ) {}

  /** Read again on the next use (the metadata was replaced: a reload from disk, a deletion). */
  invalidate(): void {
    this.loaded = false;
    this.migration = null;
    this.layout1 = null;
    this.migrated.clear();
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
      if (n >= this.leavesFrom && Object.prototype.hasOwnProperty.call(value, 'leaf')) {
        this.chunkLeaf.set(value.session as string, value.leaf as Json);
      }
    }
  }

  /** The index was written (here or by another page): chunk leaves before its `next_chunk` are
   * older than its own. A move into layout 3 under way starts again from the new index (what it
   * moved stays moved). */
  noteIndex(value: unknown): void {
    this.migration = null;
    this.layout1 = null;
    if (!this.loaded || !isObject(value)) {
      return;
    }
    const from = integral(own(value, 'next_chunk')) ?? 0;
    if (from !== this.leavesFrom) {
      this.leavesFrom = from;
      this.chunkLeaf.clear();
    }
  }

  /** The store as layout 1 (`{version: 1, active, sessions: {name: {…, entries}}}`), or the
   * stored value as it is when it is not an object. What cannot be read is under `set_aside`
   * with its key and reason, as the Python reader puts it (store/chunks.py `assemble`; the test
   * vectors in tests/store/vectors hold what both read). */
  assemble(): unknown {
    const index = this.layout1 ?? this.access.get(METADATA_KEY);
    if (!isChunked(index) || !isObject(index)) {
      // layout 1: the value itself (kept, unchanged, for a move into layout 3 to plan from)
      this.layout1 = isObject(index) ? index : null;
      return index;
    }
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(index)) {
      if (k !== 'version' && k !== 'sessions' && k !== 'next_chunk') {
        put(out, k, v);
      }
    }
    out.version = PROTOCOL;
    const leavesFrom = integral(own(index, 'next_chunk')) ?? 0;
    const kept = own(index, 'set_aside');
    const aside: Json[] =
      kept === undefined
        ? []
        : Array.isArray(kept)
          ? [...kept]
          : [{ session: null, where: `${METADATA_KEY}.set_aside`, reason: 'not a list', raw: kept }];
    let raw = own(index, 'sessions') ?? {};
    if (!isObject(raw)) {
      aside.push({ session: null, where: METADATA_KEY, reason: SESSIONS_REASON, raw });
      raw = {};
    }
    const sessions: JsonObject = Object.create(null);
    for (const [name, s] of Object.entries(raw)) {
      let fields: JsonObject = { leaf: null };
      if (isObject(s)) {
        fields = s;
      } else {
        aside.push({ session: name, where: METADATA_KEY, reason: SESSION_REASON, raw: s });
      }
      const copy: JsonObject = {};
      for (const [k, v] of Object.entries(fields)) {
        put(copy, k, v);
      }
      put(copy, 'entries', []);
      put(sessions, name, copy);
    }
    const keys: [number, string][] = [];
    const strays: string[] = [];
    for (const k of this.access.keys()) {
      const n = chunkNumber(k);
      if (n !== null) {
        keys.push([n, k]);
      } else if (isStrayKey(k)) {
        strays.push(k);
      }
    }
    keys.sort((a, b) => a[0] - b[0]);
    for (const [n, key] of keys) {
      const chunk = this.access.get(key);
      const read = readChunk(chunk);
      if (read.entries === null || read.session === null || !isObject(chunk)) {
        aside.push({ session: read.session, where: key, reason: read.problem, raw: (chunk ?? null) as Json });
        continue;
      }
      let s = own(sessions, read.session);
      if (!isObject(s)) {
        s = { leaf: null, entries: [] };
        put(sessions, read.session, s);
      }
      const list = s.entries as Json[];
      for (const e of read.entries) {
        list.push(e); // not push(...): a spread of many arguments can overflow the stack
      }
      if (n >= leavesFrom && Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        s.leaf = chunk.leaf; // written after the index: newer than its leaf
      }
    }
    for (const key of strays.sort()) {
      const value = this.access.get(key);
      const name = isObject(value) ? own(value, 'session') : undefined;
      aside.push({
        session: typeof name === 'string' ? name : null,
        where: key,
        reason: STRAY_REASON,
        raw: (value ?? null) as Json
      });
    }
    this.noteStrays(strays);
    if (aside.length || kept !== undefined) {
      put(out, 'set_aside', aside);
    }
    put(out, 'sessions', sessions);
    return out;
  }

  /** Store an update (idempotent by entry id); with `onlyIfNew` (journals) leaf, header,
   * settings and active are taken only when it added an entry. */
  apply(update: IUpdate, onlyIfNew = false): { stored: number; ids: string[]; changed: boolean } {
    this.load();
    const name = update.session;
    const held = this.held(name);
    const fresh: Json[] = [];
    const ids: string[] = [];
    const seen = new Set<string>();
    for (const e of update.entries ?? []) {
      if (!isObject(e) || typeof e.id !== 'string') {
        continue;
      }
      if (!held.has(e.id) && !seen.has(e.id)) {
        seen.add(e.id);
        fresh.push(e);
      }
      ids.push(e.id);
    }
    if (onlyIfNew && fresh.length === 0) {
      return { stored: 0, ids, changed: false }; // a journal that adds nothing changes nothing
    }
    const raw = this.access.get(METADATA_KEY);
    const index: JsonObject = isObject(raw) ? raw : {};
    const converting = !isChunked(index);
    if (this.next + fresh.length + (converting ? this.entriesIn(index) : 0) > CHUNK_LIMIT) {
      this.report(
        `ipyagent: this notebook's chunk numbers are used up (a chunk numbered near ${CHUNK_LIMIT}): ` +
          "new entries are not stored in its metadata (the kernel keeps them, and a run's journal output holds them)."
      );
      return { stored: 0, ids: [], changed: false };
    }
    for (const e of fresh) {
      held.add((e as JsonObject).id as string);
    }
    let changed = false;
    if (converting) {
      this.convert(index);
      changed = true;
    } else if ((integral(own(index, 'version')) as number) < LAYOUT_TEXT) {
      index.version = LAYOUT_TEXT; // layout 2's chunks stay as they are; readers take both
      changed = true;
    }
    if (!isObject(own(index, 'sessions'))) {
      index.sessions = {};
    }
    const sessions = index.sessions as JsonObject;
    if (!isObject(own(sessions, name))) {
      put(sessions, name, { leaf: null });
    }
    // compare with the leaves in effect (the newest chunk leaf wins over the index's)
    for (const [n, leaf] of this.chunkLeaf) {
      const s = own(sessions, n);
      if (isObject(s)) {
        s.leaf = leaf;
      }
    }
    const before = JSON.stringify(index);
    const session = own(sessions, name) as JsonObject;
    const oldLeaf = session.leaf;
    if (!onlyIfNew || fresh.length > 0) {
      for (const field of ['leaf', 'header', 'settings'] as const) {
        if (update[field] !== undefined) {
          session[field] = update[field] as Json;
        }
      }
      if (update.active || (onlyIfNew && typeof index.active !== 'string')) {
        index.active = name;
      }
    }
    // The usual turn changes only the leaf: it goes into the new chunk, and the index stays.
    let leafOnly = false;
    if (!changed && fresh.length > 0) {
      const leaf = session.leaf;
      session.leaf = oldLeaf;
      leafOnly = JSON.stringify(index) === before;
      session.leaf = leaf;
    }
    if (leafOnly) {
      this.writeChunks(name, fresh, session.leaf ?? null);
    } else {
      this.writeChunks(name, fresh);
      if (changed || JSON.stringify(index) !== before) {
        index.next_chunk = this.next; // the index now holds every session's leaf in effect
        this.leavesFrom = this.next;
        this.chunkLeaf.clear();
        this.access.set(METADATA_KEY, index);
        changed = true;
      }
    }
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
    const m = this.migration;
    if (!m) {
      // a layout-1 value read for the push already is the store as it is now (a copy: reading
      // a long session's value again would be the one long task of the move)
      const raw = this.layout1 ?? this.access.get(METADATA_KEY);
      this.layout1 = null;
      if (!isObject(raw) || isChunked(raw) || !hasSessions(raw)) {
        return 'none';
      }
      const pieces: IMigration['pieces'] = [];
      let count = 0;
      for (const [name, s] of Object.entries(raw.sessions as JsonObject)) {
        const left = this.unmoved(name, isObject(s) ? s.entries : null);
        for (let i = 0; i < left.length; i += CHUNK_ENTRIES) {
          pieces.push({ name, entries: left.slice(i, i + CHUNK_ENTRIES) });
        }
        count += left.length;
      }
      if (this.next + count > CHUNK_LIMIT) {
        return 'none'; // apply() says why when a write comes
      }
      this.migration = { index: raw, pieces, entries: count, chunks: 0 };
      this.layout1 = raw; // until the index is written: what assemble() reads
      return 'more';
    }
    const piece = m.pieces.shift();
    if (piece) {
      let moved = this.migrated.get(piece.name);
      if (!moved) {
        moved = new Set();
        this.migrated.set(piece.name, moved);
      }
      entryIds(piece.entries, moved);
      const first = this.next;
      this.writeChunks(piece.name, piece.entries);
      m.chunks += this.next - first;
      return 'more';
    }
    this.migration = null;
    this.layout1 = null;
    this.migrated.clear();
    // every entry is in a chunk now: the index is the value without them (a new object: the
    // value read may still be in a caller's hands, the push's)
    const index: JsonObject = {};
    for (const [k, v] of Object.entries(m.index)) {
      put(index, k, v);
    }
    const sessions = own(m.index, 'sessions');
    if (isObject(sessions)) {
      const kept: JsonObject = {};
      for (const [name, sess] of Object.entries(sessions)) {
        const copy: JsonObject = {};
        for (const [k, v] of isObject(sess) ? Object.entries(sess) : []) {
          if (k !== 'entries') {
            put(copy, k, v);
          }
        }
        put(kept, name, isObject(sess) ? copy : sess);
      }
      index.sessions = kept;
    }
    index.version = LAYOUT_TEXT;
    index.next_chunk = this.next;
    this.leavesFrom = this.next;
    this.chunkLeaf.clear();
    this.access.set(METADATA_KEY, index);
    this.moved = { entries: m.entries, chunks: m.chunks };
    return 'done';
  }

  /** What the last finished move into layout 3 moved. */
  moved: { entries: number; chunks: number } | null = null;

  private held(name: string): Set<string> {
    let set = this.ids.get(name);
    if (!set) {
      set = new Set();
      this.ids.set(name, set);
    }
    return set;
  }

  /** A layout-1 session's entries that no step of a move wrote into a chunk yet. */
  private unmoved(name: string, entries: unknown): Json[] {
    const list = Array.isArray(entries) ? (entries as Json[]) : [];
    const moved = this.migrated.get(name);
    return moved ? list.filter(e => !(isObject(e) && typeof e.id === 'string' && moved.has(e.id))) : list;
  }

  private entriesIn(index: JsonObject): number {
    const sessions = own(index, 'sessions');
    let count = 0;
    for (const s of isObject(sessions) ? Object.values(sessions) : []) {
      count += isObject(s) && Array.isArray(s.entries) ? s.entries.length : 0;
    }
    return count;
  }

  private noteStrays(keys: string[]): void {
    if (!keys.length) {
      return;
    }
    const shown = keys.slice(0, 3).map(k => (k.length > 40 ? `${k.slice(0, 40)}…` : k));
    this.report(
      `ipyagent: ${keys.length} key(s) of this notebook's metadata under "${CHUNK_PREFIX}" are not chunk keys ` +
        `(${shown.join(', ')}${keys.length > 3 ? ', …' : ''}): they are set aside, not read, and no chunk is ` +
        'numbered after them.'
    );
  }

  private load(): void {
    if (this.loaded) {
      return;
    }
    this.ids.clear();
    this.chunkLeaf.clear();
    this.next = 0;
    const index = this.layout1 ?? this.access.get(METADATA_KEY);
    const chunked = isChunked(index);
    this.layout1 = !chunked && isObject(index) ? index : null;
    this.leavesFrom = isObject(index) ? (integral(own(index, 'next_chunk')) ?? 0) : 0;
    const sessions = isObject(index) ? own(index, 'sessions') : undefined;
    if (!chunked && isObject(sessions)) {
      for (const [name, s] of Object.entries(sessions)) {
        entryIds(isObject(s) ? s.entries : null, this.held(name));
      }
    }
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
      const chunk = chunked ? this.access.get(key) : null;
      if (!isChunk(chunk)) {
        continue;
      }
      chunkIds(chunk, this.held(chunk.session as string));
      if (n >= this.leavesFrom && Object.prototype.hasOwnProperty.call(chunk, 'leaf')) {
        leaves.push([n, chunk.session as string, chunk.leaf as Json]);
      }
    }
    for (const [, name, leaf] of leaves.sort((a, b) => a[0] - b[0])) {
      this.chunkLeaf.set(name, leaf);
    }
    if (chunked) {
      this.noteStrays(strays.sort());
    }
    this.loaded = true;
  }

  /** Layout 1 → 3, in place on `index` (a copy): each session's entries into new chunks (those
   * a move's steps did not write already), and out of the index. */
  private convert(index: JsonObject): void {
    index.version = LAYOUT_TEXT;
    index.next_chunk = 0;
    const sessions = own(index, 'sessions');
    if (isObject(sessions)) {
      for (const [name, s] of Object.entries(sessions)) {
        if (!isObject(s)) {
          continue;
        }
        const left = this.unmoved(name, s.entries);
        delete s.entries;
        this.writeChunks(name, left);
      }
    }
    this.migration = null;
    this.layout1 = null;
    this.migrated.clear();
  }

  /** New immutable chunks for `entries` (objects with string ids): at most CHUNK_ENTRIES each,
   * about CHUNK_CHARS of text; the last one carries `leaf` when given. */
  private writeChunks(name: string, entries: Json[], leaf?: Json): void {
    let texts: string[] = [];
    let ids: string[] = [];
    let size = 0;
    let left = entries.length;
    const flush = () => {
      if (texts.length) {
        left -= texts.length;
        const chunk: JsonObject = { session: name, ids, entries: `[${texts.join(',')}]` };
        if (leaf !== undefined && left === 0) {
          chunk.leaf = leaf;
          this.chunkLeaf.set(name, leaf);
        }
        this.access.set(chunkKey(this.next++), chunk);
        texts = [];
        ids = [];
        size = 0;
      }
    };
    for (const e of entries) {
      const text = asciiJson(e);
      if (texts.length >= CHUNK_ENTRIES || (texts.length && size + text.length > CHUNK_CHARS)) {
        flush();
      }
      texts.push(text);
      ids.push(isObject(e) && typeof e.id === 'string' ? e.id : '');
      size += text.length;
    }
    flush();
  }

  private loaded = false;
  private next = 0;
  /** chunks numbered from here carry leaves newer than the index's */
  private leavesFrom = 0;
  /** per session, the leaf of its newest chunk numbered from `leavesFrom` */
  private readonly chunkLeaf = new Map<string, Json>();
  private readonly ids = new Map<string, Set<string>>();
  /** a move into layout 3 under way (`migrateStep`) */
  private migration: IMigration | null = null;
  /** per session, the ids of the entries a move's steps wrote into chunks */
  private readonly migrated = new Map<string, Set<string>>();
  /** the layout-1 value as last read, while no write changed it (dropped by `noteIndex`) */
  private layout1: JsonObject | null = null;
}
