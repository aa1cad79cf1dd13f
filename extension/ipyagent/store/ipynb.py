"""Notebook files: reading them (``metadata["ipyagent"]`` ∪ the journal outputs) and writing them.

This module reads and writes plain JSON (no nbformat at run time). Notebook files are written the
way nbformat writes them (one-space indent, sorted keys, non-ASCII kept), except that the session
data keeps its own key order, so a Pi session survives a notebook round trip byte for byte.
Only the command line writes notebook files (:func:`save_session_to_notebook_file`,
:func:`lift_notebook`): never a file a frontend holds open.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ipyagent.agent.run_config import SavedSettings
from ipyagent.session import deep_json
from ipyagent.session.intake import MAX_ENTRY_CHARS, LoadReport
from ipyagent.shapes import Ipynb, IpynbCell
from ipyagent.store.chunks import CHUNK_PREFIX, assemble, store_value, texts_under
from ipyagent.store.journal import JOURNAL_MIME, journal_outputs
from ipyagent.store.schema import DEFAULT_SESSION, METADATA_KEY, NotebookSessions
from ipyagent.store.validation import SessionGatherer

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = [
    "NotebookError",
    "dumps_notebook",
    "lift_notebook",
    "lift_notebook_report",
    "new_notebook",
    "parse_notebook",
    "read_notebook",
    "save_session_to_notebook_file",
    "session_from_notebook_file",
    "sessions_from_notebook",
    "write_notebook",
    "write_sessions_into_notebook",
]


class NotebookError(ValueError):
    """The file is not a notebook ipyagent can read (not JSON, not an object, no cells…)."""


# ---------------------------------------------------------------------------------------------
# reading


def read_notebook(path: str | Path) -> Ipynb:
    """The notebook at ``path`` as plain JSON; :class:`NotebookError` if it is not one."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_notebook(text, str(path))


def parse_notebook(text: str | bytes, source: str = "notebook", *, fast: bool = False) -> Ipynb:
    """The notebook in ``text``; a part nested too deeply for Python is held as a marker with its
    text (:mod:`ipyagent.session.deep_json`), and written back as it was by :func:`dumps_notebook`.
    ``fast``: for reading only (hydration), see :func:`ipyagent.session.deep_json.loads`."""
    try:
        nb = deep_json.loads(text, fast=fast)
    except (ValueError, RecursionError) as exc:
        raise NotebookError(f"{source} is not valid JSON ({exc})") from None
    if not isinstance(nb, dict):
        raise NotebookError(f"{source} is not a notebook (a JSON {type(nb).__name__}, not an object)")
    if not isinstance(nb.get("cells", []), list):
        raise NotebookError(f"{source} is not a notebook ('cells' is not a list)")
    if isinstance(nb.get("nbformat"), int) and nb["nbformat"] < 4:
        raise NotebookError(f"{source} is an nbformat {nb['nbformat']} notebook; only nbformat 4 is supported")
    if not isinstance(nb.get("metadata", {}), dict):
        raise NotebookError(f"{source} is not a notebook ('metadata' is not an object)")
    return cast(Ipynb, nb)


def sessions_from_notebook(nb: Ipynb, source: str = "", *, check_sizes: bool = True
                           ) -> tuple[NotebookSessions, LoadReport]:
    """``metadata["ipyagent"]`` ∪ every journal output, merged by entry id in cell order."""
    report = LoadReport(source=source)
    gather = SessionGatherer(report, check_sizes=check_sizes)
    metadata = nb.get("metadata")
    if isinstance(metadata, dict):
        gather.add_metadata(assemble(metadata), small=texts_under(metadata, MAX_ENTRY_CHARS))
    for cell_index, output_index, payload in journal_outputs(nb, positions=True):
        gather.add_journal(cell_index, payload, f"cell {cell_index + 1} output {output_index + 1} (journal)")
    return NotebookSessions.from_gathered(gather.result()), report


def session_from_notebook_file(path: str | Path, name: str | None = None, **kwargs: Any) -> Session:
    """The named (default: active) session of the notebook at ``path`` as a ``Session``."""
    path = Path(path)
    sessions, _ = sessions_from_notebook(read_notebook(path), source=str(path))
    return sessions.to_session(name, **kwargs)


# ---------------------------------------------------------------------------------------------
# writing


def write_sessions_into_notebook(nb: Ipynb, sessions: NotebookSessions, layout: int | None = None
                                 ) -> Ipynb:
    """Set ``nb["metadata"]["ipyagent"]`` (and its chunk keys, in layouts 2 and 3); nothing else
    is touched. ``layout`` 1, 2 or 3 (:mod:`ipyagent.store.chunks`); by default the one the
    notebook holds (a notebook the labextension wrote stays chunked). Returns ``nb``."""
    metadata = nb.get("metadata")
    if not isinstance(metadata, dict):
        metadata = nb["metadata"] = {}
    store_value(metadata, sessions.to_dict(), layout)
    return nb


