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
  let sess = meta.sessions[name] as unknown;
  if (!isObject(sess)) {
    sess = { leaf: null, entries: [] };
    meta.sessions[name] = sess as ISession;
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

const CHUNK_KEY = /^ipyagent\/(\d{6,})$/;

export function chunkKey(n: number): string {
  return CHUNK_PREFIX + String(n).padStart(6, '0');
}

/** The chunk's number, or null when `key` is no chunk key. */
export function chunkNumber(key: string): number | null {
  const m = CHUNK_KEY.exec(key);
  return m ? Number(m[1]) : null;
}

function isChunked(index: unknown): boolean {
  return isObject(index) && typeof index.version === 'number' && index.version >= LAYOUT_CHUNKED;
}

function entryIds(entries: unknown, into: Set<string>): void {
  for (const e of Array.isArray(entries) ? entries : []) {
    if (isObject(e) && typeof e.id === 'string') {
      into.add(e.id);
    }
  }
}

/** A chunk's entries: the list (layout 2) or parsed from its text (layout 3); [] when neither. */
export function chunkEntries(chunk: JsonObject): Json[] {
  const entries = chunk.entries;
  if (typeof entries === 'string') {
    try {
      const parsed: unknown = JSON.parse(entries);
      return Array.isArray(parsed) ? (parsed as Json[]) : [];
    } catch {
      return [];
    }
  }
  return Array.isArray(entries) ? entries : [];
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

/**
 * The session store in the notebook's metadata, written in layout 3: a small index under
 * `ipyagent` and immutable chunks under `ipyagent/NNNNNN`, so a turn writes only its new entries
 * (one new key per chunk) and the small index. A notebook in layout 1 is converted on its first
 * write; layout 2's chunks are kept as they are (new chunks are text). The ids held are read
 * once and then kept up to date from the chunks written (here or, through `noteChunk`, by another
 * page): no message copies, serialises or compares the whole store.
 */
export class ChunkedStore {
  constructor(private readonly access: IMetadataAccess) {}

  /** Read again on the next use (the metadata was replaced: a reload from disk, a deletion). */
  invalidate(): void {
    this.loaded = false;
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
      if (n >= this.leavesFrom && 'leaf' in value) {
        this.chunkLeaf.set(value.session as string, value.leaf as Json);
      }
    }
  }

  /** The index was written (here or by another page): chunk leaves before its `next_chunk` are
   * older than its own. */
  noteIndex(value: unknown): void {
    if (!this.loaded || !isObject(value)) {
      return;
    }
    const from = typeof value.next_chunk === 'number' ? value.next_chunk : 0;
    if (from !== this.leavesFrom) {
      this.leavesFrom = from;
      this.chunkLeaf.clear();
    }
  }

  /** The store as layout 1 (`{version: 1, active, sessions: {name: {…, entries}}}`), or the
   * stored value as it is when it is not an object. */
  assemble(): unknown {
    const index = this.access.get(METADATA_KEY);
    if (!isChunked(index) || !isObject(index)) {
      return index;
    }
    const out: JsonObject = { ...index, version: PROTOCOL };
    const sessions: { [name: string]: JsonObject } = {};
    if (isObject(index.sessions)) {
      for (const [name, s] of Object.entries(index.sessions)) {
        sessions[name] = { ...(isObject(s) ? s : {}), entries: [] };
      }
    }
    const keys = [...this.access.keys()]
      .map(k => [chunkNumber(k), k] as const)
      .filter((p): p is readonly [number, string] => p[0] !== null)
      .sort((a, b) => a[0] - b[0]);
    const leavesFrom = typeof index.next_chunk === 'number' ? index.next_chunk : 0;
    for (const [n, key] of keys) {
      const chunk = this.access.get(key);
      if (!isChunk(chunk)) {
        continue;
      }
      const s = (sessions[chunk.session as string] ??= { leaf: null, entries: [] });
      for (const e of chunkEntries(chunk)) {
        (s.entries as Json[]).push(e); // not push(...): a spread of many arguments can overflow the stack
      }
      if (n >= leavesFrom && 'leaf' in chunk) {
        s.leaf = chunk.leaf; // written after the index: newer than its leaf
      }
    }
    delete out.next_chunk;
    out.sessions = sessions;
    return out;
  }

  /** Store an update (idempotent by entry id); with `onlyIfNew` (journals) leaf, header,
   * settings and active are taken only when it added an entry. */
  apply(update: IUpdate, onlyIfNew = false): { stored: number; ids: string[]; changed: boolean } {
    this.load();
    const raw = this.access.get(METADATA_KEY);
    let before = JSON.stringify(raw ?? null);
    const index: JsonObject = isObject(raw) ? raw : {};
    let changed = false;
    if (!isChunked(index)) {
      this.convert(index);
      changed = true;
    } else if ((index.version as number) < LAYOUT_TEXT) {
      index.version = LAYOUT_TEXT; // layout 2's chunks stay as they are; readers take both
      changed = true;
    }
    if (!isObject(index.sessions)) {
      index.sessions = {};
    }
    const sessions = index.sessions as JsonObject;
    const name = update.session;
    if (!isObject(sessions[name])) {
      sessions[name] = { leaf: null };
    }
    // compare with the leaves in effect (the newest chunk leaf wins over the index's)
    for (const [n, leaf] of this.chunkLeaf) {
      if (isObject(sessions[n])) {
        (sessions[n] as JsonObject).leaf = leaf;
      }
    }
    before = JSON.stringify(index);
    const session = sessions[name] as JsonObject;
    const held = this.held(name);
    const fresh: Json[] = [];
    const ids: string[] = [];
    for (const e of update.entries ?? []) {
      if (!isObject(e) || typeof e.id !== 'string') {
        continue;
      }
      if (!held.has(e.id)) {
        held.add(e.id);
        fresh.push(e);
      }
      ids.push(e.id);
    }
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

  private held(name: string): Set<string> {
    let set = this.ids.get(name);
    if (!set) {
      set = new Set();
      this.ids.set(name, set);
    }
    return set;
  }

  private load(): void {
    if (this.loaded) {
      return;
    }
    this.ids.clear();
    this.chunkLeaf.clear();
    this.next = 0;
    const index = this.access.get(METADATA_KEY);
    const chunked = isChunked(index);
    this.leavesFrom = isObject(index) && typeof index.next_chunk === 'number' ? index.next_chunk : 0;
    if (!chunked && isObject(index) && isObject(index.sessions)) {
      for (const [name, s] of Object.entries(index.sessions)) {
        entryIds(isObject(s) ? s.entries : null, this.held(name));
      }
    }
    const leaves: [number, string, Json][] = [];
    for (const key of this.access.keys()) {
      const n = chunkNumber(key);
      if (n === null) {
        continue;
      }
      this.next = Math.max(this.next, n + 1);
      const chunk = chunked ? this.access.get(key) : null;
      if (!isChunk(chunk)) {
        continue;
      }
      chunkIds(chunk, this.held(chunk.session as string));
      if (n >= this.leavesFrom && 'leaf' in chunk) {
        leaves.push([n, chunk.session as string, chunk.leaf as Json]);
      }
    }
    for (const [, name, leaf] of leaves.sort((a, b) => a[0] - b[0])) {
      this.chunkLeaf.set(name, leaf);
    }
    this.loaded = true;
  }

  /** Layout 1 → 3, in place on `index` (a copy): each session's entries into new chunks. */
  private convert(index: JsonObject): void {
    index.version = LAYOUT_TEXT;
    index.next_chunk = 0;
    if (!isObject(index.sessions)) {
      return;
    }
    for (const [name, s] of Object.entries(index.sessions)) {
      if (!isObject(s)) {
        continue;
      }
      const entries = Array.isArray(s.entries) ? s.entries : [];
      delete s.entries;
      this.writeChunks(name, entries);
    }
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
}
