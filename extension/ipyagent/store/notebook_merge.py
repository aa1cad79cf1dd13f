"""Merging two branches of a notebook (``ipyagent merge-driver``, the git merge driver).

A notebook holds two things git's line merge cannot join: its cells (two branches that each add
a cell at the end conflict, and the conflict markers leave invalid JSON) and its sessions (two
branches that each add turns). Here:

- **sessions** merge as trees (:func:`merge_sessions`): every entry of both sides, by id (with
  each side's journal outputs: nothing a journal held is lost); the session then has one leaf per
  branch, the current branch's (ours) active unless only theirs moved. A session of the same name
  that the other branch started afresh (another header) is kept as a session of its own, and an
  entry id that the two sides hold with different contents keeps ours, theirs under
  ``set_aside``: a side is never dropped.
- **cells** merge by nbdime's library where it merges without a conflict; else cell by cell, by
  id (:func:`merge_cells`): a cell changed on one side takes that side's change, cells added on
  either side are kept in their places, and a cell both sides changed differently is kept twice,
  ours then theirs (theirs under a new id, tagged ``ipyagent-merge-theirs``), for the user to
  choose: reported as a conflict, never resolved by dropping one.

Outputs follow their source; where both sides re-ran an unchanged cell, ours are kept (the
session entries of theirs are in the merged metadata already). The result is written in layout 4
when either side is chunked (both sides' chunks kept as they are), else in layout 1.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ipyagent.session.intake import SetAside
from ipyagent.shapes import Ipynb
from ipyagent.store.chunks import CHUNK_PREFIX, LAYOUT_KEYED, chunk_keys, layout_of, store_value
from ipyagent.store.ipynb import sessions_from_notebook
from ipyagent.store.keyed_chunks import is_keyed_key
from ipyagent.store.schema import METADATA_KEY, NotebookSessions, StoredSession
from ipyagent.store.validation import contains_set_aside, foreign_session_name

__all__ = ["MERGED_THEIRS_TAG", "MergeResult", "merge_cells", "merge_notebooks", "merge_sessions"]

MERGED_THEIRS_TAG = "ipyagent-merge-theirs"


@dataclass
class MergeResult:
    nb: dict[str, Any]
    conflicts: list[str] = field(default_factory=list)  # kept both ways: the user chooses
    notes: list[str] = field(default_factory=list)  # what was done that is worth saying

    @property
    def clean(self) -> bool:
        return not self.conflicts


# ---- sessions ------------------------------------------------------------------------------------


def _copy(stored: StoredSession) -> StoredSession:
    return StoredSession(stored.header.copy(), stored.leaf, stored.settings.copy(), list(stored.entries),
                         dict(stored.extra))


def merge_sessions(base: NotebookSessions, ours: NotebookSessions, theirs: NotebookSessions,
                   ) -> tuple[NotebookSessions, list[str], list[str]]:
    """``(merged, conflicts, notes)``: ours with everything theirs added (see the module)."""
    out = NotebookSessions(ours.active, {n: _copy(s) for n, s in ours.sessions.items()}, ours.version,
                           list(ours.set_aside), dict(ours.extra))
    conflicts: list[str] = []
    notes: list[str] = []
    for name, their in theirs.sessions.items():
        mine = out.sessions.get(name)
        if mine is None:
            out.sessions[name] = _copy(their)
            continue
        if mine.header.get("id") != their.header.get("id"):
            other = foreign_session_name(name, str(their.header.get("id")))
            notes.append(f"session {name!r}: the other branch started another session under this name; "
                         f"kept as {other!r}")
            out.sessions.setdefault(other, _copy(their))
            continue
        conflicts += _merge_entries(name, mine, their, out.set_aside)
        was = base.sessions.get(name)
        if was is None or (mine.leaf == was.leaf and their.leaf != was.leaf):  # only theirs moved on
            mine.leaf = their.leaf
        if was is not None and mine.settings == was.settings:
            mine.settings = their.settings.copy()
    if ours.active == base.active and theirs.active in out.sessions:
        out.active = theirs.active
    for item in theirs.set_aside:
        if not contains_set_aside(out.set_aside, item):
            out.set_aside.append(item)
    return out, conflicts, notes


def _merge_entries(name: str, mine: StoredSession, their: StoredSession, aside: list[SetAside]) -> list[str]:
    held = {e["id"]: e for e in mine.entries}
    conflicts = []
    for entry in their.entries:
        kept = held.get(entry["id"])
        if kept is None:
            mine.entries.append(entry)
        elif kept != entry:
            record: SetAside = {"session": name, "where": f"merge: the other branch's entry {entry['id']}",
                      "reason": "both branches hold an entry with this id, with other contents; this "
                                "branch's is in the session", "raw": entry}
            if not contains_set_aside(aside, record):
                aside.append(record)
            conflicts.append(f"session {name!r}: entry {entry['id']} differs between the branches "
                             "(theirs is under set_aside)")
    return conflicts


# ---- cells ---------------------------------------------------------------------------------------

_OUTPUT_KEYS = ("outputs", "execution_count")


def _key(cell: Any, index: int) -> str:
    cell_id = cell.get("id") if isinstance(cell, dict) else None
    return cell_id if isinstance(cell_id, str) and cell_id else f"#{index}:{json.dumps(cell, sort_keys=True)}"


def _body(cell: Any) -> Any:
    return {k: v for k, v in cell.items() if k not in _OUTPUT_KEYS} if isinstance(cell, dict) else cell


def _run(cell: Any) -> Any:
    return {k: cell.get(k) for k in _OUTPUT_KEYS} if isinstance(cell, dict) else None


def _pick(base: Any, ours: Any, theirs: Any) -> tuple[Any, bool]:
    """A three-way choice: (the value, whether both sides changed it differently)."""
    if ours == theirs or theirs == base:
        return ours, False
    if ours == base:
        return theirs, False
    return ours, True


def _merge_cell(base: Any, ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    body, clash = _pick(_body(base) if base is not None else None, _body(ours), _body(theirs))
    if clash:
        return ours, True
    if body is _body(theirs) and _body(theirs) != _body(ours):
        run = _run(theirs)  # the changed source's outputs come with it
    else:
        run, _ = _pick(_run(base) if base is not None else None, _run(ours), _run(theirs))
    merged = dict(body)
    merged.update({k: v for k, v in run.items() if k in ours or k in theirs})
    return merged, False


def merge_cells(base: list[Any], ours: list[Any], theirs: list[Any], new_id: Callable[[set[str]], str]
                ) -> tuple[list[Any], list[str]]:
    """Cells merged by id (see the module); returns the cells and the conflicts kept both ways."""
    b = {_key(c, i): c for i, c in enumerate(base)}
    t = {_key(c, i): c for i, c in enumerate(theirs)}
    o_keys = [_key(c, i) for i, c in enumerate(ours)]
    taken = {k for k in (*b, *t, *o_keys)}
    out: list[tuple[str, Any]] = []
    conflicts: list[str] = []
    for key, cell in zip(o_keys, ours):
        if key in t:
            merged, clash = _merge_cell(b.get(key), cell, t[key])
            out.append((key, merged))
            if clash:
                copy_id = new_id(taken)
                taken.add(copy_id)
                out.append((copy_id, _theirs_copy(t[key], copy_id)))
                conflicts.append(f"cell {key}: both branches changed it; theirs follows it as cell {copy_id}")
        elif key not in b or _body(b[key]) != _body(cell):
            out.append((key, cell))  # added here, or changed here and deleted there: kept
        # else: deleted by theirs and unchanged here: deleted
    placed = {k for k, _ in out}
    for index, (key, cell) in enumerate((_key(c, i), c) for i, c in enumerate(theirs)):
        if key in placed or (key in b and _body(b[key]) == _body(cell)):
            continue  # merged above, or deleted here and unchanged there
        after = next((_key(theirs[j], j) for j in range(index - 1, -1, -1) if _key(theirs[j], j) in placed), None)
        at = next((i + 1 for i, (k, _) in enumerate(out) if k == after), 0) if after is not None else 0
        while at < len(out) and out[at][0] not in b and out[at][0] not in t:
            at += 1  # after the cells this branch added there: ours, then theirs
        out.insert(at, (key, cell))
        placed.add(key)
    return [cell for _, cell in out], conflicts


def _theirs_copy(cell: dict[str, Any], cell_id: str) -> dict[str, Any]:
    out = copy.deepcopy(cell)
    out["id"] = cell_id
    metadata = out.setdefault("metadata", {})
    tags = metadata.get("tags") if isinstance(metadata.get("tags"), list) else []
    metadata["tags"] = [*tags, MERGED_THEIRS_TAG]
    return out


def _nbdime_cells(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> list[Any] | None:
    """nbdime's merge of the cells, when it merges them without a conflict (else None: it marks
    a conflict inline, as text in the source, and a known nbdime bug raises on some appends)."""
    try:
        import nbformat
        from nbdime.merging.notebooks import merge_notebooks as nbdime_merge
    except ImportError:
        return None
    sides = [nbformat.from_dict({**nb, "metadata": {}}) for nb in (base, ours, theirs)]
    try:
        merged, decisions = nbdime_merge(*sides)
    except Exception:  # noqa: BLE001 - nbdime's own failures (TypeError: unhashable NotebookNode): merge here
        return None
    if any(d.conflict for d in decisions):
        return None
    cells: list[Any] = json.loads(json.dumps(merged.get("cells", [])))
    return cells


# ---- the notebook --------------------------------------------------------------------------------


def _metadata(nb: dict[str, Any]) -> dict[str, Any]:
    found = nb.get("metadata")
    return found if isinstance(found, dict) else {}


def _plain_metadata(nb: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in _metadata(nb).items() if k != METADATA_KEY and not k.startswith(CHUNK_PREFIX)}


def merge_notebooks(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any],
                    new_id: Callable[[set[str]], str]) -> MergeResult:
    """The merge of ``ours`` and ``theirs`` (notebooks as JSON) from their common ``base`` (an
    empty notebook when the file is new on both branches). ``new_id(taken)`` names a copied cell."""
    sessions = [sessions_from_notebook(cast(Ipynb, nb))[0] for nb in (base, ours, theirs)]
    merged_sessions, conflicts, notes = merge_sessions(*sessions)
    cells = _nbdime_cells(base, ours, theirs)
    if cells is None:
        cells, cell_conflicts = merge_cells(base.get("cells") or [], ours.get("cells") or [],
                                            theirs.get("cells") or [], new_id)
        conflicts += cell_conflicts
    else:
        notes.append("cells merged by nbdime")
    plain = [_plain_metadata(nb) for nb in (base, ours, theirs)]
    metadata: dict[str, Any] = {}
    for key in {*plain[1], *plain[2]}:
        value, clash = _pick(plain[0].get(key), plain[1].get(key), plain[2].get(key))
        if value is not None:
            metadata[key] = value
        if clash:
            notes.append(f"metadata {key!r}: both branches changed it; this branch's is kept")
    out = {**{k: v for k, v in ours.items() if k not in ("cells", "metadata")}, "cells": cells,
           "metadata": metadata}
    _store_sessions(out, ours, theirs, merged_sessions)
    return MergeResult(out, conflicts, notes)


def _store_sessions(out: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any],
                    sessions: NotebookSessions) -> None:
    """The merged sessions into ``out``'s metadata: layout 4 keeping both sides' chunks as they
    are when either side is chunked, else layout 1."""
    if not sessions.sessions and not sessions.set_aside:
        return
    sides = [_metadata(nb) for nb in (ours, theirs)]
    chunked = any(layout_of(md) > 1 for md in sides)
    metadata = out["metadata"]
    if chunked:
        for md in reversed(sides):  # theirs, then ours over it: a key both hold is ours
            if METADATA_KEY in md:
                metadata[METADATA_KEY] = md[METADATA_KEY]
            metadata.update({k: md[k] for k in chunk_keys(md) if is_keyed_key(k) or md is sides[0]})
    store_value(metadata, sessions.to_dict(), LAYOUT_KEYED if chunked else 1)
