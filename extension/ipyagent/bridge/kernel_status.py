"""One busy/idle state for the whole kernel while a cell runs.

ipykernel 7 handles some messages on other threads while the main shell runs a cell: the page's
comm messages on a kernel subshell (JupyterLab 4.6 sends them there, and the bridge needs them
answered during a run), subshell requests on the control thread. For each it publishes a ``busy``
and then an ``idle`` status on IOPub. Jupyter server (``/api/kernels``, which idle cullers read)
and JupyterLab's status bar take the kernel's state from every status whose parent message type
they track, and ``comm_msg`` and ``create_subshell_request`` are tracked: so from the first ack of
a ``%%agent`` run on, the kernel read "idle" while the agent still worked.

:class:`IdleAfterTheRun` wraps the kernel's status publisher (``Kernel._publish_status``, a
private method: where it is absent nothing changes). While the main thread's request runs, an
``idle`` published from another thread goes one of two ways:

- the idle of a message to ipyagent's own comm (the page's acks and answers, which nobody on the
  page waits on) is held back and published just before the running request's own ``idle``;
- any other idle (a subshell being created, a widget's message: JupyterLab waits for their idle
  before it goes on, ipywidgets before it sends the next change) is published at once, and
  followed by a ``busy`` for the running request, so the state the server and the page keep is
  "busy" again a message later.

Every message still gets its busy and its idle, in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Status = tuple[str, str, Any]  # (execution state, channel, parent)
Holds = Callable[[Any], bool]  # whether the idle of this parent message may wait for the run


class IdleAfterTheRun:
    """The kernel's ``_publish_status``, keeping the kernel busy while the main shell runs."""

    def __init__(self, kernel: Any, publish: Callable[..., None], holds: Holds):
        self.kernel = kernel
        self.publish = publish  # the kernel's own publisher (a bound method)
        self.holds = holds
        self._lock = threading.Lock()
        self._running: Any = None  # the parent of the main thread's running request, if any
        self._held: list[Status] = []

    def __call__(self, status: str, channel: str, parent: Any = None) -> None:
        if parent is None:  # the parent of the calling thread's message (a context variable there)
            parent = self.kernel.get_parent(channel)
        with self._lock:  # held idles go out before the main request's idle, never after
            if threading.current_thread() is threading.main_thread():
                self._on_main(status, channel, parent)
                return
            running = self._running
            if status != "idle" or running is None:
                self.publish(status, channel, parent)
            elif self.holds(parent):
                self._held.append((status, channel, parent))
            else:
                self.publish(status, channel, parent)
                self.publish("busy", "shell", running)

    def _on_main(self, status: str, channel: str, parent: Any) -> None:
        if status == "busy":
            self._running = parent
        elif status == "idle":
            self._running = None
            held, self._held = self._held, []
            for args in held:
                self.publish(*args)
        self.publish(status, channel, parent)


def message_to_comm(target: str, comms: Callable[[], dict[str, Any]]) -> Holds:
    """Whether a parent message is a ``comm_msg`` to an open comm of ``target`` (``comms``: the
    kernel's open comms by id)."""

    def holds(parent: Any) -> bool:
        if not isinstance(parent, dict) or (parent.get("header") or {}).get("msg_type") != "comm_msg":
            return False
        comm_id = (parent.get("content") or {}).get("comm_id")
        comm = comms().get(comm_id) if isinstance(comm_id, str) else None
        return getattr(comm, "target_name", None) == target

    return holds


def keep_busy_while_running(kernel: Any, target: str) -> bool:
    """Install :class:`IdleAfterTheRun` on ``kernel`` (an ipykernel kernel; once), holding the idles
    of messages to ``target``'s comms. False where the kernel has no such publisher (another
    kernel, no kernel at all)."""
    publish = getattr(kernel, "_publish_status", None)
    if publish is None or not callable(getattr(kernel, "get_parent", None)):
        return False
    if isinstance(publish, IdleAfterTheRun):
        return True
    manager = getattr(kernel, "comm_manager", None)

    def comms() -> dict[str, Any]:
        found = getattr(manager, "comms", None)
        return found if isinstance(found, dict) else {}

    kernel._publish_status = IdleAfterTheRun(kernel, publish, message_to_comm(target, comms))
    return True
