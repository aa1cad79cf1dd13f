"""What the kernel sent the page and what the page says it stores (``docs/protocol.md``).

Per session: every entry sent (by id, in send order), the ids the frontend acknowledged, the last
leaf / header / settings / active flag sent, and which ids went on the current comm; per message
still unacknowledged, its session and ids. No comm: the bridge (``bridge/comm.py``) does the
sending. Thread-safe (acks arrive on a comm subshell's thread while a cell sends).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ipyagent.agent.run_config import SavedSettings

__all__ = ["DocumentState", "SessionState"]


@dataclass
class SessionState:
    """One session as the kernel sent it."""

    sent: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # id -> entry, in send order
    acked: set[str] = field(default_factory=set)
    on_comm: set[str] = field(default_factory=set)  # ids sent on the current comm
    leaf: str | None = None
    active: bool = True
    header: dict[str, Any] | None = None
    settings: SavedSettings | None = None

    def unacked(self) -> list[str]:
        return [i for i in self.sent if i not in self.acked]


class DocumentState:
    """The sessions the page should hold, and how much of them it acknowledged."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sessions: dict[str, SessionState] = {}
        self._inflight: dict[int, tuple[str, list[str]]] = {}  # seq -> (session, ids) not acked yet

    def record(self, name: str, entries: Iterable[Mapping[str, Any]], *, leaf: str | None, active: bool,
               header: Mapping[str, Any] | None, settings: Mapping[str, Any] | None) -> None:
        """Remember new entries of session ``name`` (each once, by id) and where its leaf is now."""
        with self._lock:
            state = self._sessions.setdefault(name, SessionState())
            for e in entries:
                eid = e.get("id")
                if not isinstance(eid, str):
                    raise ValueError(f"entry without a string id: {e!r}")
                state.sent.setdefault(eid, e)
            state.leaf, state.active = leaf, bool(active)
            if header is not None:
                state.header = dict(header)
            if settings is not None:
                state.settings = cast(SavedSettings, dict(settings))  # checked where read

    def session(self, name: str) -> SessionState:
        """What was last sent of session ``name`` (its leaf, header, settings, active flag)."""
        with self._lock:
            return self._sessions.setdefault(name, SessionState())

    def to_send(self, name: str, *, resend: bool) -> list[Mapping[str, Any]]:
        """The entries of ``name`` not acknowledged; with ``resend=False`` without those already
        sent on the current comm (their acks may simply not have been handled yet)."""
        with self._lock:
            state = self._sessions.get(name)
            if state is None:
                return []
            return [e for i, e in state.sent.items()
                    if i not in state.acked and (resend or i not in state.on_comm)]

    def sending(self, seq: int, name: str, entries: list[Mapping[str, Any]]) -> None:
        """Message ``seq`` carries ``entries`` of ``name`` on the current comm."""
        ids = [e["id"] for e in entries]
        with self._lock:
            self._inflight[seq] = (name, ids)
            self._sessions.setdefault(name, SessionState()).on_comm.update(ids)

    def acknowledge(self, ack: Mapping[str, Any]) -> None:
        """The frontend stored what an ``ack`` names (its ``session`` and ``ids``, else those of the
        message whose ``seq`` it answers)."""
        seq = ack.get("seq")
        with self._lock:
            flight = self._inflight.pop(seq, None) if isinstance(seq, int) else None
            session = ack.get("session")
            if not isinstance(session, str):
                session = flight[0] if flight else None
            ids = ack.get("ids")
            if not isinstance(ids, list):
                ids = flight[1] if flight else []
            if session is not None:
                self._sessions.setdefault(session, SessionState()).acked.update(i for i in ids if isinstance(i, str))

    def new_comm(self) -> None:
        """A new comm: whatever was in flight on the old one may never be acked, so goes again."""
        with self._lock:
            self._inflight.clear()
            for state in self._sessions.values():
                state.on_comm.clear()

    def keep_only_stored(self, pushed: Mapping[str, Any]) -> None:
        """A frontend pushed what it stores (``metadata["ipyagent"]``): an acknowledged entry it
        lacks (its tab was closed without saving) counts as unacknowledged again."""
        sessions = pushed.get("sessions")
        with self._lock:
            for name, state in self._sessions.items():
                stored: set[str] = set()
                sess = sessions.get(name) if isinstance(sessions, Mapping) else None
                if isinstance(sess, Mapping) and isinstance(sess.get("entries"), list):
                    stored = {e["id"] for e in sess["entries"]
                              if isinstance(e, Mapping) and isinstance(e.get("id"), str)}
                state.acked.intersection_update(stored)

    def acked_ids(self, name: str) -> set[str]:
        with self._lock:
            state = self._sessions.get(name)
            return set(state.acked) if state is not None else set()

    def unacked(self, name: str | None = None) -> dict[str, list[str]]:
        """Ids sent but not acknowledged, per session (only sessions that have some)."""
        with self._lock:
            names = [name] if name is not None else list(self._sessions)
            out = {}
            for n in names:
                state = self._sessions.get(n)
                ids = state.unacked() if state is not None else []
                if ids:
                    out[n] = ids
            return out

    @property
    def all_acked(self) -> bool:
        return not self.unacked()