_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def new_notebook(cells: list[IpynbCell] | None = None) -> Ipynb:
    """An empty nbformat 4.5 notebook with a Python 3 kernelspec (and ``%load_ext ipyagent``)."""
    if cells is None:
        cells = [{"cell_type": "code", "execution_count": None, "id": uuid.uuid4().hex[:8], "metadata": {},
                  "outputs": [], "source": "%load_ext ipyagent"}]
    return {"cells": cells,
            "metadata": {"kernelspec": dict(_KERNELSPEC), "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _split(value: Any) -> Any:
    return value.splitlines(True) if isinstance(value, str) else value


def _split_bundle(data: Any, keep: str | None = None) -> Any:
    """A mimebundle as nbformat writes it: text split into lines, sorted keys (``keep`` untouched)."""
    if not isinstance(data, dict):
        return _sorted(data)
    out = {}
    for key in sorted(data):
        value = data[key]
        if key == keep:
            out[key] = value
        elif isinstance(value, str) and (key.startswith("text/") or key == "image/svg+xml"):
            out[key] = value.splitlines(True)
        else:
            out[key] = _sorted(value)
    return out


def _canonical_output(output: Any) -> Any:
    if not isinstance(output, dict):
        return _sorted(output)
    kind = output.get("output_type")
    out = {}
    for key in sorted(output):
        value = output[key]
        if key == "data" and kind in ("execute_result", "display_data"):
            out[key] = _split_bundle(value, keep=JOURNAL_MIME)
        elif key == "text" and kind == "stream":
            out[key] = _split(value)
        else:
            out[key] = _sorted(value)
    return out


def _canonical_cell(cell: Any) -> Any:
    if not isinstance(cell, dict):
        return _sorted(cell)
    out = {}
    for key in sorted(cell):
        value = cell[key]
        if key == "source":
            out[key] = _split(value)
        elif key == "attachments" and isinstance(value, dict):
            out[key] = {name: _split_bundle(value[name]) for name in sorted(value)}
        elif key == "outputs" and isinstance(value, list) and cell.get("cell_type") == "code":
            out[key] = [_canonical_output(o) for o in value]
        else:
            out[key] = _sorted(value)
    return out


def _canonical(nb: Mapping[str, Any]) -> dict[str, Any]:
    """What nbformat writes (sorted keys, multi-line text split into lines), except that the
    session data (``metadata["ipyagent"]``, journal payloads) keeps its own key order."""
    out: dict[str, Any] = {}
    for key in sorted(nb):
        value = nb[key]
        if key == "metadata" and isinstance(value, dict):
            out[key] = {k: value[k] if k == METADATA_KEY or k.startswith(CHUNK_PREFIX) else _sorted(value[k])
                        for k in sorted(value)}
        elif key == "cells" and isinstance(value, list):
            out[key] = [_canonical_cell(cell) for cell in value]
        else:
            out[key] = _sorted(value)
    return out


def dumps_notebook(nb: Ipynb) -> str:
    """The notebook's text as nbformat writes it (indent 1, sorted keys, UTF-8 kept); a part read
    as a too-deep marker is written as its original text."""
    return deep_json.restore_markers(json.dumps(_canonical(nb), indent=1, ensure_ascii=False)) + "\n"


def write_notebook(path: str | Path, nb: Ipynb) -> None:
    """Write atomically (a temporary file in the same folder, then a rename)."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()  # replace the file the link points to, not the link
    text = dumps_notebook(nb)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        if path.exists():
            try:
                os.chmod(tmp, path.stat().st_mode & 0o777)
            except OSError:
                pass
        else:
            os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_session_to_notebook_file(session: Session, src: str | Path, dst: str | Path, name: str | None = None,
                                  settings: SavedSettings | None = None) -> None:
    """Write ``session`` into ``dst``'s metadata (the rest of ``src`` copied as it is).

    For the command line only: ``dst`` must not be a file a frontend holds open. Entries the
    notebook held that the session lacks are kept. ``src`` may be missing (a new notebook).
    """
    src, dst = Path(src), Path(dst)
    if src.exists():
        nb = read_notebook(src)
        sessions, _ = sessions_from_notebook(nb, source=str(src))
    else:
        nb = new_notebook()
        sessions = NotebookSessions(None, {})
    if name is None:
        name = sessions.active if sessions.active in sessions.sessions else DEFAULT_SESSION
    sessions.from_session(name, session, settings)
    write_notebook(dst, write_sessions_into_notebook(nb, sessions))


def lift_notebook(src: str | Path, dst: str | Path | None = None) -> int:
    """Move journal entries into ``metadata["ipyagent"]`` (outputs untouched); return how many
    entries were added. Idempotent: lifting a lifted notebook adds 0 and, in place, writes nothing."""
    return lift_notebook_report(src, dst)[0]


def lift_notebook_report(src: str | Path, dst: str | Path | None = None, *,
                         scrub: Callable[[NotebookSessions], object] | None = None
                         ) -> tuple[int, LoadReport, bool, int]:
    """:func:`lift_notebook` with details: ``(added, report, written, journal_outputs)``.
    ``scrub`` changes the merged sessions in place before they are written (keys out)."""
    src = Path(src)
    nb = read_notebook(src)
    found = nb.get("metadata")
    metadata = found if isinstance(found, dict) else {}
    stored = assemble(metadata)
    before, _ = NotebookSessions.from_metadata(stored, source=str(src))
    held = sum(len(s.entries) for s in before.sessions.values())
    merged, report = sessions_from_notebook(nb, source=str(src))
    if scrub is not None:
        scrub(merged)
    added = sum(len(s.entries) for s in merged.sessions.values()) - held
    journals = sum(1 for _ in journal_outputs(nb))
    new_md = merged.to_dict()
    if not merged.sessions and not merged.set_aside and stored is None:
        changed = False  # nothing to lift and nothing stored: leave the notebook as it is
    else:
        changed = new_md != stored
    target = Path(dst) if dst is not None else src
    written = False
    if changed or (dst is not None and target.resolve() != src.resolve()):
        write_notebook(target, write_sessions_into_notebook(nb, merged))
        written = True
    return max(added, 0), report, written, journals
