/**
 * Layout 3, what this frontend writes: layout 2 (layout2.ts) with each chunk's entries as one
 * string of (ASCII) JSON text, their ids beside it, so the model, the shared document and the
 * server copy, compare, sign and write one string per chunk, never thousands of small objects.
 * `{session, ids: [...], entries: "[...]", leaf?}` under a chunk key.
 */

import { asciiJson, isObject, jsonType } from '../json';
import type { Json, JsonObject } from '../protocol';

export const LAYOUT_TEXT = 3;

/** A chunk holds at most this many entries, and at most about this many characters of JSON. */
export const CHUNK_ENTRIES = 100;
export const CHUNK_CHARS = 1 << 20;

/** A text chunk's entries, or why they cannot be read (the reasons of store/chunks.py). */
export function entriesFromText(text: string): { entries: Json[] | null; problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { entries: null, problem: `the chunk's entries are not valid JSON (${String(e)})` };
  }
  if (!Array.isArray(parsed)) {
    return { entries: null, problem: `the chunk's entries are a JSON ${jsonType(parsed)}, not a list` };
  }
  return { entries: parsed as Json[], problem: '' };
}

/** The ids a text chunk lists beside its text (null when it is no text chunk with a list of ids:
 * then its entries are read for them). */
export function listedIds(chunk: JsonObject): string[] | null {
  if (typeof chunk.entries !== 'string' || !Array.isArray(chunk.ids)) {
    return null;
  }
  return chunk.ids.filter((id): id is string => typeof id === 'string');
}

/**
 * The new immutable chunks of session `name` for `entries` (objects with string ids), in order:
 * at most CHUNK_ENTRIES each, about CHUNK_CHARS of text; the last one carries `leaf` when given.
 * One at a time (a generator), so each is written before the next one's text is made.
 */
export function* textChunks(name: string, entries: Json[], leaf?: Json): Generator<JsonObject> {
  let texts: string[] = [];
  let ids: string[] = [];
  let size = 0;
  let left = entries.length;
  const chunk = (): JsonObject => {
    left -= texts.length;
    const made: JsonObject = { session: name, ids, entries: `[${texts.join(',')}]` };
    if (leaf !== undefined && left === 0) {
      made.leaf = leaf;
    }
    texts = [];
    ids = [];
    size = 0;
    return made;
  };
  for (const e of entries) {
    const text = asciiJson(e);
    if (texts.length >= CHUNK_ENTRIES || (texts.length && size + text.length > CHUNK_CHARS)) {
      yield chunk();
    }
    texts.push(text);
    ids.push(isObject(e) && typeof e.id === 'string' ? e.id : '');
    size += text.length;
  }
  if (texts.length) {
    yield chunk();
  }
}
