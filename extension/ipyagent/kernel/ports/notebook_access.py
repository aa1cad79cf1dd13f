"""The ``notebook`` tool's port in a kernel (``agent/tools/builtin/notebook.py``), three ways:

* **the bridge** — a frontend that announced ``insert_cell`` / ``read_cells`` in its ``hello_ack``
  (the JupyterLab / Notebook 7 labextension; the headless runner for ``insert_cell``) gets an
  ``insert_cell`` message (``docs/protocol.md``) and inserts the cell below the running one,
  acknowledging with the new cell's id; ``read_cells`` returns the live cells;
* **IPython's ``set_next_input``** — other frontends (classic Notebook, VS Code, a terminal) put
  the text in the next cell or prompt. IPython keeps one such payload per execution, so the cells
  of one run are joined into it, in order;
* **the kernel's history and the file on disk** — what ``read`` returns where no live view of the
  cells answers: the notebook as last saved, and the code this kernel ran.

Cells of one run go in order: each goes below the one inserted before it for the same run of the
same cell (the kernel chooses the new cells' ids, so it needs no answer to chain them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipyagent.agent.tools.notebook_port import CellsView, InsertedCell, NotebookCell, NotebookUnavailable
from ipyagent.display.untrusted import safe_markdown
from ipyagent.kernel.cell_context import cell_identity, kernel_notebook_path
from ipyagent.store.ipynb import NotebookError, read_notebook
from ipyagent.store.journal import JOURNAL_MIME

__all__ = ["KernelNotebook", "outputs_text", "new_cell_id"]

REPLY_TIMEOUT = 5.0  # seconds to wait for the frontend's answer, when answers can arrive in a cell
MAX_OUTPUT_TEXT = 10_000  # characters of one output kept when reading cells
HISTORY_CELLS = 50  # the kernel's latest inputs listed when reading without a live notebook


def new_cell_id() -> str:
    """An nbformat 4.5 cell id (``[a-zA-Z0-9-_]{1,64}``)."""
    return uuid.uuid4().hex[:16]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def outputs_text(outputs: Any) -> str:
    """A saved cell's outputs (nbformat) as text: streams, ``text/plain``, error names, and a
    placeholder for outputs without text."""
    parts: list[str] = []
    for output in outputs if isinstance(outputs, list) else []:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(_text(output.get("text", "")))
        elif kind == "error":
            parts.append(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
        elif kind in ("display_data", "execute_result"):
            found = output.get("data")
            data = found if isinstance(found, dict) else {}
            if JOURNAL_MIME in data:
                parts.append("[ipyagent: this run's session entries]")
            elif "text/plain" in data:
                parts.append(_text(data["text/plain"]))
            elif data:
                parts.append(f"[{', '.join(sorted(data))} output]")
    return _bounded("\n".join(p.rstrip("\n") for p in parts))


def _live_cells(reply: dict[str, Any]) -> list[NotebookCell]:
    cells = []
    for raw in reply.get("cells") or []:
        if not isinstance(raw, dict):
            continue
        count = raw.get("execution_count")
        cells.append(NotebookCell(str(raw.get("id") or ""), str(raw.get("cell_type") or "code"),
                                  _text(raw.get("source") or ""), _text(raw.get("outputs") or ""),
                                  count if isinstance(count, int) else None))
    return cells


class KernelNotebook:
    """The notebook port of one kernel (``runtime``: its bridge, shell and configuration)."""

    def __init__(self, shell: Any, bridge: Callable[[], Any], notebook_path: Callable[[], str | None] = lambda: None,
                 reply_timeout: float = REPLY_TIMEOUT):
        self.shell = shell
        self._bridge = bridge
        self._notebook_path = notebook_path
        self.reply_timeout = reply_timeout
        self._last_inserted: dict[tuple[str | None, int | None], str] = {}  # (cell, count) -> newest cell
        self._next_input: dict[tuple[str | None, int | None], list[tuple[str, str]]] = {}

    # ---- insert ------------------------------------------------------------------------------

    def insert_cell(self, cell_type: str, source: str) -> InsertedCell:
        running = cell_identity(self.shell)
        bridge = self._bridge()
        if bridge is not None and bridge.supports("insert_cell"):
            return self._insert_through_bridge(bridge, running, cell_type, source)
        return self._insert_as_next_input(running, cell_type, source)

    def _insert_through_bridge(self, bridge: Any, running: tuple[str | None, int | None], cell_type: str,
                               source: str) -> InsertedCell:
        anchor = running[0]
        after = self._last_inserted.get(running, anchor)
        cell_id = new_cell_id()
        seq = bridge.request("insert_cell", cell_id=cell_id, cell_type=cell_type, source=source, after=after,
                             anchor=anchor)
        if seq is None:
            return self._insert_as_next_input(running, cell_type, source)
        self._last_inserted[running] = cell_id
        placement = ("below the running cell" if after == anchor else "below the cell inserted before it") \
            if anchor else "at the end of the notebook (the running cell is not known)"
        if not bridge.answers_during_cells:
            return InsertedCell(cell_id, placement, confirmed=False)
        reply = bridge.wait_reply(seq, self.reply_timeout)
        if reply is None:
            return InsertedCell(cell_id, placement, confirmed=False)
        if reply.get("error"):
            raise NotebookUnavailable(f"The notebook did not insert the cell: {reply['error']}")
        if reply.get("placement") == "end":
            placement = "at the end of the notebook (the cell it should follow is gone)"
        return InsertedCell(str(reply.get("cell_id") or cell_id), placement, confirmed=True)

    def _insert_as_next_input(self, running: tuple[str | None, int | None], cell_type: str,
                              source: str) -> InsertedCell:
        set_next_input = getattr(self.shell, "set_next_input", None)
        if set_next_input is None:
            raise NotebookUnavailable("This frontend offers no way to insert a cell.")
        pending = self._next_input.setdefault(running, [])
        pending.append((cell_type, source))
        set_next_input(_joined(pending), replace=False)
        together = f" (joined with the {len(pending) - 1} before it)" if len(pending) > 1 else ""
        return InsertedCell(None, "as the next cell (IPython's set_next_input: this frontend has no ipyagent "
                                  f"bridge, and takes one such cell per run{together})", confirmed=False)

    # ---- read --------------------------------------------------------------------------------

    def read_cells(self) -> CellsView:
        running = cell_identity(self.shell)[0]
        bridge = self._bridge()
        note = None
        if bridge is not None and bridge.supports("read_cells") and bridge.answers_during_cells:
            seq = bridge.request("read_cells")
            reply = bridge.wait_reply(seq, self.reply_timeout) if seq is not None else None
            if reply is not None and not reply.get("error"):
                where = f"the live notebook in {bridge.frontend or 'the frontend'}"
                return CellsView(_live_cells(reply), where, running_cell=running)
            note = "(The live notebook did not answer; this is the saved file and the kernel's history.)"
        view = self._saved_and_history(running)
        if note:
            view.notes.insert(0, note)
        return view

    def _saved_and_history(self, running: str | None) -> CellsView:
        cells: list[NotebookCell] = []
        notes: list[str] = []
        origin = "this kernel's input history (no notebook file found)"
        path = self._path()
        if path is not None:
            try:
                nb = read_notebook(path)
            except (OSError, NotebookError) as exc:
                notes.append(f"(Could not read {path}: {exc})")
            else:
                for n, raw in enumerate(nb.get("cells") or []):
                    if isinstance(raw, dict):
                        count = raw.get("execution_count")
                        cells.append(NotebookCell(str(raw.get("id") or f"cell-{n}"), str(raw.get("cell_type", "code")),
                                                  _text(raw.get("source", "")), outputs_text(raw.get("outputs")),
                                                  count if isinstance(count, int) else None))
                origin = f"{path.name} as last saved on disk (unsaved edits and newer outputs are not in it)"
        history = self._history()
        if history:
            notes.append(f"Cells with ids In[n] are this kernel's latest {len(history)} inputs (code it ran, "
                         "with the value each produced, if any).")
            cells += history
        return CellsView(cells, origin, running_cell=running, notes=notes)

    def _path(self) -> Path | None:
        explicit = self._notebook_path()
        path, _ = kernel_notebook_path(self.shell, explicit)
        return path if path is not None and path.is_file() else None

    def _history(self) -> list[NotebookCell]:
        """The latest inputs, with the text their values showed when they ran (IPython's
        ``output_hist_reprs``): a value's ``__repr__`` is never run again, it may be slow or
        change, and what the user saw is what counts."""
        manager = getattr(self.shell, "history_manager", None)
        inputs = list(getattr(manager, "input_hist_raw", None) or [])
        shown_values = getattr(manager, "output_hist_reprs", None) or {}
        cells = []
        for count in range(max(1, len(inputs) - HISTORY_CELLS), len(inputs)):
            source = inputs[count]
            if not source.strip():
                continue
            shown = shown_values.get(count)
            cells.append(NotebookCell(f"In[{count}]", "code", source, _bounded(shown), count))
        return cells


def _bounded(text: Any) -> str:
    """An output's text cut to ``MAX_OUTPUT_TEXT`` ("" for none)."""
    if not isinstance(text, str):
        return ""
    return text if len(text) <= MAX_OUTPUT_TEXT else text[:MAX_OUTPUT_TEXT] + "\n… (cut)"


def _joined(pending: list[tuple[str, str]]) -> str:
    """The cells of one run as the single next input: code as it is, Markdown as a ``%%markdown``
    cell when alone, else as comment lines. The Markdown came from a model: the ``%%markdown``
    output is trusted, and a frontend renders raw HTML in it (``<img onerror>`` would run), so
    the source goes in with no raw HTML, unsafe link or image that can take effect
    (``safe_markdown``)."""
    if len(pending) == 1 and pending[0][0] == "markdown":
        return "%%markdown\n" + safe_markdown(pending[0][1])
    parts = []
    for cell_type, source in pending:
        if cell_type == "markdown":
            source = "\n".join("# " + line if line else "#" for line in source.splitlines())
        parts.append(source.rstrip("\n"))
    return "\n\n".join(parts)
