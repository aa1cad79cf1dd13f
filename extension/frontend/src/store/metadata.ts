/**
 * What the session store works on: the notebook's metadata, one key at a time (the model's, or a
 * plain object's in the tests), and the updates it stores (an `entries` message or a journal
 * output). The layouts of the stored value are in layout1.ts, layout2.ts and layout3.ts
 * (docs/protocol.md, "Notebook metadata").
 */

import type { Json, JsonObject } from '../protocol';

/** The index (layouts 2 and 3) or the whole store (layout 1) is the value under this key. */
export const METADATA_KEY = 'ipyagent';

/** What the store needs of the notebook's metadata (the model, or a plain object). */
export interface IMetadataAccess {
  /** every metadata key (without copying the values) */
  keys(): Iterable<string>;
  /** one key's value (the model returns a copy) */
  get(key: string): unknown;
  set(key: string, value: JsonObject): void;
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

/** The name a journal of session `name` is kept under when a kernel that had not loaded the
 * notebook's session wrote it (store/validation.py `foreign_session_name`). */
export function foreignSessionName(name: string, headerId: string): string {
  return `${name}-${headerId.slice(0, 8)}`;
}

/**
 * Where a journal's update goes (docs/protocol.md, "Journal"): as it is, unless the session of
 * its name holds entries (`held`) under another header (`storedHeaderId`) — a kernel that had not
 * loaded the notebook's session wrote it. Then, when one of its entries hangs from a held entry,
 * only its entries (a branch; no header, leaf or settings); else all of it under a session of
 * its own (`foreignSessionName`), never made active.
 */
export function journalUpdate(update: IUpdate, held: Set<string>, storedHeaderId: unknown): IUpdate {
  const header = update.header;
  const theirs =
    typeof header === 'object' && header !== null && !Array.isArray(header) ? (header as JsonObject).id : undefined;
  if (typeof theirs !== 'string' || typeof storedHeaderId !== 'string' || theirs === storedHeaderId || !held.size) {
    return update;
  }
  const hangs = (update.entries ?? []).some(e => {
    const parent = typeof e === 'object' && e !== null && !Array.isArray(e) ? (e as JsonObject).parentId : undefined;
    return typeof parent === 'string' && held.has(parent);
  });
  if (hangs) {
    return { session: update.session, entries: update.entries };
  }
  return { ...update, session: foreignSessionName(update.session, theirs), active: false };
}
