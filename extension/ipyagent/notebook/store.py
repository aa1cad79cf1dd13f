"""The notebook as the session store: ``metadata["ipyagent"]`` plus the output journal.

``docs/protocol.md`` fixes the shape::

    metadata["ipyagent"] = {"version": 1, "active": "<name>",
                            "sessions": {"<name>": {"header": {...}, "leaf": "<id>",
                                                    "settings": {...}, "entries": [...]}}}

Everything read from a notebook is data from outside: it is checked (shapes, ids, parents,
cycles, duplicates, sizes), problems are reported in a :class:`LoadReport`, and what cannot be
used is *kept aside* — under ``metadata["ipyagent"]["set_aside"]`` when the store is written
back — never executed and never silently dropped.

This module reads and writes plain JSON (no nbformat at run time). Notebook files are written the
way nbformat writes them (one-space indent, sorted keys, non-ASCII kept), except that the session
data keeps its own key order, so a Pi session survives a notebook round trip byte for byte.
Only the command line writes notebook files (:func:`save_session_to_notebook_file`,
:func:`lift_notebook`): never a file a frontend holds open.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ipyagent.session.entries import Entry
from ipyagent.session.ids import new_session_id
from ipyagent.session.loading import LoadReport, sanitize_entries

__all__ = [
    "METADATA_KEY",
    "VERSION",
    "NotebookError",
    "NotebookSessions",
    "SessionNotFound",
    "StoredSession",
    "dumps_notebook",
    "lift_notebook",
    "new_notebook",
    "read_notebook",
    "save_session_to_notebook_file",
    "session_from_notebook_file",
    "sessions_from_notebook",
    "strip_secrets",
    "write_notebook",
    "write_sessions_into_notebook",
]

METADATA_KEY = "ipyagent"
VERSION = 1
DEFAULT_SESSION = "default"


class NotebookError(ValueError):
    """The file is not a notebook ipyagent can read (not JSON, not an object, no cells…)."""


class SessionNotFound(ValueError):
    """The notebook holds no session of that name (or none at all)."""


# ---------------------------------------------------------------------------------------------
# secrets never reach the notebook

_SECRET_KEY = re.compile(r"(api[_-]?key|apikey|secret|password|passwd|authori[sz]ation|bearer|"
                         r"access[_-]?token|auth[_-]?token|refresh[_-]?token|credential|^key$|[_-]key$|"
                         r"^headers$)", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^(sk-|sk_|xox[bp]-|ghp_|gho_|github_pat_|AKIA|Bearer\s)", re.IGNORECASE)


def strip_secrets(settings: Any) -> dict[str, Any]:
    """A copy of ``settings`` without keys or values that look like credentials (recursively)."""
    if not isinstance(settings, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if _SECRET_KEY.search(str(key)):
            continue
        if isinstance(value, str) and _SECRET_VALUE.match(value):
            continue
        out[key] = strip_secrets(value) if isinstance(value, dict) else value
    return out


# ---------------------------------------------------------------------------------------------
# sizes


def json_size(value: Any) -> int:
    """About the length of ``value`` as compact JSON (escapes not counted), without encoding it.

    Iterative, so hostile nesting cannot exhaust the stack; ~10x cheaper than ``json.dumps``.
    """
    total = 0
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is dict:
            total += 1 + len(item) * 2  # braces, colons and commas
            for key, sub in item.items():
                total += len(key) + 2
                push(sub)
        elif kind is list:
            total += 1 + len(item)
            extend(item)
        else:
            total += 5
    return total


def _timestamp(entry: Any) -> str:
    value = entry.get("timestamp") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else ""


def _newest(entries: Iterable[Any]) -> str:
    return max((_timestamp(e) for e in entries), default="")


# ---------------------------------------------------------------------------------------------
# the data model


@dataclass
class StoredSession:
    """One session as ``metadata["ipyagent"]["sessions"][name]`` holds it."""

    header: dict[str, Any]
    leaf: str | None
    settings: dict[str, Any]
    entries: list[Entry]
    extra: dict[str, Any] = field(default_factory=dict)  # keys a newer ipyagent wrote: kept

    def to_dict(self) -> dict[str, Any]:
        out = {"header": self.header, "leaf": self.leaf, "settings": self.settings, "entries": self.entries}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_dict(cls, data: Any, report: LoadReport | None = None, name: str = DEFAULT_SESSION, *,
                  check_sizes: bool = True) -> "StoredSession":
        """Check one stored session; problems go to ``report`` (things set aside stay in it)."""
        report = report if report is not None else LoadReport()
        gather = _Gather(report, check_sizes=check_sizes)
        gather.add_session(name, data, f"session {name!r}")
        stored = gather.finish().get(name)
        return stored if stored is not None else cls(_new_header(), None, {}, [])

    @classmethod
    def from_session(cls, session: Any, settings: dict[str, Any] | None = None) -> "StoredSession":
        return cls(dict(session.header), session.leaf_id, strip_secrets(settings or {}), list(session.entries))

    def ids(self) -> set[str]:
        return {e["id"] for e in self.entries}


class _hybridmethod:
    """A method that works on the class (builds a new object) and on an instance (updates it)."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj, cls):
        target = obj if obj is not None else cls

        def bound(*args, **kwargs):
            return self.func(target, *args, **kwargs)

        bound.__doc__ = self.func.__doc__
        return bound


