"""The kernel end of the ``ipyagent`` comm (``docs/protocol.md``).

The kernel never writes the notebook file. A :class:`KernelBridge` opens the comm ``ipyagent``
(``{"type": "hello", "protocol": 1}``); a frontend that holds the notebook open (the JupyterLab /
Notebook 7 labextension, or the headless runner) answers ``hello_ack``, stores every ``entries``
message in ``metadata["ipyagent"]`` and acknowledges it. Entries that were sent but never
acknowledged are sent again with the next message, so nothing is lost when a message goes
nowhere; storing is idempotent by entry id, so sending twice is harmless. What was sent and acked
is the bridge's :class:`~ipyagent.bridge.document_state.DocumentState`; this module is the
protocol: the messages in and out, the handshake, messages cut in parts under the server's limit.

Timing. While a cell runs, a kernel handles incoming shell messages only after the cell — unless
the frontend sends comm messages over a kernel subshell (JupyterLab 4.6 with ipykernel 7 does), in
which case they arrive on another thread while the cell runs. Both cases are handled: all state is
guarded by a lock, and nothing here ever *blocks* on a reply except :meth:`KernelBridge.wait_connected`
/ :meth:`KernelBridge.wait_acked`, which take a timeout and simply report ``False`` when the reply
cannot arrive during the cell.

The other direction: when a kernel starts (or a frontend connects to a running kernel) the frontend
runs one silent execute request calling :func:`receive_push` with the notebook's stored
``metadata["ipyagent"]`` (:func:`receive_push_part` for each part of a large one). The push waits
in the shell's :class:`~ipyagent.bridge.push.PushInbox` until the notebook layer takes it. If a
bridge is open on that inbox (a page reload, a second tab, a kernel switched to this notebook), the
push also re-opens the comm, so the new frontend gets a ``hello``, and every entry the kernel sent
that the pushed metadata lacks (e.g. the tab was closed without saving) is marked unacknowledged
and sent again.

This module is light: ``comm`` is imported only when a bridge is opened.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, cast

from ipyagent.bridge.document_state import DocumentState
from ipyagent.bridge.push import PushInbox, inbox_of, merge_metadata

__all__ = [
    "PROTOCOL",
    "TARGET",
    "KernelBridge",
    "active_bridge",
    "current_inbox",
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


# ----------------------------------------------------------------------------------------------
# frontend → kernel: the silent requests after a kernel start, into the running shell's inbox


def current_inbox() -> PushInbox | None:
    """The push inbox of the running IPython shell (``None`` outside IPython)."""
    try:
        from IPython.core.getipython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return inbox_of(shell) if shell is not None else None


def receive_push(json_text: str, source: str = "unknown") -> None:
    """What the frontend's silent request calls: :meth:`PushInbox.receive` of this kernel's shell."""
    inbox = current_inbox()
    if inbox is not None:
        inbox.receive(json_text, source)


def receive_push_part(text: str, *, push: str, index: int, count: int, source: str = "unknown") -> None:
    """One part of a push too large for one message (docs/protocol.md, "Rehydration"):
    :meth:`PushInbox.receive_part` of this kernel's shell."""
    inbox = current_inbox()
    if inbox is not None:
        inbox.receive_part(text, push=push, index=index, count=count, source=source)


class FromFrontend(TypedDict, total=False):
    """A message of the frontend over the comm (``ToKernel`` in ``frontend/src/protocol.ts``):
    ``hello_ack``, ``ack``, ``insert_cell_ack``, ``cells`` or ``path``. Sent by a page, so
    untrusted: readers check each value."""

    type: str
    seq: object
    protocol: int
    frontend: str
    path: str | None
    features: list[str]
    subshells: bool
    session: str
    stored: int
    ids: list[str]
    cell_id: str
    index: int
    placement: str
    cells: list[object]
    error: str


def pending_push() -> dict[str, Any] | None:
    """The push waiting in this kernel (merged if several arrived), taken."""
    inbox = current_inbox()
    return inbox.take() if inbox is not None else None


def peek_push() -> dict[str, Any] | None:
    """The push waiting in this kernel, left there."""
    inbox = current_inbox()
    return inbox.peek() if inbox is not None else None


def push_errors(clear: bool = False) -> list[str]:
    """Messages about malformed pushes into this kernel."""
    inbox = current_inbox()
    return inbox.errors(clear) if inbox is not None else []


def active_bridge() -> KernelBridge | None:
    """The bridge most recently opened in this kernel (``None`` if none is open)."""
    inbox = current_inbox()
    listener = inbox.listener if inbox is not None else None
    return listener if isinstance(listener, KernelBridge) else None


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


# ----------------------------------------------------------------------------------------------
# kernel → frontend: the comm


