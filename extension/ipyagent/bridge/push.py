"""Where a frontend's push of ``metadata["ipyagent"]`` waits in a kernel (``docs/protocol.md``,
"Rehydration").

When a kernel starts (or a frontend connects to a running kernel) the frontend runs silent execute
requests calling ``ipyagent.bridge.comm.receive_push`` (or ``receive_push_part``, one per part of a
large push). The push can arrive before ``%load_ext ipyagent``, so it waits in a :class:`PushInbox`
until the notebook layer takes it. The inbox belongs to the kernel's IPython shell
(:func:`inbox_of`): the silent request finds it through ``get_ipython()``, and the kernel's runtime
holds the same object and passes it to its bridge and to the loading of sessions. Nothing here is
module state: a shell (a test's too) starts with an empty inbox.

The bridge open in the kernel listens to its inbox: a push into a running kernel (a page reload, a
second tab) re-opens the comm, so the new frontend gets a ``hello`` (``bridge/comm.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from ipyagent.session import deep_json

__all__ = ["INBOX_ATTRIBUTE", "PushInbox", "PushListener", "inbox_of", "merge_metadata"]

# the attribute of the IPython shell that holds its inbox
INBOX_ATTRIBUTE = "_ipyagent_push_inbox"


class PushListener(Protocol):
    """The bridge open in the kernel, told of every push (``KernelBridge``)."""

    def frontend_pushed(self, data: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class PushInbox:
    """The pushes a kernel received and not yet handed on, the problems they had, the parts of a
    push still arriving, and the bridge to tell of a push. Thread-safe: pushes arrive on the
    shell's thread, a bridge opens and closes on any."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pending: dict[str, Any] | None = None
        self._errors: list[str] = []
        self._parts: dict[str, list[str | None]] = {}  # a push in parts: its id -> the parts so far
        self._listener: PushListener | None = None

    # ---- arriving --------------------------------------------------------------------------

    def receive(self, json_text: str, source: str = "unknown") -> None:
        """Store ``metadata["ipyagent"]`` pushed by a frontend. Never raises: the request is
        silent, so an exception would go unseen; a malformed push is recorded in :meth:`errors`
        instead. Several pushes before the notebook layer takes them (two tabs of one notebook
        both push after a restart) are merged by entry id. A part nested too deeply for Python (a
        hostile entry) arrives as a marker holding its text, and the notebook layer sets its entry
        aside; the rest loads."""
        try:
            with deep_json.paused_gc():
                self._receive(json_text, source)
        except Exception as exc:  # noqa: BLE001 - the request is silent: say it, never raise
            self._error(f"push from {source}: could not be read ({type(exc).__name__}: {exc})")

    def receive_part(self, text: str, *, push: str, index: int, count: int, source: str = "unknown") -> None:
        """One of the ``count`` parts of a push too large for one message, sent in order; the last
        one completes the push (:meth:`receive`). A push whose parts stop coming (a new push
        started, the frontend went away) is reported in :meth:`errors`, never taken in part."""
        try:
            complete = self._add_part(text, push, index, count, source)
        except Exception as exc:  # noqa: BLE001 - the request is silent: say it, never raise
            self._error(f"push from {source}: part could not be read ({type(exc).__name__}: {exc})")
            return
        if complete is not None:
            self.receive(complete, source)

    def _add_part(self, text: str, push: str, index: int, count: int, source: str) -> str | None:
        with self._lock:
            for other in [k for k in self._parts if k != push]:
                got = sum(1 for x in self._parts.pop(other) if x is not None)
                self._errors.append(f"push from {source}: incomplete, {got} parts arrived before a new push "
                                    "began; that push was not taken")
            if not (isinstance(count, int) and 0 < count and isinstance(index, int) and 0 <= index < count):
                raise ValueError(f"part {index!r} of {count!r}")
            parts = self._parts.setdefault(push, [None] * count)
            if len(parts) != count:
                raise ValueError(f"part of a {count}-part push whose first part said {len(parts)}")
            parts[index] = text
            if any(x is None for x in parts):
                return None
            del self._parts[push]
            return "".join(x for x in parts if x is not None)

    def _receive(self, json_text: str, source: str) -> None:
        try:
            data = deep_json.loads(json_text, fast=True)  # JSON.stringify output: numbers are doubles already
        except (TypeError, ValueError, RecursionError) as exc:
            self._error(f"push from {source}: not JSON ({exc})")
            return
        if not isinstance(data, dict):
            self._error(f"push from {source}: expected an object, got {type(data).__name__}")
            return
        with self._lock:
            self._pending = data if self._pending is None else merge_metadata(self._pending, data)
            listener = self._listener
        if listener is not None:
            try:
                listener.frontend_pushed(data)
            except Exception as exc:  # noqa: BLE001 - never let the silent request fail
                self._error(f"push from {source}: bridge could not re-open ({exc!r})")

    def _error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    # ---- taken -----------------------------------------------------------------------------

    def take(self) -> dict[str, Any] | None:
        """The pushed ``metadata["ipyagent"]`` (merged if several arrived), cleared."""
        with self._lock:
            data, self._pending = self._pending, None
            return data

    def peek(self) -> dict[str, Any] | None:
        """The pending push without clearing it (``None`` when there is none)."""
        with self._lock:
            return self._pending

    def errors(self, clear: bool = False) -> list[str]:
        """Messages about malformed pushes (never raised, since the push request is silent)."""
        with self._lock:
            errors = list(self._errors)
            if clear:
                self._errors.clear()
            return errors

    # ---- the bridge that listens -----------------------------------------------------------

    @property
    def listener(self) -> PushListener | None:
        """The bridge most recently opened on this inbox (``None`` if none is open)."""
        with self._lock:
            return self._listener

    def listen(self, listener: PushListener) -> None:
        """Make ``listener`` the bridge told of pushes; the one before it is closed (a kernel has
        one bridge open)."""
        with self._lock:
            previous, self._listener = self._listener, listener
        if previous is not None and previous is not listener:
            previous.close()

    def stop_listening(self, listener: PushListener) -> None:
        with self._lock:
            if self._listener is listener:
                self._listener = None


