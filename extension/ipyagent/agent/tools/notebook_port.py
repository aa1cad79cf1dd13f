"""The port the ``notebook`` tool reads and inserts cells through, as plain data and a protocol.

The notebook layer implements :class:`NotebookPort` for each place the kernel can run
(``kernel/ports/notebook_access.py``); the tool (``builtin/notebook.py``) and the tool context (``base.py``) only
know this module, which imports nothing else of the tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CellsView", "InsertedCell", "NotebookCell", "NotebookPort", "NotebookUnavailable"]


@dataclass
class NotebookCell:
    id: str
    cell_type: str  # "code", "markdown" or "raw"
    source: str
    outputs: str = ""  # the outputs as text
    execution_count: int | None = None


@dataclass
class CellsView:
    """The cells as one source sees them, and where they come from (said to the model)."""

    cells: list[NotebookCell]
    origin: str  # e.g. "the live notebook in JupyterLab", "notebook.ipynb as last saved"
    running_cell: str | None = None  # the id of the cell running the agent, when known
    notes: list[str] = field(default_factory=list)


@dataclass
class InsertedCell:
    cell_id: str | None  # the new cell's id (None when the frontend assigns it later)
    placement: str  # where it went, in words
    confirmed: bool = True  # the frontend acknowledged it (False: sent, not yet acknowledged)


class NotebookUnavailable(RuntimeError):
    """There is no notebook to read or insert into here; the message says why."""


class NotebookPort(Protocol):
    def read_cells(self) -> CellsView: ...

    def insert_cell(self, cell_type: str, source: str) -> InsertedCell:
        """Insert a cell below the running cell (after the cells inserted before in the same run)."""
        ...
