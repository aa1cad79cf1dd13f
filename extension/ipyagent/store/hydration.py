"""Hydration from disk: when no frontend pushed the sessions, the kernel reads its own notebook.

The kernel learns its notebook's path (``reference/jupyter.md`` §B.1), in this order:

1. an explicit path (``%load_ext`` option / ``%agent load PATH`` / configuration);
2. ``__session__`` in the user namespace (ipykernel ≥ 6.21.2 copies ``JPY_SESSION_NAME`` there);
3. the ``JPY_SESSION_NAME`` environment variable (jupyter_server ≥ 2.0.7: the full path);
4. ``__vsc_ipynb_file__`` (VS Code's Jupyter extension);
5. in JupyterLite's Pyodide kernel, which sets none of these and runs in the notebook's folder
   under ``/drive`` (the browser's storage, mounted): the notebook there that holds the running
   cell (its id, from the kernel's parent header);

and failing all of these keeps the session in memory (the notebook layer says so once).
Reading never writes: the kernel must not rewrite a notebook a frontend holds open.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipyagent.core import Session
from ipyagent.session import deep_json
from ipyagent.session.intake import MAX_ENTRY_CHARS, LoadReport
from ipyagent.shapes import Entry
from ipyagent.store.ipynb import NotebookError, parse_notebook, read_notebook, sessions_from_notebook
from ipyagent.store.schema import NotebookSessions

__all__ = ["DRIVE", "RESET_NOTICE", "RESET_CUSTOM_TYPE", "find_notebook_path", "hydrate_from_disk",
           "kernel_reset_entry", "load_path", "notebook_holding", "reset_notice_due"]

RESET_CUSTOM_TYPE = "ipyagent.kernel_reset"
DRIVE = "/drive"  # where JupyterLite's Pyodide kernel mounts the browser's contents (its cwd is there)
RESET_NOTICE = (
    "[ipyagent] The Jupyter kernel was restarted since the earlier part of this conversation, or the "
    "session was reloaded from the saved notebook. The kernel's namespace was reset: variables, imports, "
    "functions and open resources created earlier no longer exist unless notebook cells have been "
    "run again since. Files on disk are unchanged. Before relying on a Python object from earlier, "
    "check that it exists (for example with the python tool) and recreate it if needed."
)


def kernel_reset_entry() -> Entry:
    """A ``custom_message`` entry (not shown to the user) telling the model about the reset.

    ``id``, ``parentId`` and ``timestamp`` are filled in by ``Session.append``.
    """
    return {"type": "custom_message", "customType": RESET_CUSTOM_TYPE, "content": RESET_NOTICE, "display": False}


def reset_notice_due(path: list[Entry], earlier: set[str]) -> bool:
    """Whether a model answering on ``path`` must first be told about the reset: the path holds an
    entry an earlier kernel wrote (an id in ``earlier``) and no reset notice comes after it. A
    system message (the recorded system prompt) is no work done in a kernel: it does not count."""
    if not earlier:
        return False
    for entry in reversed(path):
        if entry.get("type") == "custom_message" and entry.get("customType") == RESET_CUSTOM_TYPE:
            return False
        if entry.get("type") == "message" and entry["message"].get("role") == "system":
            continue
        if entry.get("id") in earlier:
            return True
    return False


def _candidate(value: Any) -> Path | None:
    if not isinstance(value, (str, os.PathLike)):
        return None
    text = os.fspath(value).strip()
    if not text or not text.endswith(".ipynb"):
        return None  # e.g. a console's session name
    return Path(text).expanduser()


def find_notebook_path(user_ns: Mapping[str, Any] | None, environ: Mapping[str, str] = os.environ,
                       explicit: str | os.PathLike[str] | None = None, *, cell_id: str | None = None,
                       cwd: str | None = None) -> tuple[Path | None, str]:
    """``(path, source)``: where this kernel's notebook is, and how that was learnt.

    ``source`` is ``"explicit"``, ``"__session__"``, ``"JPY_SESSION_NAME"``,
    ``"__vsc_ipynb_file__"``, ``"/drive"`` or ``"none"``. An explicit path is returned as given (it
    may name a notebook still to be written). The others must name an existing ``.ipynb`` file
    (after a rename ``JPY_SESSION_NAME`` is stale, and a console's session name is not a
    notebook); the first one that does wins. ``"/drive"``: the working directory (``cwd``, default
    the process's) is in the Pyodide kernel's ``/drive`` and one of its notebooks holds ``cell_id``.
    """
    if explicit is not None and os.fspath(explicit).strip():
        return Path(os.fspath(explicit)).expanduser(), "explicit"
    user_ns = user_ns or {}
    for source, value in (("__session__", user_ns.get("__session__")),
                          ("JPY_SESSION_NAME", environ.get("JPY_SESSION_NAME")),
                          ("__vsc_ipynb_file__", user_ns.get("__vsc_ipynb_file__"))):
        path = _candidate(value)
        if path is None:
            continue
        if path.is_file():
            return path, source
        # jupyter_server < 2.0.7 gave a path relative to the server's root, while the kernel runs
        # in the notebook's folder: try the file name there.
        if not path.is_absolute() and len(path.parts) > 1 and Path(path.name).is_file():
            return Path(path.name), source
    found = notebook_holding(Path(cwd or os.getcwd()), cell_id) if cell_id else None
    return (found, "/drive") if found is not None else (None, "none")


def notebook_holding(folder: Path, cell_id: str) -> Path | None:
    """The notebook in ``folder`` that holds the cell ``cell_id``, when ``folder`` is in the
    Pyodide kernel's ``/drive`` (JupyterLite's contents) and exactly one notebook there holds it."""
    drive = Path(DRIVE)
    if folder != drive and drive not in folder.parents:
        return None
    holding = []
    for candidate in sorted(folder.glob("*.ipynb")):
        try:
            cells = parse_notebook(candidate.read_bytes(), str(candidate), fast=True).get("cells")
        except (OSError, NotebookError):
            continue
        if isinstance(cells, list) and any(isinstance(c, Mapping) and c.get("id") == cell_id for c in cells):
            holding.append(candidate)
    return holding[0] if len(holding) == 1 else None


def hydrate_from_disk(path: str | os.PathLike[str]) -> tuple[NotebookSessions, LoadReport]:
    """The notebook's sessions (metadata ∪ journal outputs) and what was wrong with them.

    Never raises for a missing, unreadable or malformed file: that is reported, and the result
    holds no sessions. Nothing read is ever executed.
    """
    with deep_json.paused_gc():
        return _hydrate(Path(path))


def _hydrate(path: Path) -> tuple[NotebookSessions, LoadReport]:
    report = LoadReport(source=str(path))
    try:
        # bytes: no newline translation and decoding pass (read_text costs more than parsing)
        text = path.read_bytes()
    except FileNotFoundError:
        report.add("file", "no such notebook", kept=True)
        return NotebookSessions(None, {}, report=report), report
    except OSError as exc:
        report.add("file", f"cannot read the notebook ({exc})", kept=True)
        return NotebookSessions(None, {}, report=report), report
    try:
        nb = parse_notebook(text, str(path), fast=True)
    except NotebookError as exc:
        try:
            text.decode("utf-8")  # only now: the fast parser checked the encoding itself
        except UnicodeDecodeError as bad:
            report.add("file", f"cannot read the notebook ({bad})", kept=True)
        else:
            report.add("file", str(exc), kept=True)
        return NotebookSessions(None, {}, report=report), report
    # No single entry can be larger than the whole file (in characters, at most its bytes): skip
    # the size walk for small files.
    return sessions_from_notebook(nb, source=str(path), check_sizes=len(text) > MAX_ENTRY_CHARS)


def load_path(path: str | os.PathLike[str]) -> tuple[NotebookSessions, LoadReport]:
    """Sessions of a notebook (metadata ∪ journal outputs) or of a Pi ``.jsonl`` file."""
    path = Path(path)
    if path.suffix == ".ipynb":
        return sessions_from_notebook(read_notebook(path), source=str(path))
    session = Session.from_file(path)
    found = NotebookSessions.from_session(path.stem, session, {})
    found.set_aside = [{"session": path.stem, **item} for item in session.set_aside]  # kept for an export
    return found, session.load_report
