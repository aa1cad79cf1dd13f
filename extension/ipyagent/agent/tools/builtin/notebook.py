"""``notebook(action, …)``: the agent reads the notebook's cells and inserts new ones.

The tool is written against a small port, :class:`NotebookPort` (``read_cells``, ``insert_cell``),
that the notebook layer implements for each place the kernel can run: through the bridge to
JupyterLab / Notebook 7 or the headless runner, with IPython's ``set_next_input`` elsewhere, and
from the kernel's history and the file on disk when no live view of the cells exists.

``read`` runs without asking; ``insert`` changes the notebook, so it asks first like ``write``
(unless ``Agent.tool_approval = "auto"``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ipyagent.agent.tools.notebook_port import (
    CellsView,
    NotebookCell,
    NotebookPort,
    NotebookUnavailable,
)
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from ipyagent.shapes import JsonSchema

MAX_OUTPUT_CHARS_PER_CELL = 2000  # a cell's outputs in a listing: head and tail kept
CELL_TYPES = ("code", "markdown")


def _clip_outputs(text: str, limit: int = MAX_OUTPUT_CHARS_PER_CELL) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - limit:,} characters of output not shown) …\n{text[-half:]}"


def format_cell(cell: NotebookCell, index: int, running: str | None) -> str:
    label = f"[{index}] id={cell.id} {cell.cell_type}"
    if cell.execution_count is not None:
        label += f" In[{cell.execution_count}]"
    if running and cell.id == running:
        label += " (the cell running you)"
    parts = [label, cell.source.rstrip("\n") or "(empty)"]
    if cell.outputs.strip():
        parts.append("--- outputs ---\n" + _clip_outputs(cell.outputs.rstrip("\n")))
    return "\n".join(parts)


def format_cells(view: CellsView, cell_id: str | None = None) -> tuple[str, bool]:
    """The model's text for ``read`` (head-truncated at Pi's limits), and whether it is an error."""
    cells = list(enumerate(view.cells))
    if cell_id is not None:
        cells = [(i, c) for i, c in cells if c.id == cell_id]
        if not cells:
            known = ", ".join(c.id for c in view.cells[:50]) or "none"
            return f"No cell with id {cell_id!r} in {view.origin}. Cell ids: {known}.", True
    header = f"{len(view.cells)} cells, from {view.origin}."
    if cell_id is not None:
        header = f"Cell {cell_id}, from {view.origin}."
    body = "\n\n".join(format_cell(c, i, view.running_cell) for i, c in cells)
    text = "\n".join([header, *view.notes]) + "\n\n" + (body or "(no cells)")
    t = truncate_head(text)
    if not t.truncated:
        return text, False
    limit = (f"{DEFAULT_MAX_LINES} lines" if t.truncated_by == "lines" else format_size(DEFAULT_MAX_BYTES))
    return (f"{t.content}\n\n[Showing the first {limit}; read one cell with cell_id to see the rest.]",
            False)


class NotebookTool(Tool):
    name = "notebook"
    description = (
        "Read the notebook's cells, or insert a new cell. action=\"read\": every cell (index, id, "
        "type, source, outputs as text), or only the one with cell_id. action=\"insert\": a new "
        "code or markdown cell with `source`, placed below the cell that is running you (after "
        "cells you inserted before in this run); it is not executed. Use insert to leave code the "
        "user should keep or run, or notes, in the visible notebook."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["read", "insert"], "description": "read or insert"},
            "cell_id": {"type": "string", "description": "read: only this cell (its id)"},
            "cell_type": {"type": "string", "enum": list(CELL_TYPES),
                          "description": "insert: the new cell's type (default code)"},
            "source": {"type": "string", "description": "insert: the new cell's source"},
        },
        "required": ["action"],
    }

    def approval_reason(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return None if arguments.get("action") == "read" else ""  # reading runs freely, inserting asks

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        action = arguments["action"]
        if action not in ("read", "insert"):
            return ToolOutput(f'Unknown action {action!r}: use "read" or "insert".', is_error=True)
        port = context.notebook
        if port is None:
            return ToolOutput("There is no notebook here (ipyagent is not running inside a notebook "
                              "kernel), so there are no cells to read or insert.", is_error=True)
        try:
            if action == "read":
                text, is_error = format_cells(port.read_cells(), arguments.get("cell_id"))
                return ToolOutput(text, is_error=is_error)
            return self._insert(port, arguments)
        except NotebookUnavailable as exc:
            return ToolOutput(str(exc), is_error=True)

    @staticmethod
    def _insert(port: NotebookPort, arguments: dict[str, Any]) -> ToolOutput:
        cell_type = arguments.get("cell_type") or "code"
        if cell_type not in CELL_TYPES:
            return ToolOutput(f"cell_type must be \"code\" or \"markdown\", got {cell_type!r}.", is_error=True)
        source = arguments.get("source")
        if source is None:
            return ToolOutput("insert needs `source`: the new cell's text.", is_error=True)
        done = port.insert_cell(cell_type, source)
        what = f"a {cell_type} cell" + (f" (id {done.cell_id})" if done.cell_id else "")
        if done.confirmed:
            text = f"Inserted {what} {done.placement}. It was not executed."
        else:
            text = f"Requested {what} {done.placement}; the notebook adds it. It is not executed."
        details = {"cell_id": done.cell_id, "cell_type": cell_type, "confirmed": done.confirmed}
        return ToolOutput(text, details=details)
