"""The session: an append-only tree of entries with a movable leaf (Pi's session model)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from types import EllipsisType
from typing import Any

from ipyagent.session.context import ContextState
from ipyagent.session.entries import Entry, SessionHeader, same_content, shape_problem
from ipyagent.session.ids import iso_now, new_entry_id, new_session_id
from ipyagent.session.messages import Message
from ipyagent.session.tokens import Chars4Estimator, Estimator


class SessionError(ValueError):
    """A request the session cannot honour (unknown entry, bad shape…); nothing was changed."""


def new_header(cwd: str = "", **extra: Any) -> SessionHeader:
    header: SessionHeader = {"type": "session", "version": 3, "id": new_session_id(), "timestamp": iso_now(),
                             "cwd": cwd}
    header.update(extra)  # type: ignore[typeddict-item]  # a caller's own header fields
    return header


class SessionTree:
    """Entries in arrival order, indexed by id, with the leaf pointer and the cached context.

    Entries are never modified or removed. ``append`` adds a child of the leaf and moves the leaf
    to it; ``branch`` moves the leaf to any entry (the next append records the branch).

    An entry whose ``parentId`` names no entry here (its parent was set aside on load) is a root,
    as in Pi's tree; its ``parentId`` stays as written, so an export loses nothing.
    """

    def __init__(self, header: SessionHeader | None = None, entries: Iterable[Entry] = (),
                 leaf_id: str | None = None, estimator: Estimator | None = None):
        self.header: SessionHeader = header if header is not None else new_header()
        self.entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self.estimator: Estimator = estimator or Chars4Estimator()
        self._estimates: dict[str, int] = {}
        self._path: list[Entry] = []
        self._path_leaf: str | None = None
        self._context: ContextState | None = None
        self._follow: dict[str | None, str] | None = None  # parent id -> the followed path's child
        self._follow_ids: frozenset[str] = frozenset()  # the followed path's entry ids
        self._same: Callable[[Entry, Entry], bool] = same_content
        for entry in entries:
            self._store(entry)
        # parents that are missing: a new entry never takes such an id (it would adopt the orphans)
        self._missing_parents: set[str] = {p for p in (e.get("parentId") for e in self.entries)
                                           if isinstance(p, str) and p not in self._by_id}
        self.leaf_id: str | None = leaf_id if leaf_id in self._by_id else (
            self.entries[-1]["id"] if self.entries else None)

    # ---- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def get(self, entry_id: str) -> Entry | None:
        return self._by_id.get(entry_id)

    def parent_id(self, entry: Entry) -> str | None:
        """The id of ``entry``'s parent in this session (None for a root, also one whose parent is missing)."""
        parent = entry.get("parentId")
        return parent if parent is not None and parent in self._by_id else None

    def children(self, entry_id: str | None) -> list[Entry]:
        """The entries under ``entry_id``; ``None``: the roots (with the entries whose parent is missing)."""
        if entry_id is None:
            return [e for e in self.entries if self.parent_id(e) is None]
        return [e for e in self.entries if e.get("parentId") == entry_id]

    def path(self, leaf_id: str | EllipsisType | None = ...) -> list[Entry]:
        """Entries from the root to ``leaf_id`` (default: the leaf), root first."""
        if leaf_id is ...:
            return list(self._current_path())
        return self._walk_up(leaf_id)

    def _current_path(self) -> list[Entry]:
        if self._path_leaf != self.leaf_id or (self.leaf_id is None and self._path):
            self._path = self._walk_up(self.leaf_id)
            self._path_leaf = self.leaf_id
        return self._path

    def _walk_up(self, entry_id: str | None) -> list[Entry]:
        path: list[Entry] = []
        seen: set[str] = set()
        current = self._by_id.get(entry_id) if entry_id is not None else None
        while current is not None and current["id"] not in seen:
            seen.add(current["id"])
            path.append(current)
            parent = current.get("parentId")
            current = self._by_id.get(parent) if parent is not None else None
        path.reverse()
        return path

    def labels(self) -> dict[str, str]:
        """Target id → label; the last label entry for a target wins, an empty one clears it."""
        labels: dict[str, str] = {}
        for entry in self.entries:
            if entry.get("type") == "label" and isinstance(entry.get("targetId"), str):
                label = entry.get("label")
                if label:
                    labels[entry["targetId"]] = label
                else:
                    labels.pop(entry["targetId"], None)
        return labels

    # ---- writing ---------------------------------------------------------------------------

    def append(self, entry: Entry) -> Entry:
        """Add ``entry`` as a child of the leaf (or of its explicit ``parentId``) and make it the leaf.

        ``id``, ``parentId`` and ``timestamp`` are filled in when missing. The entry is copied, so
        the caller's dict is never aliased by the session. While following a path (:meth:`follow`),
        an entry that repeats the path's next one returns that stored entry instead.
        """
        problem = shape_problem(entry)
        if problem:
            raise SessionError(f"cannot append: {problem}")
        followed = self._followed(entry)
        if followed is not None:
            self._advance_leaf(followed)
            return followed
        entry = copy.deepcopy(entry)
        if "id" not in entry or entry["id"] is None:
            entry["id"] = new_entry_id(self._by_id)
            while entry["id"] in self._missing_parents:
                entry["id"] = new_entry_id(self._by_id)
        elif not isinstance(entry["id"], str) or not entry["id"]:
            raise SessionError("cannot append: 'id' must be a non-empty string")
        elif entry["id"] in self._by_id:
            raise SessionError(f"cannot append: an entry with id {entry['id']!r} already exists")
        if "parentId" not in entry:
            entry["parentId"] = self.leaf_id
        elif entry["parentId"] is not None and entry["parentId"] not in self._by_id:
            raise SessionError(f"cannot append: parent {entry['parentId']!r} is not in the session")
        entry.setdefault("timestamp", iso_now())
        # Keep Pi's key order: type, id, parentId, timestamp, then the type's fields.
        ordered: Entry = {"type": entry["type"], "id": entry["id"], "parentId": entry["parentId"],
                          "timestamp": entry["timestamp"]}
        ordered.update((k, v) for k, v in entry.items() if k not in ordered)  # type: ignore[typeddict-item]
        self._store(ordered)
        self._advance_leaf(ordered)
        return ordered

    def _store(self, entry: Entry) -> None:
        self.entries.append(entry)
        self._by_id[entry["id"]] = entry

    def _advance_leaf(self, entry: Entry) -> None:
        under_leaf = entry.get("parentId") == self.leaf_id
        if under_leaf and self._path_leaf == self.leaf_id and (self._path or self.leaf_id is None):
            self._path.append(entry)
            self._path_leaf = entry["id"]
        if under_leaf and self._context is not None and self._context.leaf_id == self.leaf_id \
                and entry.get("type") not in ("compaction", "context_edit"):
            self._context.extend(entry, self._estimate)
        else:
            self._context = None
        self.leaf_id = entry["id"]

    def follow(self, path: Iterable[Entry] | None,
               same: Callable[[Entry, Entry], bool] = same_content) -> None:
        """Follow ``path`` (entries root first, e.g. the path a session was recorded on): while
        following, an append that says the same as the path's entry under the leaf
        (``same(path_entry, new_entry)``, by default
        :func:`~ipyagent.session.entries.same_content`) moves the leaf to that entry instead of
        storing a copy, and the first append that differs starts a new branch as usual.
        ``None`` stops following."""
        entries = [] if path is None else list(path)
        self._follow = None if path is None else {e.get("parentId"): e["id"] for e in entries}
        self._follow_ids = frozenset(e["id"] for e in entries)
        self._same = same

    def on_followed_path(self) -> bool:
        """Whether a path is followed and the leaf is on it (no append has departed from it yet)."""
        if self._follow is None:
            return False
        return None in self._follow if self.leaf_id is None else self.leaf_id in self._follow_ids

    def followed_next(self) -> Entry | None:
        """The followed path's entry under the leaf — what the followed session did next — or None
        (not following, the leaf is off the path, or at its end)."""
        if not self.on_followed_path():
            return None
        assert self._follow is not None
        entry = self._by_id.get(self._follow.get(self.leaf_id, ""))
        return entry if entry is not None and entry.get("parentId") == self.leaf_id else None

    def _followed(self, entry: Entry) -> Entry | None:
        if self._follow is None or entry.get("id") is not None or entry.get("parentId", self.leaf_id) != self.leaf_id:
            return None
        existing = self._by_id.get(self._follow.get(self.leaf_id, ""))
        if existing is None or existing.get("parentId") != self.leaf_id or not self._same(existing, entry):
            return None
        return existing

    def branch(self, entry_id: str | None) -> None:
        """Move the leaf to ``entry_id`` (None: before the first entry)."""
        if entry_id is not None and entry_id not in self._by_id:
            raise SessionError(f"no entry with id {entry_id!r} in this session")
        self.leaf_id = entry_id

    # ---- context ---------------------------------------------------------------------------

    def _estimate(self, entry: Entry, message: Message) -> int:
        cached = self._estimates.get(entry["id"])
        if cached is None:
            cached = self._estimates[entry["id"]] = self.estimator.estimate(message)
        return cached

    def set_estimator(self, estimator: Estimator) -> None:
        self.estimator = estimator
        self._estimates.clear()
        self._context = None

    def context_state(self) -> ContextState:
        if self._context is None or self._context.leaf_id != self.leaf_id:
            self._context = ContextState.build(self._current_path(), self.leaf_id, self._estimate,
                                               self.estimator.estimate)
        return self._context

    def estimate_entry(self, entry: Entry, message: Message) -> int:
        return self._estimate(entry, message)
