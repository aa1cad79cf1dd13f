"""The notebook's session store, as data: ``metadata["ipyagent"]``.

``docs/protocol.md`` fixes the shape::

    metadata["ipyagent"] = {"version": 1, "active": "<name>",
                            "sessions": {"<name>": {"header": {...}, "leaf": "<id>",
                                                    "settings": {...}, "entries": [...]}}}

:class:`NotebookSessions` is that object and :class:`StoredSession` one of its sessions. What
comes from outside is checked by :mod:`ipyagent.store.validation` (``from_metadata``,
``from_dict``); notebook files are read and written by :mod:`ipyagent.store.ipynb`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ipyagent.agent.run_config import SavedSettings
from ipyagent.session import deep_json
from ipyagent.session.entries import Entry
from ipyagent.session.intake import LoadReport, SetAside
from ipyagent.session.jsonl import is_pi_line
from ipyagent.shapes import SessionHeader
from ipyagent.store.validation import (
    DEFAULT_SESSION,
    VERSION,
    Gathered,
    SessionGatherer,
    contains_set_aside,
    new_header,
    newest_timestamp,
    strip_secrets,
)

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = [
    "DEFAULT_SESSION",
    "METADATA_KEY",
    "VERSION",
    "NotebookSessions",
    "SessionNotFound",
    "StoredSession",
    "strip_secrets",
]

METADATA_KEY = "ipyagent"


class SessionNotFound(ValueError):
    """The notebook holds no session of that name (or none at all)."""


# ---------------------------------------------------------------------------------------------
# the data model


@dataclass
class StoredSession:
    """One session as ``metadata["ipyagent"]["sessions"][name]`` holds it."""

    header: SessionHeader
    leaf: str | None
    settings: SavedSettings
    entries: list[Entry]
    extra: dict[str, Any] = field(default_factory=dict)  # keys a newer ipyagent wrote: kept

    def to_dict(self) -> dict[str, Any]:
        out = {"header": self.header, "leaf": self.leaf, "settings": self.settings, "entries": self.entries}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_dict(cls, data: Any, report: LoadReport | None = None, name: str = DEFAULT_SESSION, *,
                  check_sizes: bool = True) -> StoredSession:
        """Check one stored session; problems go to ``report`` (things set aside stay in it)."""
        report = report if report is not None else LoadReport()
        gather = SessionGatherer(report, check_sizes=check_sizes)
        gather.add_session(name, data, f"session {name!r}")
        checked = gather.finish().get(name)
        return StoredSession(*checked) if checked is not None else cls(new_header(), None, {}, [])

    @classmethod
    def from_session(cls, session: Session, settings: SavedSettings | None = None) -> StoredSession:
        return cls(session.header.copy(), session.leaf_id, cast(SavedSettings, strip_secrets(settings or {})),
                   list(session.entries))

    def ids(self) -> set[str]:
        return {e["id"] for e in self.entries}


class _hybridmethod:
    """A method that works on the class (builds a new object) and on an instance (updates it)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj: object, cls: type | None = None) -> Callable[..., Any]:
        target = obj if obj is not None else cls

        def bound(*args: Any, **kwargs: Any) -> Any:
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
    set_aside: list[SetAside] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level keys: kept
    report: LoadReport | None = field(default=None, repr=False, compare=False)

    # ---- reading -------------------------------------------------------------------------------

    @classmethod
    def from_metadata(cls, md: Any, source: str = "", *, check_sizes: bool = True
                      ) -> tuple[NotebookSessions, LoadReport]:
        """Check ``metadata["ipyagent"]`` (``None``: no sessions) and report every problem."""
        report = LoadReport(source=source)
        gather = SessionGatherer(report, check_sizes=check_sizes)
        with deep_json.paused_gc():  # a push of thousands of entries: many new containers, no garbage
            gather.add_metadata(md)
            return cls.from_gathered(gather.result()), report

    @classmethod
    def from_gathered(cls, gathered: Gathered) -> NotebookSessions:
        """The store that :meth:`SessionGatherer.result <ipyagent.store.validation.SessionGatherer.result>` checked."""
        sessions = {name: StoredSession(*checked) for name, checked in gathered.sessions.items()}
        return cls(gathered.active, sessions, gathered.version, gathered.set_aside, gathered.extra, gathered.report)

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
    def from_session(target: NotebookSessions | type[NotebookSessions], name: str, session: Session,
                     settings: SavedSettings | None = None) -> NotebookSessions:
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

    def merge(self, other: NotebookSessions) -> int:
        """Add ``other``'s entries by id (order kept); return how many were added.

        For each session, ``other``'s leaf, settings and header are taken when it brought new
        entries at least as recent as the newest already held. Idempotent.
        """
        added = 0
        for name, theirs in other.sessions.items():
            mine = self.sessions.get(name)
            if mine is None:
                self.sessions[name] = StoredSession(theirs.header.copy(), theirs.leaf, theirs.settings.copy(),
                                                    list(theirs.entries), dict(theirs.extra))
                added += len(theirs.entries)
                if self.active is None or other.active == name:
                    self.active = name
                continue
            have = mine.ids()
            newest = newest_timestamp(mine.entries)
            new = [e for e in theirs.entries if e["id"] not in have]
            if new:
                mine.entries = mine.entries + new
                added += len(new)
                if newest_timestamp(new) >= newest:
                    mine.leaf = theirs.leaf if theirs.leaf is not None else new[-1]["id"]
                    mine.settings = theirs.settings.copy() if theirs.settings else mine.settings
                    mine.header = theirs.header.copy() if theirs.header else mine.header
                    if other.active == name:
                        self.active = name
        if self.active is None:
            self.active = other.active if other.active in self.sessions else next(iter(self.sessions), None)
        for item in other.set_aside:
            if not contains_set_aside(self.set_aside, item):
                self.set_aside.append(item)
        return added

    def to_session(self, name: str | None = None, **session_kwargs: Any) -> Session:
        """The named (default: the active) session as a :class:`ipyagent.core.Session`."""
        from ipyagent.core import Session

        name = self.resolve_name(name)
        stored = self.sessions[name]
        session_kwargs.setdefault("report", self.report)
        session_kwargs.setdefault("set_aside", self.pi_lines(name))
        with deep_json.paused_gc():  # indexes every entry: many new containers, no garbage
            return Session(stored.header.copy(), list(stored.entries), stored.leaf, **session_kwargs)

    def pi_lines(self, name: str) -> list[SetAside]:
        """The lines of a Pi file imported as session ``name`` that were set aside (in file order)."""
        return [item for item in self.set_aside if item.get("session") == name and is_pi_line(item)]

    def store_pi_import(self, name: str, header: SessionHeader, entries: list[Entry], report: LoadReport,
                        settings: SavedSettings | None = None, source: str = "") -> None:
        """Store a Pi file's session (``parse_pi_jsonl``'s result) as session ``name``, made active.

        A session of that name is replaced, with the lines set aside when it was imported. The
        lines set aside now are kept under ``set_aside`` (each with this session's name), so an
        export writes them back in their places.
        """
        self.set_aside = [item for item in self.set_aside
                          if not (item.get("session") == name and is_pi_line(item))]
        for item in report.set_aside:
            record: SetAside = {"session": name, **item}
            if source:
                record.setdefault("source", source)
            self.set_aside.append(record)
        leaf = entries[-1]["id"] if entries else None  # Pi resumes at the file's last entry
        self.sessions[name] = StoredSession(header, leaf, cast(SavedSettings, strip_secrets(settings or {})), entries)
        self.active = name

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
