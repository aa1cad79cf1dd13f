/**
 * Reading the kernel's comm messages (docs/protocol.md) into the types of protocol.ts: what the
 * kernel sends is untrusted JSON until `readMessage` has checked it. And where the notebook
 * tool's new cell goes. No JupyterLab imports.
 */

import { isObject } from './json';
import type { Entries, Feature, FromKernel, InsertCell, Invalid, Json, Placement } from './protocol';

/** Message types this frontend answers besides `entries`, announced in `hello_ack`. */
export const FEATURES: Feature[] = ['insert_cell', 'read_cells'];

const CELL_ID = /^[a-zA-Z0-9_-]{1,64}$/;

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

// ---- the notebook tool: `insert_cell` requests (docs/protocol.md) ------------------------------

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
