"""One busy/idle state for the whole kernel while a cell runs.

ipykernel 7 handles some messages on other threads while the main shell runs a cell: the page's
comm messages on a kernel subshell (JupyterLab 4.6 sends them there, and the bridge needs them
answered during a run), subshell requests on the control thread. For each it publishes a ``busy``
and then an ``idle`` status on IOPub. Jupyter server (``/api/kernels``, which idle cullers read)
and JupyterLab's status bar take the kernel's state from every status whose parent message type
they track, and ``comm_msg`` and ``create_subshell_request`` / ``delete_subshell_request`` are
tracked: so from the first ack of a ``%%agent`` run on, the kernel read "idle" while the agent
still worked.

:class:`IdleAfterTheRun` wraps the kernel's status publisher (``Kernel._publish_status``, a
private method: where it is absent nothing changes): while the main thread's request runs, an
``idle`` published from another thread is held back and published just before that request's
own ``idle``. Every message still gets its busy and its idle, in order; only the idle of a message
handled beside a running cell waits for the cell to end.
"""

from __future__ import annotations

import threading
from typing import Any

Status = tuple[str, str, Any]  # (execution state, channel, parent)


class IdleAfterTheRun:
    """The kernel's ``_publish_status``, holding other threads' ``idle`` while the main shell runs."""

    def __init__(self, kernel: Any, publish: Any):
        self.kernel = kernel
        self.publish = publish  # the kernel's own publisher (a bound method)
        self._lock = threading.Lock()
        self._running = False  # the main thread published busy and not yet idle
        self._held: list[Status] = []

    def __call__(self, status: str, channel: str, parent: Any = None) -> None:
        if parent is None:  # the parent of the calling thread's message (a context variable there)
            parent = self.kernel.get_parent(channel)
        with self._lock:  # held idles go out before the main request's idle, never after
            if threading.current_thread() is threading.main_thread():
                if status == "busy":
                    self._running = True
                elif status == "idle":
                    self._running = False
                    held, self._held = self._held, []
                    for args in held:
                        self.publish(*args)
            elif status == "idle" and self._running:
                self._held.append((status, channel, parent))
                return
            self.publish(status, channel, parent)


def keep_busy_while_running(kernel: Any) -> bool:
    """Install :class:`IdleAfterTheRun` on ``kernel`` (an ipykernel kernel; once). False where the
    kernel has no such publisher (another kernel, no kernel at all)."""
    publish = getattr(kernel, "_publish_status", None)
    if publish is None or not callable(getattr(kernel, "get_parent", None)):
        return False
    if not isinstance(publish, IdleAfterTheRun):
        kernel._publish_status = IdleAfterTheRun(kernel, publish)
    return True