@dataclass
class NotebookSessions:
    """``metadata["ipyagent"]``: the sessions of one notebook and which one is active."""

    active: str | None
    sessions: dict[str, StoredSession]
    version: int = VERSION
    # what a load could not use: [{"session", "where", "reason", "raw"}] — written back, never dropped
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level keys: kept
    report: LoadReport | None = field(default=None, repr=False, compare=False)

    # ---- reading -------------------------------------------------------------------------------

    @classmethod
    def from_metadata(cls, md: Any, source: str = "", *, check_sizes: bool = True
                      ) -> tuple["NotebookSessions", LoadReport]:
        """Check ``metadata["ipyagent"]`` (``None``: no sessions) and report every problem."""
        report = LoadReport(source=source)
        gather = _Gather(report, check_sizes=check_sizes)
        gather.add_metadata(md)
        return gather.result(), report

    # ---- writing -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "active": self.active,
                               "sessions": {name: s.to_dict() for name, s in self.sessions.items()}}
        if self.set_aside:
            out["set_aside"] = self.set_aside
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @_hybridmethod
    def from_session(target, name: str, session: Any, settings: dict[str, Any] | None = None
                     ) -> "NotebookSessions":
        """Store a :class:`ipyagent.core.Session` under ``name`` and make it the active session.

        On the class, ``NotebookSessions.from_session(name, session, settings)`` returns a new
        object holding just that session. On an instance it updates the instance and returns it:
        the entries it holds stay, in their order, followed by the session's new ones (so an entry
        the session lacks is never lost); ``settings=None`` keeps the stored settings.
        """
        new = StoredSession.from_session(session, settings)
        if isinstance(target, type):
            return target(active=name, sessions={name: new})
        existing = target.sessions.get(name)
        if existing is not None:
            held = existing.ids()
            new.entries = existing.entries + [e for e in new.entries if e["id"] not in held]
            if settings is None:
                new.settings = existing.settings
        target.sessions[name] = new
        target.active = name
        return target

    def merge(self, other: "NotebookSessions") -> int:
        """Add ``other``'s entries by id (order kept); return how many were added.

        For each session, ``other``'s leaf, settings and header are taken when it brought new
        entries at least as recent as the newest already held. Idempotent.
        """
        added = 0
        for name, theirs in other.sessions.items():
            mine = self.sessions.get(name)
            if mine is None:
                self.sessions[name] = StoredSession(dict(theirs.header), theirs.leaf, dict(theirs.settings),
                                                    list(theirs.entries), dict(theirs.extra))
                added += len(theirs.entries)
                if self.active is None or other.active == name:
                    self.active = name
                continue
            have = mine.ids()
            newest = _newest(mine.entries)
            new = [e for e in theirs.entries if e["id"] not in have]
            if new:
                mine.entries = mine.entries + new
                added += len(new)
                if _newest(new) >= newest:
                    mine.leaf = theirs.leaf if theirs.leaf is not None else new[-1]["id"]
                    mine.settings = dict(theirs.settings) if theirs.settings else mine.settings
                    mine.header = dict(theirs.header) if theirs.header else mine.header
                    if other.active == name:
                        self.active = name
        if self.active is None:
            self.active = other.active if other.active in self.sessions else next(iter(self.sessions), None)
        for item in other.set_aside:
            if not _contains_set_aside(self.set_aside, item):
                self.set_aside.append(item)
        return added

    def to_session(self, name: str | None = None, **session_kwargs: Any):
        """The named (default: the active) session as a :class:`ipyagent.core.Session`."""
        from ipyagent.core import Session

        name = self.resolve_name(name)
        stored = self.sessions[name]
        session_kwargs.setdefault("report", self.report)
        return Session(dict(stored.header), list(stored.entries), stored.leaf, **session_kwargs)

    def resolve_name(self, name: str | None = None) -> str:
        """``name`` if stored, else the active session; raises :class:`SessionNotFound`."""
        if name is None:
            name = self.active if self.active in self.sessions else next(iter(self.sessions), None)
            if name is None:
                raise SessionNotFound("the notebook holds no ipyagent session")
        if name not in self.sessions:
            known = ", ".join(repr(n) for n in self.sessions) or "none"
            raise SessionNotFound(f"no session named {name!r} in the notebook (sessions: {known})")
        return name