def inbox_of(shell: Any) -> PushInbox:
    """The inbox of an IPython shell, made at its first use (the first push, or the runtime)."""
    inbox = vars(shell).get(INBOX_ATTRIBUTE)
    if not isinstance(inbox, PushInbox):
        inbox = PushInbox()
        setattr(shell, INBOX_ATTRIBUTE, inbox)
    return inbox


def merge_metadata(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two ``metadata["ipyagent"]`` values by entry id (``base``'s order first).

    ``header`` / ``leaf`` / ``settings`` / ``active`` come from ``new`` when it has them.
    Malformed parts (a session that is not an object, entries that are not a list, an entry
    without a string id) are kept as they are, never dropped: deciding what to do with them
    is the notebook layer's job.
    """
    out: dict[str, Any] = {k: v for k, v in base.items() if k != "sessions"}
    for k, v in new.items():
        if k != "sessions":
            out[k] = v
    sessions: dict[str, Any] = {}
    base_sessions = base.get("sessions")
    new_sessions = new.get("sessions")
    for src in (base_sessions, new_sessions):
        if isinstance(src, Mapping):
            for name, sess in src.items():
                _merge_session(sessions, name, sess)
    if base_sessions is not None or new_sessions is not None:
        out["sessions"] = sessions
    return out


def _merge_session(sessions: dict[str, Any], name: str, sess: Any) -> None:
    if name not in sessions or not isinstance(sessions[name], dict) or not isinstance(sess, Mapping):
        sessions[name] = dict(sess) if isinstance(sess, Mapping) else sess
        if isinstance(sess, Mapping) and isinstance(sess.get("entries"), list):
            sessions[name]["entries"] = list(sess["entries"])
        return
    cur = sessions[name]
    for k, v in sess.items():
        if k != "entries":
            cur[k] = v
    old_entries = cur.get("entries")
    new_entries = sess.get("entries")
    if not isinstance(new_entries, list):
        return
    if not isinstance(old_entries, list):
        cur["entries"] = list(new_entries)
        return
    seen = {e.get("id") for e in old_entries if isinstance(e, Mapping)}
    merged = list(old_entries)
    for e in new_entries:
        eid = e.get("id") if isinstance(e, Mapping) else None
        if isinstance(eid, str) and eid in seen:
            continue
        if isinstance(eid, str):
            seen.add(eid)
        merged.append(e)
    cur["entries"] = merged
