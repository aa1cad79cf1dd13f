/**
 * Layout 1: the whole store in one metadata value, `{version: 1, active, sessions: {name:
 * {leaf, header, settings, entries}}}` (docs/protocol.md). What the push hands to the kernel, what
 * the chunked layouts read back as, and what older notebooks hold (moved into layout 3 by
 * migration.ts). Pure functions; the input is never modified.
 */

import { clone, entryIds, isObject, own, put } from '../json';
import { PROTOCOL } from '../protocol';
import type { Json, JsonObject } from '../protocol';
import type { IUpdate } from './metadata';

export interface ISession extends JsonObject {
  entries: JsonObject[];
}

export interface IAgentMetadata extends JsonObject {
  version: number;
  sessions: { [name: string]: ISession };
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

/** The session `name` of `meta`, made (empty) when missing, with an `entries` list. */
function sessionOf(meta: IAgentMetadata, name: string): JsonObject {
  let sess = own(meta.sessions, name) as unknown;
  if (!isObject(sess)) {
    sess = { leaf: null, entries: [] };
    put(meta.sessions, name, sess as ISession);
  }
  const session = sess as JsonObject;
  if (!Array.isArray(session.entries)) {
    session.entries = [];
  }
  return session;
}

/** Append the update's entries to `list` in order, skipping ids already there (and entries
 * without a string id): how many were added, and the ids of the update's entries. */
function appendNew(list: Json[], entries: Json[]): { stored: number; ids: string[] } {
  const have = new Set<string>();
  entryIds(list, have);
  let stored = 0;
  const ids: string[] = [];
  for (const e of entries) {
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
  return { stored, ids };
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
  const session = sessionOf(meta, name);
  const { stored, ids } = appendNew(session.entries as Json[], update.entries ?? []);
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

/** How many entries the sessions of a layout-1 value hold. */
export function entriesIn(index: JsonObject): number {
  const sessions = own(index, 'sessions');
  let count = 0;
  for (const s of isObject(sessions) ? Object.values(sessions) : []) {
    count += isObject(s) && Array.isArray(s.entries) ? s.entries.length : 0;
  }
  return count;
}