class KernelBridge:
    """The kernel end of the ``ipyagent`` comm.

    Typical use by the notebook layer::

        bridge = KernelBridge(inbox=inbox)
        bridge.open()                      # sends hello; hello_ack arrives later
        ...
        bridge.send_entries("default", new_entries, leaf=leaf_id, header=header,
                            settings=settings)
        if not bridge.connected:           # no frontend acked (yet): also write a journal output
            ...

    ``connected`` becomes true when a ``hello_ack`` arrived on the current comm, and false again
    when the frontend closes the comm. Acks are processed whenever the kernel reads its shell
    channel (after the cell, or at once if comms run on a subshell). ``inbox`` is where the
    frontends' pushes arrive (default: the running shell's); an open bridge re-opens its comm on a
    push, and opening one closes the bridge opened on that inbox before it.
    """

    def __init__(
        self,
        *,
        target: str = TARGET,
        on_ack: Callable[[FromFrontend], None] | None = None,
        on_hello_ack: Callable[[FromFrontend], None] | None = None,
        comm_factory: Callable[..., Any] | None = None,
        inbox: PushInbox | None = None,
    ) -> None:
        self.target = target
        self.on_ack = on_ack
        self.on_hello_ack = on_hello_ack
        self._comm_factory = comm_factory
        self.inbox = inbox if inbox is not None else (current_inbox() or PushInbox())
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._comm: Any = None
        # Plain attributes, set under the lock (one read needs none):
        self.connected = False  # a frontend acknowledged ``hello`` on the current comm, and has not closed it
        self.is_open = False  # a comm is open, and the frontend has not closed it
        self.seq = 0  # the ``seq`` of the last message sent (0 before the first)
        self.opened_at: float | None = None
        self._hello_ack: FromFrontend | None = None
        self.document = DocumentState()  # what was sent, and what the page acknowledged
        self.acks: list[FromFrontend] = []  # every ack received, newest last
        self._replies: dict[int, FromFrontend] = {}  # seq -> the frontend's answer to a request
        self._off_main_thread = False  # a message of this comm was handled off the main thread

    # -- state ----------------------------------------------------------------------------------

    @property
    def hello_ack(self) -> FromFrontend | None:
        """The frontend's ``hello_ack`` (``frontend``, ``path``, ``features``, ``subshells``), or ``None``."""
        with self._lock:
            return self._hello_ack.copy() if self._hello_ack is not None else None

    @property
    def frontend(self) -> str | None:
        ack = self.hello_ack
        return ack.get("frontend") if ack else None

    @property
    def path(self) -> str | None:
        ack = self.hello_ack
        return ack.get("path") if ack else None

    def unacked(self, session: str | None = None) -> dict[str, list[str]]:
        """Ids sent but not acknowledged, per session (only sessions that have some)."""
        return self.document.unacked(session)

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> KernelBridge:
        """Open the comm (sends ``hello``) and listen to the inbox's pushes, in place of the bridge
        opened on it before (closed)."""
        self.inbox.listen(self)
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
        self._close_comm()
        self.inbox.stop_listening(self)

    def _open_comm(self) -> None:
        from ipyagent.bridge.kernel_comm import answer_where_sent, make_comm

        with self._lock:
            self.connected = False
            self._hello_ack = None
            self.document.new_comm()
            c = make_comm(self.target, {"type": "hello", "protocol": PROTOCOL}, self._comm_factory)
            answer_where_sent(c)
            self._comm = c
            self.is_open = True
            self.opened_at = time.time()
        c.on_msg(lambda msg, _c=c: self._handle_msg(_c, msg))
        c.on_close(lambda msg, _c=c: self._handle_close(_c, msg))

    def _close_comm(self) -> None:
        with self._lock:
            c, self._comm = self._comm, None
            self.connected = self.is_open = False
            self._changed.notify_all()
        if c is not None:
            from ipyagent.bridge.kernel_comm import drop_quietly

            drop_quietly(c)

    def frontend_pushed(self, data: Mapping[str, Any]) -> None:
        """A frontend pushed its stored metadata into this (running) kernel: what it lacks is
        unacknowledged again, and a new comm says ``hello`` to it (the unacked entries follow its
        ``hello_ack``)."""
        with self._lock:
            self.document.keep_only_stored(data)
        self.reopen()

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
            self.document.record(session_name, entries, leaf=leaf, active=active, header=header,
                                 settings=settings)
            return self._send_session(session_name, header=header, settings=settings, resend=resend,
                                      skip_empty=skip_empty)

    def resend_unacked(self) -> list[int]:
        """Send one ``entries`` message per session that has unacknowledged entries."""
        seqs = []
        with self._lock:
            for name in list(self.document.unacked()):
                state = self.document.session(name)
                seq = self._send_session(name, header=state.header, settings=state.settings)
                if seq is not None:
                    seqs.append(seq)
        return seqs

    def _send_session(self, name: str, *, header: Mapping[str, Any] | None, settings: Mapping[str, Any] | None,
                      resend: bool = True, skip_empty: bool = False) -> int | None:
        # caller holds self._lock
        c = self._comm
        if not self.is_open:
            return None
        batch = self.document.to_send(name, resend=resend)
        if skip_empty and not batch:
            return None
        state = self.document.session(name)
        # No message comes near the websocket limit: many entries (a resend to a new frontend)
        # go in several messages; each is stored and acked on its own.
        for part in message_parts(batch, MAX_MESSAGE_BYTES):
            msg: dict[str, Any] = {"type": "entries", "seq": self.seq + 1, "session": name, "leaf": state.leaf,
                                   "active": state.active, "entries": part}
            if header is not None:
                msg["header"] = dict(header)
            if settings is not None:
                msg["settings"] = dict(settings)
            self.document.sending(self.seq + 1, name, part)
            self._send(c, msg)
        return self.seq

    # -- waiting (only useful when comms are processed on a subshell) ----------------------------

    def wait_connected(self, timeout: float = 0.0) -> bool:
        """Wait up to ``timeout`` s for ``hello_ack``. Inside a cell this can only succeed when
        the frontend sends comm messages over a subshell; it never deadlocks."""
        with self._changed:
            return self._changed.wait_for(lambda: self.connected, timeout=timeout)

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
            if self.connected or not self.is_open or self.opened_at is None:
                return self.connected
            left = self.opened_at + grace - time.time()
        return self.wait_connected(max(0.0, left)) if left > 0 else self.connected

    def wait_acked(self, timeout: float = 0.0) -> bool:
        """Wait up to ``timeout`` s until every sent entry is acknowledged."""
        with self._changed:
            return self._changed.wait_for(lambda: not self.unacked(), timeout=timeout)

    # -- receiving ------------------------------------------------------------------------------

    def _handle_msg(self, c: Any, msg: Mapping[str, Any]) -> None:
        sent = (msg.get("content") or {}).get("data") or {}
        if not isinstance(sent, Mapping):
            return
        data = cast(FromFrontend, sent)
        kind = data.get("type")
        if threading.current_thread() is not threading.main_thread():
            self._off_main_thread = True
        seq = data.get("seq")
        if kind in REPLY_TYPES and isinstance(seq, int):
            with self._lock:
                self._replies[seq] = cast(FromFrontend, dict(data))
                if len(self._replies) > 100:  # answers nobody waited for
                    self._replies.pop(min(self._replies))
                self._changed.notify_all()
        elif kind == "hello_ack":
            with self._lock:
                if c is not self._comm:
                    return  # an answer on a comm we already replaced
                self._hello_ack = cast(FromFrontend, dict(data))
                self.connected = True
                self._changed.notify_all()
            if self.on_hello_ack is not None:
                self.on_hello_ack(cast(FromFrontend, dict(data)))
            self.resend_unacked()  # a new frontend: whatever was never acknowledged goes to it now
        elif kind == "path":
            path = data.get("path")
            with self._lock:
                if c is self._comm and self._hello_ack is not None and (path is None or isinstance(path, str)):
                    self._hello_ack["path"] = path  # renamed (or named on its first save)
        elif kind == "ack":
            with self._lock:
                self.document.acknowledge(data)
                self.acks.append(cast(FromFrontend, dict(data)))
                self._changed.notify_all()
            if self.on_ack is not None:
                self.on_ack(cast(FromFrontend, dict(data)))

    def _handle_close(self, c: Any, msg: Mapping[str, Any]) -> None:
        with self._lock:
            if c is not self._comm:
                return
            self.connected = self.is_open = False
            self._changed.notify_all()

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
            if not (self.is_open and self.connected):
                return None
            self._send(self._comm, {"type": kind, "seq": self.seq + 1, **fields})
            return self.seq

    def _send(self, c: Any, msg: dict[str, Any]) -> None:
        # caller holds self._lock; ``msg`` carries the next seq
        from ipyagent.bridge.kernel_comm import answer_where_sent

        self.seq = msg["seq"]
        c.send(msg)
        answer_where_sent(c)

    def wait_reply(self, seq: int, timeout: float) -> FromFrontend | None:
        """The frontend's answer to request ``seq``, waiting up to ``timeout`` s (``None``: none
        arrived — always so within a cell unless :attr:`answers_during_cells`)."""
        with self._changed:
            self._changed.wait_for(lambda: seq in self._replies, timeout=timeout)
            return self._replies.pop(seq, None)

    def __repr__(self) -> str:
        return (
            f"<KernelBridge target={self.target!r} connected={self.connected} seq={self.seq} "
            f"unacked={sum(len(v) for v in self.unacked().values())}>"
        )
