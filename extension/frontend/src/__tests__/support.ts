/**
 * What the jest tests share: a notebook's metadata as a plain object behind the store's
 * `IMetadataAccess` (values copied in and out, as the model does), with a log of the keys written;
 * and session entries as the kernel writes them.
 */

import type { Json, JsonObject } from '../protocol';
import type { IMetadataAccess } from '../store/metadata';

export interface IPlainMetadata {
  /** the metadata, as it is after the writes */
  md: { [key: string]: Json };
  access: IMetadataAccess;
  /** the keys written, in order (`splice(0)` takes and clears them) */
  writes: string[];
  /** how often the value under `ipyagent` was read */
  indexReads: () => number;
}

const copy = <T>(v: T): T => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

export function plainMetadata(md: { [key: string]: Json }): IPlainMetadata {
  const writes: string[] = [];
  let reads = 0;
  const access: IMetadataAccess = {
    keys: () => Object.keys(md),
    get: key => {
      if (key === 'ipyagent') {
        reads++;
      }
      return copy(md[key]);
    },
    set: (key, value) => {
      writes.push(key);
      md[key] = copy(value);
    }
  };
  return { md, access, writes, indexReads: () => reads };
}

/** The id of entry `i`: eight hex digits. */
export function id(i: number): string {
  return i.toString(16).padStart(8, '0');
}

/** A message entry numbered `i`. */
export function entry(i: number, parent: string | null = null, extra: JsonObject = {}): JsonObject {
  return {
    type: 'message',
    id: id(i),
    parentId: parent,
    timestamp: 't',
    message: { role: 'user', content: `m${i}` },
    ...extra
  };
}

/** The ids of a list of entries. */
export function idsOf(entries: unknown): unknown[] {
  return (entries as JsonObject[]).map(e => e.id);
}
