/**
 * The messages of the `ipyagent` comm (docs/protocol.md; the kernel's end is
 * `ipyagent/bridge/comm.py`), as types: a discriminated union on `type` for each direction.
 *
 * Types, and the protocol's version. What the kernel sends is untrusted JSON until
 * `readMessage` (messages.ts) has checked it; the kernel → frontend types below describe messages
 * after that check.
 */

/** The comm protocol's version (`hello_ack`), and the version of the layout-1 store value. */
export const PROTOCOL = 1;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

// ---- kernel → frontend ------------------------------------------------------------------------

/** The comm's `open` data: a kernel with the extension loaded. */
export type Hello = { type: 'hello'; protocol: Json };

/** New entries of one session, with its current leaf (and header / settings when present). */
export type Entries = {
  type: 'entries';
  seq: Json;
  session: string;
  entries: Json[];
  leaf?: Json;
  header?: Json;
  settings?: Json;
  active: boolean;
};

/** The notebook tool: a new cell below the running one. The ids are null when absent (and
 * `cell_id` also when it is not an nbformat id). */
export type InsertCell = {
  type: 'insert_cell';
  seq: Json;
  cell_id: string | null;
  cell_type: 'code' | 'markdown';
  source: string;
  after: string | null;
  anchor: string | null;
};

/** The notebook tool: every cell with its outputs as text. */
export type ReadCells = { type: 'read_cells'; seq: Json };

/** (`delete_session`, reserved in protocol.md, is never sent in version 1 and not read.) */
export type FromKernel = Hello | Entries | InsertCell | ReadCells;

/** A message of a known type whose fields are not what the protocol says (answered with an
 * error where that type has an answer). */
export type Invalid = { type: 'invalid'; of: FromKernel['type']; seq: Json };

// ---- frontend → kernel ------------------------------------------------------------------------

/** The request types this frontend answers besides `entries`, announced in `hello_ack`. */
export type Feature = 'insert_cell' | 'read_cells';

export type HelloAck = {
  type: 'hello_ack';
  protocol: number;
  frontend: string;
  path: string | null;
  features: Feature[];
  /** our comm messages reach the kernel while a cell runs (over a kernel subshell) */
  subshells: boolean;
};

/** After `entries` were stored: how many were new, and which of the message's ids are held. */
export type Ack = { type: 'ack'; seq: Json; session: string; stored: number; ids: string[] };

export type Placement = 'after' | 'anchor' | 'end';

export type InsertCellAck =
  | { type: 'insert_cell_ack'; seq: Json; cell_id: string; index: number; placement: Placement }
  /** the cell was there already (another view or tab inserted it) */
  | { type: 'insert_cell_ack'; seq: Json; cell_id: string; index: number }
  | { type: 'insert_cell_ack'; seq: Json; error: string };

export type CellText = {
  id: string;
  cell_type: string;
  source: string;
  execution_count: number | null;
  outputs: string;
};

export type Cells =
  { type: 'cells'; seq: Json; cells: CellText[]; path: string | null } | { type: 'cells'; seq: Json; error: string };

/** The document was renamed or saved under a new name (JupyterLab names a new notebook on its
 * first save): the path, relative to the server's root, as `hello_ack` gave it. */
export type PathChanged = { type: 'path'; path: string | null };

export type ToKernel = HelloAck | Ack | InsertCellAck | Cells | PathChanged;
