"""Checking what comes from outside: ``metadata["ipyagent"]`` and journal payloads, gathered
session by session.

Everything read from a notebook is data from outside: it is checked (shapes, ids, parents,
cycles, duplicates, sizes), problems are reported in a :class:`LoadReport`, and what cannot be
used is *kept aside* — under ``metadata["ipyagent"]["set_aside"]`` when the store is written
back — never executed and never silently dropped.

:class:`SessionGatherer` yields plain checked parts (:class:`CheckedSession`, :class:`Gathered`);
:mod:`ipyagent.store.schema` builds its dataclasses from them. This module sits below the
schema, so it also holds what both need: the metadata version, the default session name and
:func:`strip_secrets`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple, cast

from ipyagent.agent.run_config import SavedSettings
from ipyagent.session import deep_json
from ipyagent.session.entries import Entry
from ipyagent.session.ids import new_session_id
from ipyagent.session.intake import LoadReport, SetAside, sanitize_entries
from ipyagent.shapes import SessionHeader

__all__ = ["DEFAULT_SESSION", "VERSION", "CheckedSession", "Gathered", "SessionGatherer", "contains_set_aside",
           "json_size", "new_header", "newest_timestamp", "strip_secrets"]

VERSION = 1  # of metadata["ipyagent"]: what this ipyagent reads and writes
DEFAULT_SESSION = "default"


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


def newest_timestamp(entries: Iterable[Any]) -> str:
    return max((_timestamp(e) for e in entries), default="")


def contains_set_aside(items: list[SetAside], item: SetAside) -> bool:
    """Whether ``item`` (a set-aside record) is already among ``items``."""
    for other in items:
        if (other.get("session"), other.get("where"), other.get("reason")) == (
                item.get("session"), item.get("where"), item.get("reason")) and other.get("raw") == item.get("raw"):
            return True
    return False


def new_header() -> SessionHeader:
    """A fresh Pi v3 session header (for a session stored without one)."""
    from ipyagent.session.ids import iso_now

    return {"type": "session", "version": 3, "id": new_session_id(), "timestamp": iso_now(), "cwd": ""}


# ---------------------------------------------------------------------------------------------
# checking what comes from outside


def _too_deep(value: Any) -> bool:
    return isinstance(value, dict) and deep_json.nesting(value) > deep_json.MAX_NESTING


def _same(a: Any, b: Any) -> bool:
    """``a == b``, or False where the values nest too deeply for ``==`` (they are set aside anyway)."""
    try:
        return bool(a == b)
    except RecursionError:
        return False


class CheckedSession(NamedTuple):
    """One session, gathered and checked: the fields of a :class:`~ipyagent.store.schema.StoredSession`."""

    header: SessionHeader
    leaf: str | None
    settings: SavedSettings
    entries: list[Entry]
    extra: dict[str, Any]


class Gathered(NamedTuple):
    """All of ``metadata["ipyagent"]``, gathered and checked: the fields of a
    :class:`~ipyagent.store.schema.NotebookSessions`."""

    active: str | None
    sessions: dict[str, CheckedSession]
    version: int
    set_aside: list[SetAside]
    extra: dict[str, Any]
    report: LoadReport


class _Pending:
    """One session while it is gathered from metadata and journal outputs (raw, unchecked)."""

    def __init__(self) -> None:
        self.header: SessionHeader | None = None
        self.leaf: Any = None
        self.leaf_where = ""
        self.settings: SavedSettings = {}
        self.extra: dict[str, Any] = {}
        self.raw: list[Any] = []
        self.labels: list[str] = []
        self.sizes: list[int] = []
        self.depths: list[int] = []
        self.by_id: dict[str, Any] = {}
        self.newest = ""


class SessionGatherer:
    """Sessions gathered from ``metadata["ipyagent"]`` (:meth:`add_metadata`) and journal payloads
    (:meth:`add_journal`), merged by entry id in the order added; :meth:`result` checks them."""

    def __init__(self, report: LoadReport, *, check_sizes: bool = True) -> None:
        self.report = report
        self.check_sizes = check_sizes
        self.pending: dict[str, _Pending] = {}
        self.active: str | None = None
        self.version = VERSION
        self.extra: dict[str, Any] = {}
        self.set_aside: list[SetAside] = []  # kept from an earlier load
        self._mark = len(report.set_aside)  # items already in the report belong to someone else
        self._names: list[str | None] = []  # the session of each report.set_aside item

    def _aside(self, session: str | None, where: str, message: str, raw: Any) -> None:
        if deep_json.nesting(raw) > deep_json.MAX_NESTING:  # as text: too deep for Python's recursive code
            raw = deep_json.dumps(raw)
        self.report.add(where, message, kept=False, raw=raw)
        self._names.append(session)

    def _note(self, where: str, message: str) -> None:
        self.report.add(where, message, kept=True)

    # ---- metadata ------------------------------------------------------------------------------

    def add_metadata(self, md: Any, where: str = "metadata.ipyagent", *, small: bool = False) -> None:
        """``small``: every entry is known to be under the size limit (its chunk's JSON text was),
        so only its nesting is walked."""
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
                self._note(f"{where}.set_aside",
                           f"{count} item(s) an earlier load could not use are kept here (each with its reason; "
                           "the lines of an imported Pi file go back into its Pi export); delete the key once "
                           "they are not needed")
        sessions = md.get("sessions")
        if sessions is None:
            sessions = {}
        if not isinstance(sessions, dict):
            self._aside(None, f"{where}.sessions",
                        f"must be an object mapping names to sessions, not {type(sessions).__name__}", sessions)
            sessions = {}
        for name, data in sessions.items():
            self.add_session(name, data, f"{where}.sessions[{name!r}]", small=small)
        active = md.get("active")
        if active is not None and not isinstance(active, str):
            self._aside(None, f"{where}.active", f"must be a session name, not {type(active).__name__}", active)
        elif isinstance(active, str):
            self.active = active

    def add_session(self, name: str, data: Any, where: str, *, journal: bool = False, small: bool = False) -> None:
        if not isinstance(data, dict):
            self._aside(name, where, f"a session must be a JSON object, not {type(data).__name__}", data)
            return
        first = name not in self.pending
        pending = self.pending.setdefault(name, _Pending())
        entries = data.get("entries", [])
        if not isinstance(entries, list):
            self._aside(name, f"{where}.entries", f"must be a list of entries, not {type(entries).__name__}", entries)
            entries = []
        added = self._add_entries(name, pending, entries, f"{where}.entries", small)
        newer = first or (added and newest_timestamp(added) >= pending.newest)
        if added:
            pending.newest = max(pending.newest, newest_timestamp(added))
        header = data.get("header")
        if header is not None and not isinstance(header, dict):
            self._aside(name, f"{where}.header", f"must be a JSON object, not {type(header).__name__}", header)
        elif _too_deep(header):
            self._aside(name, f"{where}.header", f"nests more than {deep_json.MAX_NESTING} levels deep", header)
        elif isinstance(header, dict) and header and (newer or pending.header is None):
            pending.header = cast(SessionHeader, header)  # an empty header or settings object means "not given"
        settings = data.get("settings")
        if settings is not None and not isinstance(settings, dict):
            self._aside(name, f"{where}.settings", f"must be a JSON object, not {type(settings).__name__}", settings)
        elif _too_deep(settings):
            self._aside(name, f"{where}.settings", f"nests more than {deep_json.MAX_NESTING} levels deep", settings)
        elif isinstance(settings, dict) and settings and (newer or not pending.settings):
            pending.settings = cast(SavedSettings, strip_secrets(settings))
            if len(pending.settings) != len(settings):
                self._note(f"{where}.settings", "settings that look like credentials were removed")
        if newer and "leaf" in data:
            pending.leaf, pending.leaf_where = data["leaf"], f"{where}.leaf"
        if not journal:
            for key, value in data.items():
                if key not in ("header", "leaf", "settings", "entries"):
                    pending.extra[key] = value

    def _add_entries(self, name: str, pending: _Pending, entries: list[Any], where: str, small: bool) -> list[Any]:
        added = []
        by_id = pending.by_id
        start = len(pending.raw)
        for i, entry in enumerate(entries):
            entry_id = entry.get("id") if isinstance(entry, dict) else None
            label = f"{where}[{i}]"
            if isinstance(entry_id, str) and entry_id in by_id:
                seen, seen_at = by_id[entry_id]
                if _same(seen, entry):
                    if seen_at >= start:  # twice in one list: say so; across sources it is normal
                        self._note(f"{label} (id {entry_id})",
                                   "an identical copy of an earlier entry; one copy is kept")
                    continue
                self._aside(name, f"{label} (id {entry_id})",
                            "another entry with this id is already stored; the first one is kept", entry)
                continue
            if isinstance(entry_id, str):
                by_id[entry_id] = (entry, len(pending.raw))
            pending.raw.append(entry)
            pending.labels.append(label)
            if self.check_sizes:  # size and nesting in one walk (sanitize_entries checks both)
                size, depth = (0, deep_json.nesting(entry)) if small else deep_json.measure(entry)
                pending.sizes.append(size)
                pending.depths.append(depth)
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

    def finish(self) -> dict[str, CheckedSession]:
        out: dict[str, CheckedSession] = {}
        for name, pending in self.pending.items():
            where = f"session {name!r}"
            header = pending.header
            if header is None:
                header = new_header()
                if pending.raw:
                    self._note(f"{where}", "no header; a new one was made")
            elif not isinstance(header.get("id"), str):
                header = {**header, "id": new_session_id()}
                self._note(f"{where} header", "the header has no id; a new one was made")
            labels = pending.labels
            before = len(self.report.set_aside)
            sizes, depths = (pending.sizes, pending.depths) if self.check_sizes else (None, None)
            entries = sanitize_entries(pending.raw, self.report, where=labels.__getitem__, sizes=sizes,
                                       depths=depths)
            self._names.extend([name] * (len(self.report.set_aside) - before))
            leaf = pending.leaf
            ids = {e["id"] for e in entries}
            # The stored leaf that cannot be used is set aside, so a rewrite (lift) never loses it.
            if leaf is not None and not isinstance(leaf, str):
                self._aside(name, pending.leaf_where, f"must be an entry id, not {type(leaf).__name__}; "
                                                      "the last entry is the leaf", leaf)
                leaf = entries[-1]["id"] if entries else None
            elif isinstance(leaf, str) and leaf not in ids:
                self._aside(name, pending.leaf_where, f"leaf {leaf!r} is not among the loaded entries; "
                                                      "the last entry is the leaf", leaf)
                leaf = entries[-1]["id"] if entries else None
            out[name] = CheckedSession(header, leaf, pending.settings, entries, pending.extra)
        return out

    def result(self) -> Gathered:
        sessions = self.finish()
        active = self.active
        if active is not None and active not in sessions:
            self._aside(None, "metadata.ipyagent.active", f"names no stored session ({active!r})", active)
            active = None
        if active is None and sessions:
            active = next(iter(sessions))
        set_aside = list(self.set_aside)
        for item, name in zip(self.report.set_aside[self._mark:], self._names):
            record: SetAside = {"session": name, **item}
            if not contains_set_aside(set_aside, record):
                set_aside.append(record)
        return Gathered(active, sessions, self.version, set_aside, self.extra, self.report)
