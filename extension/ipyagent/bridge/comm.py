"""The kernel end of the ``ipyagent`` comm (``docs/protocol.md``).

The kernel never writes the notebook file. A :class:`KernelBridge` opens the comm ``ipyagent``
(``{"type": "hello", "protocol": 1}``); a frontend that holds the notebook open (the JupyterLab /
Notebook 7 labextension, or the headless runner) answers ``hello_ack``, stores every ``entries``
message in ``metadata["ipyagent"]`` and acknowledges it. Entries that were sent but never
acknowledged are sent again with the next message, so nothing is lost when a message goes
nowhere; storing is idempotent by entry id, so sending twice is harmless.

Timing. While a cell runs, a kernel handles incoming shell messages only after the cell — unless
the frontend sends comm messages over a kernel subshell (JupyterLab 4.6 with ipykernel 7 does), in
which case they arrive on another thread while the cell runs. Both cases are handled: all state is
guarded by a lock, and nothing here ever *blocks* on a reply except :meth:`KernelBridge.wait_connected`
/ :meth:`KernelBridge.wait_acked`, which take a timeout and simply report ``False`` when the reply
cannot arrive during the cell.

The other direction: when a kernel starts (or a frontend connects to a running kernel) the frontend
runs one silent execute request calling :func:`receive_push` with the notebook's stored
``metadata["ipyagent"]``. The pushed data waits in this module until the notebook layer takes it
with :func:`pending_push`. If a bridge is already open in this kernel (a page reload, a second tab,
a kernel switched to this notebook), the push also re-opens the comm, so the new frontend gets a
``hello``, and every entry the kernel sent that the pushed metadata lacks (e.g. the tab was closed
without saving) is marked unacknowledged and sent again.

This module is light: ``comm`` is imported only when a bridge is opened.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ipyagent.session import deep_json

__all__ = [
    "PROTOCOL",
    "TARGET",
    "KernelBridge",
    "active_bridge",
    "merge_metadata",
    "peek_push",
    "pending_push",
    "push_errors",
    "receive_push",
    "receive_push_part",
]

TARGET = "ipyagent"
PROTOCOL = 1
# the frontend's answers to the kernel's requests (kept until taken with ``wait_reply``)
REPLY_TYPES = ("insert_cell_ack", "cells")
# how long after opening the comm a run or ``%agent status`` waits for the frontend's ``hello_ack``
HANDSHAKE_GRACE = 3.0
# The largest comm message the kernel sends, and the largest part of a push the frontend sends:
# far below the server's websocket limit (tornado's 10 MiB default, which operators may lower).
MAX_MESSAGE_BYTES = 1 << 20

_lock = threading.RLock()
_pending: dict[str, Any] | None = None
_pending_sources: list[str] = []
_push_errors: list[str] = []
_parts: dict[str, list[str | None]] = {}  # a push in parts: its id -> the parts arrived so far
_active: KernelBridge | None = None


# ----------------------------------------------------------------------------------------------
# frontend → kernel: the silent push after a kernel start


def receive_push(json_text: str, source: str = "unknown") -> None:
    """Store ``metadata["ipyagent"]`` pushed by a frontend (called by its silent execute request).

    Never raises: the request is silent, so an exception would go unseen; a malformed push is
    recorded in :func:`push_errors` instead. Several pushes before the notebook layer picks them up
    (two tabs of one notebook both push after a restart) are merged by entry id. A part nested too
    deeply for Python (a hostile entry) arrives as a marker holding its text, and the notebook
    layer sets its entry aside; the rest loads.
    """
    try:
        with deep_json.paused_gc():
            _receive_push(json_text, source)
    except Exception as exc:  # noqa: BLE001 - the request is silent: say it, never raise
        with _lock:
            _push_errors.append(f"push from {source}: could not be read ({type(exc).__name__}: {exc})")


def receive_push_part(text: str, *, push: str, index: int, count: int, source: str = "unknown") -> None:
    """One part of a push too large for one message (docs/protocol.md, "Rehydration").

    The frontend cuts the JSON text into ``count`` parts and sends them in order, each in its own
    silent execute request; the last one completes the push (:func:`receive_push`). A push whose
    parts stop coming (a new push started, the frontend went away) is reported in
    :func:`push_errors`, never taken in part. Never raises.
    """
    try:
        complete = _add_part(text, push, index, count, source)
    except Exception as exc:  # noqa: BLE001 - the request is silent: say it, never raise
        with _lock:
            _push_errors.append(f"push from {source}: part could not be read ({type(exc).__name__}: {exc})")
        return
    if complete is not None:
        receive_push(complete, source)


def _add_part(text: str, push: str, index: int, count: int, source: str) -> str | None:
    with _lock:
        for other in [k for k in _parts if k != push]:
            got = sum(1 for x in _parts.pop(other) if x is not None)
            _push_errors.append(f"push from {source}: incomplete, {got} parts arrived before a new push "
                                "began; that push was not taken")
        if not (isinstance(count, int) and 0 < count and isinstance(index, int) and 0 <= index < count):
            raise ValueError(f"part {index!r} of {count!r}")
        parts = _parts.setdefault(push, [None] * count)
        if len(parts) != count:
            raise ValueError(f"part of a {count}-part push whose first part said {len(parts)}")
        parts[index] = text
        if any(x is None for x in parts):
            return None
        del _parts[push]
        return "".join(x for x in parts if x is not None)


def _receive_push(json_text: str, source: str) -> None:
    global _pending
    try:
        data = deep_json.loads(json_text, fast=True)  # JSON.stringify output: numbers are doubles already
    except (TypeError, ValueError, RecursionError) as exc:
        with _lock:
            _push_errors.append(f"push from {source}: not JSON ({exc})")
        return
    if not isinstance(data, dict):
        with _lock:
            _push_errors.append(f"push from {source}: expected an object, got {type(data).__name__}")
        return
    with _lock:
        _pending = data if _pending is None else merge_metadata(_pending, data)
        _pending_sources.append(str(source))
        bridge = _active
    if bridge is not None:
        try:
            bridge._on_push(data)
        except Exception as exc:  # noqa: BLE001 - never let the silent request fail
            with _lock:
                _push_errors.append(f"push from {source}: bridge could not re-open ({exc!r})")


def pending_push() -> dict[str, Any] | None:
    """Return the pushed ``metadata["ipyagent"]`` (merged if several arrived) and clear it."""
    global _pending
    with _lock:
        data, _pending = _pending, None
        _pending_sources.clear()
        return data


def peek_push() -> dict[str, Any] | None:
    """The pending push without clearing it (``None`` when there is none)."""
    with _lock:
        return _pending


def push_errors(clear: bool = False) -> list[str]:
    """Messages about malformed pushes (never raised, since the push request is silent)."""
    with _lock:
        errors = list(_push_errors)
        if clear:
            _push_errors.clear()
        return errors


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
        if not isinstance(src, Mapping):
            continue
        for name, sess in src.items():
            if name not in sessions or not isinstance(sessions[name], dict) or not isinstance(sess, Mapping):
                sessions[name] = dict(sess) if isinstance(sess, Mapping) else sess
                if isinstance(sess, Mapping) and isinstance(sess.get("entries"), list):
                    sessions[name]["entries"] = list(sess["entries"])
                continue
            cur = sessions[name]
            for k, v in sess.items():
                if k != "entries":
                    cur[k] = v
            old_entries = cur.get("entries")
            new_entries = sess.get("entries")
            if not isinstance(new_entries, list):
                continue
            if not isinstance(old_entries, list):
                cur["entries"] = list(new_entries)
                continue
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
    if base_sessions is not None or new_sessions is not None:
        out["sessions"] = sessions
    return out


def active_bridge() -> KernelBridge | None:
    """The bridge most recently opened in this kernel (``None`` if none is open)."""
    with _lock:
        return _active


def _reset_for_tests() -> None:
    global _pending, _active
    with _lock:
        _pending = None
        _pending_sources.clear()
        _push_errors.clear()
        _parts.clear()
        _active = None


def message_parts(entries: list[Mapping[str, Any]], limit: int) -> list[list[Mapping[str, Any]]]:
    """``entries`` in consecutive groups of at most ``limit`` bytes of JSON each (one entry larger
    than that goes alone: nothing is dropped). Always at least one group, maybe empty (a message
    that only moves the leaf)."""
    groups: list[list[Mapping[str, Any]]] = [[]]
    size = 0
    for e in entries:
        n = len(json.dumps(e, ensure_ascii=False).encode("utf-8")) + 1
        if groups[-1] and size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append(e)
        size += n
    return groups


def _frontend_routed_comm_class(create_comm: Any) -> Any:
    """ipykernel's comm class, except that the frontend's messages on it are handled on the shell
    the frontend addressed them to (``None`` outside ipykernel, or before 7.4's routing).

    ipykernel 7.4 routes a comm's incoming messages to the shell that last sent on it
    (``_reply_subshell_for``); for this comm that is the busy main shell of a running cell or a
    Run All, so the handshake and the acks would wait for every queued cell. Dropping the route
    after each send (:func:`_answer_where_sent`) leaves a moment in which an answer arriving
    during the send is still routed there; deciding the route in the comm itself leaves none.
    """
    if getattr(create_comm, "__module__", "") != "ipykernel.ipkernel":
        return None  # another kernel's comms (or none): its own create_comm
    try:
        from ipykernel.comm.comm import BaseComm
    except ImportError:
        return None
    if not hasattr(BaseComm, "_reply_subshell_for"):
        return None
    global _ROUTED
    if _ROUTED is None:
        class FrontendRoutedComm(BaseComm):
            def _reply_subshell_for(self, data: Any, default: Any) -> Any:
                return default

        _ROUTED = FrontendRoutedComm
    return _ROUTED


_ROUTED: Any = None


def _drop_quietly(c: Any) -> None:
    """Forget a comm without sending ``comm_close``.

    A ``comm_close`` goes to every page on the kernel, and a page that never knew the comm (a
    second tab, a page that connected after it opened) logs "Comm not found for comm id …". No
    page needs the close: each comm's handler only answers what the kernel sends on it, and a new
    ``hello`` comm replaces the old one. A comm that is not ipykernel's (a test's) is closed.
    """
    try:
        from comm.base_comm import BaseComm
    except ImportError:
        base: Any = None
    else:
        base = BaseComm
    if base is not None and isinstance(c, base):
        if not c._closed:
            c._closed = True
            try:
                import comm

                comm.get_comm_manager().unregister_comm(c)
            except Exception:  # noqa: BLE001 - already unregistered (the frontend closed it)
                pass
        return
    try:
        c.close()
    except Exception:  # noqa: BLE001 - closing a comm the frontend already dropped
        pass


def _answer_where_sent(c: Any) -> None:
    """Let the frontend's answers reach the kernel while the sending cell still runs.

    ipykernel 7.4 routes a comm's incoming messages to the subshell that sent the kernel's last
    message on it; for a message sent from a running cell (the ``hello`` of ``%load_ext`` in a
    Run All, an ``entries`` message, a request) that is the main shell, busy until every queued
    cell has ended. Dropping that route (a private attribute; absent elsewhere, then nothing
    changes) after each message sends the frontend's answer where the frontend addressed it — its
    comm subshell — so handshakes, acks and answers are handled while cells run.
    """
    lock = getattr(c, "_reply_subshell_lock", None)
    if lock is None:
        return
    with lock:
        vars(c).pop("_reply_subshell_id", None)


# ----------------------------------------------------------------------------------------------
# kernel → frontend: the comm


class KernelBridge:
    """The kernel end of the ``ipyagent`` comm.

    Typical use by the notebook layer::

        bridge = KernelBridge()
        bridge.open()                      # sends hello; hello_ack arrives later
        ...
        bridge.send_entries("default", new_entries, leaf=leaf_id, header=header,
                            settings=settings)
        if not bridge.connected:           # no frontend acked (yet): also write a journal output
            ...

    ``connected`` becomes true when a ``hello_ack`` arrived on the current comm, and false again
    when the frontend closes the comm. Acks are processed whenever the kernel reads its shell
    channel (after the cell, or at once if comms run on a subshell).
    """

    def __init__(
        self,
        *,
        target: str = TARGET,
        on_ack: Callable[[dict[str, Any]], None] | None = None,
        on_hello_ack: Callable[[dict[str, Any]], None] | None = None,
        comm_factory: Callable[..., Any] | None = None,
    ) -> None:
        self.target = target
        self.on_ack = on_ack
        self.on_hello_ack = on_hello_ack
        self._comm_factory = comm_factory
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._comm: Any = None
        self._connected = False
        self._closed_by_frontend = False
        self._hello_ack: dict[str, Any] | None = None
        self._seq = 0
        # per session: every entry sent (id -> entry, in send order), and the acked ids
        self._sent: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._acked: dict[str, set[str]] = {}
        self._state: dict[str, dict[str, Any]] = {}  # last leaf/header/settings per session
        self._inflight: dict[int, tuple[str, list[str]]] = {}  # seq -> (session, ids)
        self._on_comm: dict[str, set[str]] = {}  # per session: ids sent on the current comm
        self.acks: list[dict[str, Any]] = []  # every ack received, newest last
        self.opened_at: float | None = None
        self._replies: dict[int, dict[str, Any]] = {}  # seq -> the frontend's answer to a request
        self._off_main_thread = False  # a message of this comm was handled off the main thread

    # -- state ----------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """A frontend acknowledged ``hello`` on the current comm, and has not closed it."""
        with self._lock:
            return self._connected

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._comm is not None and not self._closed_by_frontend

    @property
    def hello_ack(self) -> dict[str, Any] | None:
        """The frontend's ``hello_ack`` (``frontend``, ``path``), or ``None``."""
        with self._lock:
            return dict(self._hello_ack) if self._hello_ack is not None else None

    @property
    def frontend(self) -> str | None:
        ack = self.hello_ack
        return ack.get("frontend") if ack else None

    @property
    def path(self) -> str | None:
        ack = self.hello_ack
        return ack.get("path") if ack else None

    @property
    def seq(self) -> int:
        """The ``seq`` of the last message sent (0 before the first)."""
        with self._lock:
            return self._seq

    def acked_ids(self, session: str) -> set[str]:
        with self._lock:
            return set(self._acked.get(session, ()))

    def unacked(self, session: str | None = None) -> dict[str, list[str]]:
        """Ids sent but not acknowledged, per session (only sessions that have some)."""
        with self._lock:
            names = [session] if session is not None else list(self._sent)
            out = {}
            for name in names:
                acked = self._acked.get(name, set())
                ids = [i for i in self._sent.get(name, {}) if i not in acked]
                if ids:
                    out[name] = ids
            return out

    @property
    def all_acked(self) -> bool:
        return not self.unacked()

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> KernelBridge:
        """Open the comm (sends ``hello``) and make this the kernel's active bridge."""
        global _active
        with _lock:
            previous = _active
            _active = self
        if previous is not None and previous is not self:
            previous.close()
        self._open_comm()
        return self

    def reopen(self) -> None:
        """Close the current comm and open a new one (a new ``hello``).

        Used when another frontend connects to this running kernel: a comm is shared only with
        the frontends that were connected when it was opened.
        """
        self._close_comm()
        self._open_comm()

    def close(self) -> None:
        global _active
        self._close_comm()
        with _lock:
            if _active is self:
                _active = None

    def _make_comm(self, data: dict[str, Any]) -> Any:
        if self._comm_factory is not None:
            return self._comm_factory(target_name=self.target, data=data)
        import comm  # provided by ipykernel; imported lazily to keep ``import ipyagent`` light

        routed = _frontend_routed_comm_class(comm.create_comm)
        if routed is not None:
            return routed(target_name=self.target, data=data)
        return comm.create_comm(target_name=self.target, data=data)

    def _open_comm(self) -> None:
        with self._lock:
            self._connected = False
            self._closed_by_frontend = False
            self._hello_ack = None
            # Anything in flight on an old comm may never be acked: send it again later.
            self._inflight.clear()
            self._on_comm.clear()
            c = self._make_comm({"type": "hello", "protocol": PROTOCOL})
            _answer_where_sent(c)
            self._comm = c
            self.opened_at = time.time()
        c.on_msg(lambda msg, _c=c: self._handle_msg(_c, msg))
        c.on_close(lambda msg, _c=c: self._handle_close(_c, msg))

    def _close_comm(self) -> None:
        with self._lock:
            c, self._comm = self._comm, None
            self._connected = False
            self._changed.notify_all()
        if c is not None:
            _drop_quietly(c)

    # -- sending --------------------------------------------------------------------------------

    def send_entries(
        self,
        session_name: str,
        entries: Iterable[Mapping[str, Any]],
        *,
        leaf: str | None,
        header: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        active: bool = True,
        resend: bool = True,
        skip_empty: bool = False,
    ) -> int | None:
        """Send new entries of one session, with every earlier unacknowledged one.

        ``resend=False`` (the entries streamed while a run goes on) leaves out the unacknowledged
        entries already sent on the current comm: their acks may simply not have been handled yet
        (a frontend without subshells answers after the cell), and sending them with every new
        entry would make a run's messages grow with its square. They go again after a new
        ``hello_ack`` and with the next message sent with ``resend=True``. ``skip_empty``: send
        nothing when no entry is to be sent (the leaf follows with the next message).

        Returns the message's ``seq``, or ``None`` when no comm is open (nothing sent; the
        entries are remembered and go out with the next message after :meth:`open`) or nothing
        was to be sent. Entries must be JSON-serialisable mappings with a string ``id``.
        """
        with self._lock:
            sent = self._sent.setdefault(session_name, {})
            self._acked.setdefault(session_name, set())
            for e in entries:
                eid = e.get("id")
                if not isinstance(eid, str):
                    raise ValueError(f"entry without a string id: {e!r}")
                if eid not in sent:
                    sent[eid] = e
            state = self._state.setdefault(session_name, {})
            state["leaf"] = leaf
            state["active"] = bool(active)
            if header is not None:
                state["header"] = dict(header)
            if settings is not None:
                state["settings"] = dict(settings)
            return self._send_session(session_name, header=header, settings=settings, resend=resend,
                                      skip_empty=skip_empty)

    def resend_unacked(self) -> list[int]:
        """Send one ``entries`` message per session that has unacknowledged entries."""
        seqs = []
        with self._lock:
            for name in list(self.unacked()):
                state = self._state.get(name, {})
                seq = self._send_session(
                    name, header=state.get("header"), settings=state.get("settings")
                )
                if seq is not None:
                    seqs.append(seq)
        return seqs

    def _send_session(
        self,
        name: str,
        *,
        header: Mapping[str, Any] | None,
        settings: Mapping[str, Any] | None,
        resend: bool = True,
        skip_empty: bool = False,
    ) -> int | None:
        # caller holds self._lock
        c = self._comm
        if c is None or self._closed_by_frontend:
            return None
        acked = self._acked.get(name, set())
        on_comm = self._on_comm.setdefault(name, set())
        batch = [e for i, e in self._sent.get(name, {}).items()
                 if i not in acked and (resend or i not in on_comm)]
        if skip_empty and not batch:
            return None
        state = self._state.get(name, {})
        # No message comes near the websocket limit: many entries (a resend to a new frontend)
        # go in several messages; each is stored and acked on its own.
        for part in message_parts(batch, MAX_MESSAGE_BYTES):
            self._seq += 1
            msg: dict[str, Any] = {
                "type": "entries",
                "seq": self._seq,
                "session": name,
                "leaf": state.get("leaf"),
                "active": state.get("active", True),
                "entries": part,
            }
            if header is not None:
                msg["header"] = dict(header)
            if settings is not None:
                msg["settings"] = dict(settings)
            self._inflight[self._seq] = (name, [e["id"] for e in part])
            on_comm.update(e["id"] for e in part)
            c.send(msg)
            _answer_where_sent(c)
        return self._seq

    # -- waiting (only useful when comms are processed on a subshell) ----------------------------

    def wait_connected(self, timeout: float = 0.0) -> bool:
        """Wait up to ``timeout`` s for ``hello_ack``. Inside a cell this can only succeed when
        the frontend sends comm messages over a subshell; it never deadlocks."""
        with self._changed:
            return self._changed.wait_for(lambda: self._connected, timeout=timeout)

    def wait_for_frontend(self, grace: float = HANDSHAKE_GRACE) -> bool:
        """Whether a frontend acknowledged the bridge, waiting for its ``hello_ack`` until
        ``grace`` s after the comm was opened (no wait later than that, or once connected).

        In a Run All the first ``%%agent`` cell can end before a frontend that answers over a
        subshell has answered the ``hello`` of ``%load_ext``: it is on its way (a subshell is
        created, then the answer sent), and a short wait keeps that run from writing a journal.
        A frontend without a bridge never answers; the wait is then bounded by ``grace`` after
        the comm opened, so it is paid at most once, by a run that ends that early.
        """
        with self._lock:
            if self._connected or self._comm is None or self._closed_by_frontend or self.opened_at is None:
                return self._connected
            left = self.opened_at + grace - time.time()
        return self.wait_connected(max(0.0, left)) if left > 0 else self.connected

    def wait_acked(self, timeout: float = 0.0) -> bool:
        """Wait up to ``timeout`` s until every sent entry is acknowledged."""
        with self._changed:
            return self._changed.wait_for(lambda: not self.unacked(), timeout=timeout)

    # -- receiving ------------------------------------------------------------------------------

    def _handle_msg(self, c: Any, msg: Mapping[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        if not isinstance(data, Mapping):
            return
        kind = data.get("type")
        if threading.current_thread() is not threading.main_thread():
            self._off_main_thread = True
        if kind in REPLY_TYPES:
            self._on_reply(c, data)
        elif kind == "hello_ack":
            with self._lock:
                if c is not self._comm:
                    return  # an answer on a comm we already replaced
                self._hello_ack = dict(data)
                self._connected = True
                self._changed.notify_all()
            if self.on_hello_ack is not None:
                self.on_hello_ack(dict(data))
            # A new frontend: whatever was never acknowledged goes to it now.
            self.resend_unacked()
        elif kind == "path":
            path = data.get("path")
            with self._lock:
                if c is self._comm and self._hello_ack is not None and (path is None or isinstance(path, str)):
                    self._hello_ack["path"] = path  # renamed (or named on its first save)
        elif kind == "ack":
            with self._lock:
                seq = data.get("seq")
                flight = self._inflight.pop(seq, None) if isinstance(seq, int) else None
                session = data.get("session")
                if not isinstance(session, str):
                    session = flight[0] if flight else None
                ids = data.get("ids")
                if not isinstance(ids, list):
                    ids = flight[1] if flight else []
                if session is not None:
                    acked = self._acked.setdefault(session, set())
                    acked.update(i for i in ids if isinstance(i, str))
                self.acks.append(dict(data))
                self._changed.notify_all()
            if self.on_ack is not None:
                self.on_ack(dict(data))

    # -- requests the frontend answers (the notebook tool: docs/protocol.md) ---------------------

    def supports(self, feature: str) -> bool:
        """Whether the connected frontend announced ``feature`` (a message type it answers) in
        its ``hello_ack``; frontends from before these messages announce none."""
        ack = self.hello_ack
        features = ack.get("features") if ack else None
        return self.connected and isinstance(features, list) and feature in features

    @property
    def answers_during_cells(self) -> bool:
        """Whether the frontend's messages reach the kernel while a cell runs: it said in its
        ``hello_ack`` that its comms go over a kernel subshell (JupyterLab 4.6 with ipykernel 7),
        or one of its messages was handled off the main thread. Otherwise a reply waits for the
        end of the cell."""
        ack = self.hello_ack
        return self._off_main_thread or bool(ack and ack.get("subshells") is True)

    def request(self, kind: str, **fields: Any) -> int | None:
        """Send a request (``insert_cell``, ``read_cells``) on the comm; its ``seq``, or ``None``
        when no frontend is connected."""
        with self._lock:
            c = self._comm
            if c is None or self._closed_by_frontend or not self._connected:
                return None
            self._seq += 1
            seq = self._seq
            c.send({"type": kind, "seq": seq, **fields})
            _answer_where_sent(c)
            return seq

    def wait_reply(self, seq: int, timeout: float) -> dict[str, Any] | None:
        """The frontend's answer to request ``seq``, waiting up to ``timeout`` s (``None``: none
        arrived — always so within a cell unless :attr:`answers_during_cells`)."""
        with self._changed:
            self._changed.wait_for(lambda: seq in self._replies, timeout=timeout)
            return self._replies.pop(seq, None)

    def _on_reply(self, c: Any, data: Mapping[str, Any]) -> None:
        seq = data.get("seq")
        if not isinstance(seq, int):
            return
        with self._lock:
            self._replies[seq] = dict(data)
            if len(self._replies) > 100:  # answers nobody waited for
                self._replies.pop(min(self._replies))
            self._changed.notify_all()

    def _handle_close(self, c: Any, msg: Mapping[str, Any]) -> None:
        with self._lock:
            if c is not self._comm:
                return
            self._closed_by_frontend = True
            self._connected = False
            self._changed.notify_all()

    def _on_push(self, data: Mapping[str, Any]) -> None:
        """A frontend pushed its stored metadata into this (running) kernel."""
        sessions = data.get("sessions") if isinstance(data, Mapping) else None
        with self._lock:
            for name in self._sent:
                stored: set[str] = set()
                sess = sessions.get(name) if isinstance(sessions, Mapping) else None
                if isinstance(sess, Mapping) and isinstance(sess.get("entries"), list):
                    stored = {e["id"] for e in sess["entries"]
                              if isinstance(e, Mapping) and isinstance(e.get("id"), str)}
                acked = self._acked.get(name)
                if acked:
                    acked.intersection_update(stored)
        # new frontend(s): new comm, new hello; the unacked entries follow its hello_ack
        self.reopen()

    def __repr__(self) -> str:
        return (
            f"<KernelBridge target={self.target!r} connected={self.connected} seq={self.seq} "
            f"unacked={sum(len(v) for v in self.unacked().values())}>"
        )
