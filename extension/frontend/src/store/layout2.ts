/**
 * Layout 2, the chunked layout: a small index under `ipyagent` (`{version: 2, active,
 * next_chunk, sessions: {name: {leaf, header, settings}}, set_aside?}`) and the entries in
 * immutable chunks under keys of their own (chunkKeys.ts), `{session, entries: [...], leaf?}`.
 * Layout 3 (layout3.ts) is the same with each chunk's entries as JSON text. The reader here reads
 * both, as the Python reader does (store/chunks.py `assemble`; the test vectors in
 * tests/store/vectors hold what both read), setting aside what it cannot read with its key and
 * reason.
 */

import { copyExcept, entryIds, integral, isObject, own, put } from '../json';
import { PROTOCOL } from '../protocol';
import type { Json, JsonObject } from '../protocol';
import { STRAY_REASON, classifyKeys } from './chunkKeys';
import { entriesFromText, listedIds } from './layout3';
import { IMetadataAccess, METADATA_KEY } from './metadata';

export const LAYOUT_CHUNKED = 2;

export const SESSION_REASON = "a session of the index must be a JSON object; its chunks' entries are read without it";
export const SESSIONS_REASON =
  "the index's sessions must be a JSON object mapping names to sessions; the chunks are read without it";
const NOT_A_CHUNK = 'not a chunk ({"session": name, "entries": [...] or its JSON text})';

/** Whether the value under `ipyagent` is the index of a chunked layout (2 or 3). */
export function isChunked(index: unknown): boolean {
  const version = isObject(index) ? integral(own(index, 'version')) : null;
  return version !== null && version >= LAYOUT_CHUNKED;
}

/** The number of the first chunk whose leaf is newer than the index's (`next_chunk`). */
export function leavesFromOf(index: unknown): number {
  return isObject(index) ? (integral(own(index, 'next_chunk')) ?? 0) : 0;
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
  return { session, ...entriesFromText(entries) };
}

/** A chunk's entries ([] when it is no chunk). */
export function chunkEntries(chunk: JsonObject): Json[] {
  return readChunk(chunk).entries ?? [];
}

export function isChunk(value: unknown): value is JsonObject {
  return (
    isObject(value) &&
    typeof value.session === 'string' &&
    (Array.isArray(value.entries) || typeof value.entries === 'string')
  );
}

/** The ids a chunk holds, without parsing its text when it lists them. */
export function chunkIds(chunk: JsonObject, into: Set<string>): void {
  const listed = listedIds(chunk);
  if (listed) {
    for (const id of listed) {
      into.add(id);
    }
    return;
  }
  entryIds(chunkEntries(chunk), into);
}

/** The index's `set_aside` list (a copy), and the value that was there (undefined if none). */
function setAsideOf(index: JsonObject): { aside: Json[]; kept: Json | undefined } {
  const kept = own(index, 'set_aside');
  const aside: Json[] =
    kept === undefined
      ? []
      : Array.isArray(kept)
        ? [...kept]
        : [{ session: null, where: `${METADATA_KEY}.set_aside`, reason: 'not a list', raw: kept }];
  return { aside, kept };
}

/** The index's sessions, each with its fields and no entries yet (what is not a session is set
 * aside, and read as one without fields). */
function sessionsOf(index: JsonObject, aside: Json[]): JsonObject {
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
    const copy = copyExcept(fields, []);
    put(copy, 'entries', []);
    put(sessions, name, copy);
  }
  return sessions;
}

/** Each chunk's entries appended to its session, in the chunks' order; a chunk numbered from
 * `leavesFrom` that carries a leaf sets it (written after the index: newer than its leaf). */
function readChunks(
  access: IMetadataAccess,
  keys: [number, string][],
  leavesFrom: number,
  sessions: JsonObject,
  aside: Json[]
): void {
  for (const [n, key] of [...keys].sort((a, b) => a[0] - b[0])) {
    const chunk = access.get(key);
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
      s.leaf = chunk.leaf;
    }
  }
}

/** What is set aside for each stray key (sorted), with its value. */
function strayItems(access: IMetadataAccess, strays: string[]): Json[] {
  return strays.map(key => {
    const value = access.get(key);
    const name = isObject(value) ? own(value, 'session') : undefined;
    return {
      session: typeof name === 'string' ? name : null,
      where: key,
      reason: STRAY_REASON,
      raw: (value ?? null) as Json
    };
  });
}

/** A chunked store (layout 2 or 3, whose index is `index`) read as layout 1: `{version: 1,
 * active, sessions: {name: {…, entries}}, set_aside?}`; and its stray keys, sorted. */
export function readChunked(index: JsonObject, access: IMetadataAccess): { value: JsonObject; strays: string[] } {
  const value = copyExcept(index, ['version', 'sessions', 'next_chunk']);
  value.version = PROTOCOL;
  const { aside, kept } = setAsideOf(index);
  const sessions = sessionsOf(index, aside);
  const { chunks, strays } = classifyKeys(access.keys());
  readChunks(access, chunks, leavesFromOf(index), sessions, aside);
  strays.sort();
  for (const item of strayItems(access, strays)) {
    aside.push(item);
  }
  if (aside.length || kept !== undefined) {
    put(value, 'set_aside', aside);
  }
  put(value, 'sessions', sessions);
  return { value, strays };
}
