/**
 * The agent's `notebook` tool (docs/protocol.md, "The notebook tool"), on the notebook's model:
 * `insert_cell` puts a cell below the running one, `read_cells` returns the cells as text.
 */

import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';

import { insertPosition } from '../messages';
import { outputsText } from '../outputs';
import type { CellText, Cells, InsertCell, InsertCellAck, ReadCells } from '../protocol';

export function isCode(cell: ICellModel): cell is ICodeCellModel {
  return cell.type === 'code';
}

/** A new cell below the running one (or below the cell inserted before it); the ack with its id. */
export function insertCell(model: INotebookModel | null, request: InsertCell): InsertCellAck {
  const seq = request.seq;
  if (!model) {
    return { type: 'insert_cell_ack', seq, error: 'the notebook is not loaded' };
  }
  const ids: string[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    ids.push(model.cells.get(i).id);
  }
  if (request.cell_id && ids.includes(request.cell_id)) {
    // another view or tab of this notebook inserted it already
    return { type: 'insert_cell_ack', seq, cell_id: request.cell_id, index: ids.indexOf(request.cell_id) };
  }
  const { index, placement } = insertPosition(ids, request.after, request.anchor);
  const cell =
    request.cell_type === 'code'
      ? { cell_type: 'code', source: request.source, metadata: {}, outputs: [], execution_count: null }
      : { cell_type: 'markdown', source: request.source, metadata: {} };
  const shared = model.sharedModel.insertCell(index, {
    ...cell,
    ...(request.cell_id ? { id: request.cell_id } : {})
  });
  return { type: 'insert_cell_ack', seq, cell_id: shared.getId(), index, placement };
}

/** The cells as they are now: id, type, source, execution count, outputs as text. */
export function readCells(model: INotebookModel | null, seq: ReadCells['seq'], path: string | null): Cells {
  if (!model) {
    return { type: 'cells', seq, error: 'the notebook is not loaded' };
  }
  const cells: CellText[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    const code = isCode(cell);
    cells.push({
      id: cell.id,
      cell_type: cell.type,
      source: cell.sharedModel.getSource(),
      execution_count: code ? (cell.executionCount ?? null) : null,
      outputs: code && cell.outputs ? outputsText(cell.outputs.toJSON()) : ''
    });
  }
  return { type: 'cells', seq, cells, path };
}
