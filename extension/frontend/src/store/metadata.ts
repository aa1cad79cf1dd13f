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