def _contains_set_aside(items: list[dict[str, Any]], item: dict[str, Any]) -> bool:
    for other in items:
        if (other.get("session"), other.get("where"), other.get("reason")) == (
                item.get("session"), item.get("where"), item.get("reason")) and other.get("raw") == item.get("raw"):
            return True
    return False


def _new_header() -> dict[str, Any]:
    from ipyagent.session.ids import iso_now

    return {"type": "session", "version": 3, "id": new_session_id(), "timestamp": iso_now(), "cwd": ""}


# ---------------------------------------------------------------------------------------------
# checking what comes from outside


class _Pending:
    """One session while it is gathered from metadata and journal outputs (raw, unchecked)."""

    def __init__(self) -> None:
        self.header: dict[str, Any] | None = None
        self.leaf: Any = None
        self.leaf_where = ""
        self.settings: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.raw: list[Any] = []
        self.labels: list[str] = []
        self.sizes: list[int] = []
        self.by_id: dict[str, Any] = {}
        self.newest = ""


class _Gather:
    def __init__(self, report: LoadReport, *, check_sizes: bool = True) -> None:
        self.report = report
        self.check_sizes = check_sizes
        self.pending: dict[str, _Pending] = {}
        self.active: str | None = None
        self.version = VERSION
        self.extra: dict[str, Any] = {}
        self.set_aside: list[dict[str, Any]] = []  # kept from an earlier load
        self._mark = len(report.set_aside)  # items already in the report belong to someone else
        self._names: list[str | None] = []  # the session of each report.set_aside item

    def _aside(self, session: str | None, where: str, message: str, raw: Any) -> None:
        self.report.add(where, message, kept=False, raw=raw)
        self._names.append(session)

    def _note(self, where: str, message: str) -> None:
        self.report.add(where, message, kept=True)

    # ---- metadata ------------------------------------------------------------------------------

    def add_metadata(self, md: Any, where: str = "metadata.ipyagent") -> None:
        if md is None:
            return
        if not isinstance(md, dict):
            self._aside(None, where, f"must be a JSON object, not {type(md).__name__}; nothing was loaded from it", md)
            return
        version = md.get("version", VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            self._note(f"{where}.version", f"unknown version {version!r}; read as version {VERSION}")
        elif version > VERSION:
            self._note(f"{where}.version", f"version {version} is newer than this ipyagent reads ({VERSION}); "
                                           "loading what it understands")
            self.version = version
        for key, value in md.items():
            if key not in ("version", "active", "sessions", "set_aside"):
                self.extra[key] = value
        kept = md.get("set_aside")
        if kept is not None:
            if isinstance(kept, list):
                self.set_aside.extend(kept)
            else:
                self.set_aside.append({"session": None, "where": f"{where}.set_aside", "reason": "not a list",
                                       "raw": kept})
            if kept:
                count = len(kept) if isinstance(kept, list) else 1
                self._note(f"{where}.set_aside", f"{count} item(s) an earlier load could not use are kept here "
                                                 "(each with its reason); delete the key once they are not needed")
        sessions = md.get("sessions")
        if sessions is None:
            sessions = {}
        if not isinstance(sessions, dict):
            self._aside(None, f"{where}.sessions",
                        f"must be an object mapping names to sessions, not {type(sessions).__name__}", sessions)
            sessions = {}
        for name, data in sessions.items():
            self.add_session(name, data, f"{where}.sessions[{name!r}]")
        active = md.get("active")
        if active is not None and not isinstance(active, str):
            self._note(f"{where}.active", f"must be a session name, not {type(active).__name__}")
        elif isinstance(active, str):
            self.active = active

    def add_session(self, name: str, data: Any, where: str, *, journal: bool = False) -> None:
        if not isinstance(data, dict):
            self._aside(name, where, f"a session must be a JSON object, not {type(data).__name__}", data)
            return
        first = name not in self.pending
        pending = self.pending.setdefault(name, _Pending())
        entries = data.get("entries", [])
        if not isinstance(entries, list):
            self._aside(name, f"{where}.entries", f"must be a list of entries, not {type(entries).__name__}", entries)
            entries = []
        added = self._add_entries(name, pending, entries, f"{where}.entries")
        newer = first or (added and _newest(added) >= pending.newest)
        if added:
            pending.newest = max(pending.newest, _newest(added))
        header = data.get("header")
        if header is not None and not isinstance(header, dict):
            self._aside(name, f"{where}.header", f"must be a JSON object, not {type(header).__name__}", header)
        elif isinstance(header, dict) and header and (newer or pending.header is None):
            pending.header = header  # an empty header or settings object means "not given"
        settings = data.get("settings")
        if settings is not None and not isinstance(settings, dict):
            self._aside(name, f"{where}.settings", f"must be a JSON object, not {type(settings).__name__}", settings)
        elif isinstance(settings, dict) and settings and (newer or not pending.settings):
            pending.settings = strip_secrets(settings)
            if len(pending.settings) != len(settings):
                self._note(f"{where}.settings", "settings that look like credentials were removed")
        if newer and "leaf" in data:
            pending.leaf, pending.leaf_where = data["leaf"], f"{where}.leaf"
        if not journal:
            for key, value in data.items():
                if key not in ("header", "leaf", "settings", "entries"):
                    pending.extra[key] = value

    def _add_entries(self, name: str, pending: _Pending, entries: list[Any], where: str) -> list[Any]:
        added = []
        by_id = pending.by_id
        start = len(pending.raw)
        for i, entry in enumerate(entries):
            entry_id = entry.get("id") if isinstance(entry, dict) else None
            label = f"{where}[{i}]"
            if isinstance(entry_id, str) and entry_id in by_id:
                seen, seen_at = by_id[entry_id]
                if seen == entry:
                    if seen_at >= start:  # twice in one list: say so; across sources it is normal
                        self._note(f"{label} (id {entry_id})", "an identical copy of an earlier entry; one copy is kept")
                    continue
                self._aside(name, f"{label} (id {entry_id})",
                            "another entry with this id is already stored; the first one is kept", entry)
                continue
            if isinstance(entry_id, str):
                by_id[entry_id] = (entry, len(pending.raw))
            pending.raw.append(entry)
            pending.labels.append(label)
            if self.check_sizes:
                pending.sizes.append(json_size(entry))
            added.append(entry)
        return added

    # ---- journal -------------------------------------------------------------------------------

    def add_journal(self, cell_index: int, payload: Any, where: str) -> None:
        if not isinstance(payload, dict):
            self._aside(None, where, f"a journal payload must be a JSON object, not {type(payload).__name__}", payload)
            return
        name = payload.get("session", DEFAULT_SESSION)
        if not isinstance(name, str) or not name:
            self._aside(None, f"{where}.session", "the journal names no session", payload)
            return
        version = payload.get("version", VERSION)
        if isinstance(version, int) and version > VERSION:
            self._note(where, f"journal version {version} is newer than this ipyagent reads ({VERSION})")
        self.add_session(name, payload, where, journal=True)

    # ---- result --------------------------------------------------------------------------------

    def finish(self) -> dict[str, StoredSession]:
        out: dict[str, StoredSession] = {}
        for name, pending in self.pending.items():
            where = f"session {name!r}"
            header = pending.header
            if header is None:
                header = _new_header()
                if pending.raw:
                    self._note(f"{where}", "no header; a new one was made")
            elif not isinstance(header.get("id"), str):
                header = dict(header, id=new_session_id())
                self._note(f"{where} header", "the header has no id; a new one was made")
            labels = pending.labels
            before = len(self.report.set_aside)
            sizes = pending.sizes if self.check_sizes else None
            entries = sanitize_entries(pending.raw, self.report, where=lambda i: labels[i], sizes=sizes)
            self._names.extend([name] * (len(self.report.set_aside) - before))
            leaf = pending.leaf
            ids = {e["id"] for e in entries}
            if leaf is not None and not isinstance(leaf, str):
                self._note(pending.leaf_where, f"must be an entry id, not {type(leaf).__name__}; "
                                               "the last entry is the leaf")
                leaf = entries[-1]["id"] if entries else None
            elif isinstance(leaf, str) and leaf not in ids:
                self._note(pending.leaf_where, f"leaf {leaf!r} is not among the loaded entries; "
                                               "the last entry is the leaf")
                leaf = entries[-1]["id"] if entries else None
            out[name] = StoredSession(header, leaf, pending.settings, entries, pending.extra)
        return out

    def result(self) -> NotebookSessions:
        sessions = self.finish()
        active = self.active
        if active is not None and active not in sessions:
            self._note("metadata.ipyagent.active", f"names no stored session ({active!r})")
            active = None
        if active is None and sessions:
            active = next(iter(sessions))
        set_aside = list(self.set_aside)
        for item, name in zip(self.report.set_aside[self._mark:], self._names):
            record = {"session": name, **item}
            if not _contains_set_aside(set_aside, record):
                set_aside.append(record)
        return NotebookSessions(active, sessions, self.version, set_aside, self.extra, self.report)


# ---------------------------------------------------------------------------------------------
# notebooks (plain JSON)


def read_notebook(path: str | Path) -> dict[str, Any]:
    """The notebook at ``path`` as plain JSON; :class:`NotebookError` if it is not one."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_notebook(text, str(path))


def parse_notebook(text: str, source: str = "notebook") -> dict[str, Any]:
    try:
        nb = json.loads(text)
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
    return nb


def sessions_from_notebook(nb: dict[str, Any], source: str = "", *, check_sizes: bool = True
                           ) -> tuple[NotebookSessions, LoadReport]:
    """``metadata["ipyagent"]`` ∪ every journal output, merged by entry id in cell order."""
    from ipyagent.notebook.journal import journal_outputs

    report = LoadReport(source=source)
    gather = _Gather(report, check_sizes=check_sizes)
    metadata = nb.get("metadata")
    gather.add_metadata(metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None)
    for cell_index, output_index, payload in journal_outputs(nb, positions=True):
        gather.add_journal(cell_index, payload, f"cell {cell_index + 1} output {output_index + 1} (journal)")
    return gather.result(), report


def session_from_notebook_file(path: str | Path, name: str | None = None, **kwargs: Any):
    """The named (default: active) session of the notebook at ``path`` as a ``Session``."""
    path = Path(path)
    sessions, report = sessions_from_notebook(read_notebook(path), source=str(path))
    return sessions.to_session(name, **kwargs)


def write_sessions_into_notebook(nb: dict[str, Any], sessions: NotebookSessions) -> dict[str, Any]:
    """Set ``nb["metadata"]["ipyagent"]``; nothing else is touched. Returns ``nb``."""
    metadata = nb.get("metadata")
    if not isinstance(metadata, dict):
        metadata = nb["metadata"] = {}
    metadata[METADATA_KEY] = sessions.to_dict()
    return nb


_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def new_notebook(cells: list[dict[str, Any]] | None = None) -> dict[str, Any]:
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
    from ipyagent.notebook.journal import JOURNAL_MIME

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


def _canonical(nb: dict[str, Any]) -> dict[str, Any]:
    """What nbformat writes (sorted keys, multi-line text split into lines), except that the
    session data (``metadata["ipyagent"]``, journal payloads) keeps its own key order."""
    out: dict[str, Any] = {}
    for key in sorted(nb):
        value = nb[key]
        if key == "metadata" and isinstance(value, dict):
            out[key] = {k: value[k] if k == METADATA_KEY else _sorted(value[k]) for k in sorted(value)}
        elif key == "cells" and isinstance(value, list):
            out[key] = [_canonical_cell(cell) for cell in value]
        else:
            out[key] = _sorted(value)
    return out


def dumps_notebook(nb: dict[str, Any]) -> str:
    """The notebook's text as nbformat writes it (indent 1, sorted keys, UTF-8 kept)."""
    return json.dumps(_canonical(nb), indent=1, ensure_ascii=False) + "\n"


def write_notebook(path: str | Path, nb: dict[str, Any]) -> None:
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


def save_session_to_notebook_file(session: Any, src: str | Path, dst: str | Path, name: str | None = None,
                                  settings: dict[str, Any] | None = None) -> None:
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


def lift_notebook_report(src: str | Path, dst: str | Path | None = None
                         ) -> tuple[int, LoadReport, bool, int]:
    """:func:`lift_notebook` with details: ``(added, report, written, journal_outputs)``."""
    from ipyagent.notebook.journal import journal_outputs

    src = Path(src)
    nb = read_notebook(src)
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    before, _ = NotebookSessions.from_metadata(metadata.get(METADATA_KEY), source=str(src))
    held = sum(len(s.entries) for s in before.sessions.values())
    merged, report = sessions_from_notebook(nb, source=str(src))
    added = sum(len(s.entries) for s in merged.sessions.values()) - held
    journals = sum(1 for _ in journal_outputs(nb))
    new_md = merged.to_dict()
    if not merged.sessions and not merged.set_aside and metadata.get(METADATA_KEY) is None:
        changed = False  # nothing to lift and nothing stored: leave the notebook as it is
    else:
        changed = new_md != metadata.get(METADATA_KEY)
    target = Path(dst) if dst is not None else src
    written = False
    if changed or dst is not None and target.resolve() != src.resolve():
        write_notebook(target, write_sessions_into_notebook(nb, merged))
        written = True
    return max(added, 0), report, written, journals
