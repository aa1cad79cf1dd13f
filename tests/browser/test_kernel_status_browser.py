"""The kernel says "busy" for the whole of a ``%%agent`` run (issue 37, item 3), in a real
JupyterLab 4.6 whose bridge sends its comm messages over a kernel subshell (ipykernel 7).

Each comm message the page sends while the cell runs (the acks of the run's entries) is handled on
that subshell, and ipykernel publishes a ``busy`` then an ``idle`` status for it on IOPub. Jupyter
server (``/api/kernels``) and JupyterLab's status bar take the state from every status message
whose parent is not of an untracked type, and ``comm_msg`` is tracked: before the fix the kernel
read "idle" from the first ack on while the agent still worked (culled by an idle culler, "Idle"
beside ``[*]``). The idles of the page's acks now wait for the run's end; the page waits on the
idle of other messages (the budget widget's comm subshell being created), so those go out at once
and a busy for the run follows.

The test listens to the kernel's IOPub itself (its connection file) and asks the server while the
model's reply is held open, after the page's first ack has been handled.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import BlockingKernelClient

from support.lab_pages import open_notebook, run_cell, write_notebook
from support.outputs import output_line

pytestmark = pytest.mark.usefixtures("fresh_kernels")

SUBSHELLS = "print('SUBSHELLS', len(get_ipython().kernel.shell_channel_thread.manager.list_subshell()))"


def _kernel_id(lab: Any, name: str) -> str:
    """The id of the kernel of notebook ``name`` (other tests' kernels may still run on this server)."""
    return next(s["kernel"]["id"] for s in lab.api("/api/sessions") if s["path"] == name)


def _connection_file(lab: Any, kernel_id: str) -> Path:
    return lab.runtime / f"kernel-{kernel_id}.json"


class IOPubWatch:
    """The kernel's IOPub as a second client sees it, read on a thread into a queue."""

    def __init__(self, connection_file: Path):
        self.client = BlockingKernelClient(connection_file=str(connection_file))
        self.client.load_connection_file()
        self.client.start_channels(stdin=False, hb=False, control=False)  # shell: to ask, iopub: to see
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        self._subscribed()

    def _subscribed(self) -> None:
        """Return once this client's IOPub subscription reached the kernel: a SUB socket misses what
        is published before (ZeroMQ's slow joiner), so ask for the kernel's info until the status of
        one such request is seen (as jupyter_client's wait_for_ready does)."""
        deadline = time.monotonic() + 120
        while True:
            asked = self.client.kernel_info()
            try:
                self.until(lambda m, asked=asked: (m.get("parent_header") or {}).get("msg_id") == asked, [],
                           timeout=1)
                return
            except queue.Empty:
                assert time.monotonic() < deadline, "the kernel's IOPub never reached this client"

    def _read(self) -> None:
        while not self.stop.is_set():
            try:
                self.messages.put(self.client.get_iopub_msg(timeout=0.2))
            except queue.Empty:
                continue

    def until(self, wanted: Any, seen: list[dict[str, Any]], timeout: float = 120) -> dict[str, Any]:
        """Read messages into ``seen`` until one for which ``wanted(msg)`` holds; return it."""
        while True:
            msg = self.messages.get(timeout=timeout)
            seen.append(msg)
            if wanted(msg):
                return msg

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.client.stop_channels()


def _status(msg: dict[str, Any]) -> str | None:
    return msg["content"].get("execution_state") if msg["header"]["msg_type"] == "status" else None


def _parent_type(msg: dict[str, Any]) -> str:
    return (msg.get("parent_header") or {}).get("msg_type", "")


def test_the_kernel_is_busy_while_an_agent_cell_runs(jupyterlab, context):
    lab = jupyterlab
    name = "busy.ipynb"
    write_notebook(lab.root / name, ["%load_ext ipyagent", "%%agent --no-tools\nTell me a short story.",
                                     SUBSHELLS])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    # the page creates the comm's subshell after the hello (until then its messages wait for the
    # main shell, as in frontends without subshells, where no status of theirs comes during a run)
    deadline = time.monotonic() + 120
    while int(output_line(run_cell(page, name, 2), "SUBSHELLS")) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    kernel_id = _kernel_id(lab, name)
    watch = IOPubWatch(_connection_file(lab, kernel_id))
    release = threading.Event()
    lab.fake.enqueue_text("Once upon a time a kernel said it was idle while it worked. It was not.", hold=release)
    seen: list[dict[str, Any]] = []
    calls = lab.fake.chat_calls
    polled: list[str] = []
    shown: list[str] = []
    try:
        page.evaluate("([p, i]) => { const w = window.__ipa.panel(p); window.jupyterapp.shell.activateById(w.id);"
                      " w.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }",
                      [name, 1])
        run = watch.until(lambda m: _status(m) == "busy" and _parent_type(m) == "execute_request", seen)
        run_id = run["parent_header"]["msg_id"]
        # the page acks the run's first entry (the prompt) over the comm's subshell: the kernel's
        # status for that message, then the stream the model holds open
        watch.until(lambda m: _status(m) == "busy" and _parent_type(m) == "comm_msg", seen)
        deadline = time.monotonic() + 120
        while lab.fake.chat_calls == calls and time.monotonic() < deadline:  # the reply begins, then waits
            time.sleep(0.05)
        for _ in range(5):  # the server and the page, asked while the reply is held
            polled.append(lab.api(f"/api/kernels/{kernel_id}")["execution_state"])
            shown.append(page.evaluate("(p) => window.__ipa.panel(p).sessionContext.session.kernel.status", name))
    finally:
        release.set()
    try:
        last = watch.until(lambda m: _status(m) == "idle" and m["parent_header"].get("msg_id") == run_id, seen)
    finally:
        watch.close()
    states = [(_status(m), _parent_type(m)) for m in seen if _status(m)]
    print(f"\n[browser] /api/kernels during the held reply: {polled}; JupyterLab's kernel status: {shown}")
    print(f"[browser] status messages on IOPub during the run: {states}")
    assert polled == ["busy"] * 5 and shown == ["busy"] * 5, (polled, shown, states)
    # on IOPub, the state stays busy until the run's last output: the idles of the page's acks
    # come after it, and any other idle before it (a subshell or a widget message the page waits
    # on) is followed at once by a busy for the run (the server and the page track both kinds)
    outputs = [i for i, m in enumerate(seen) if m["header"]["msg_type"] in ("display_data", "update_display_data",
                                                                              "stream", "execute_result")]
    statuses = [(i, m) for i, m in enumerate(seen) if _status(m)]
    left_idle = [(i, _parent_type(m)) for (i, m), (_, after) in zip(statuses, statuses[1:] + [(0, last)])
                 if _status(m) == "idle" and i < outputs[-1]
                 and (_status(after) != "busy" or after["parent_header"].get("msg_id") != run_id)]
    assert not left_idle, states
    assert any(_parent_type(m) == "comm_msg" for m in seen)  # the page's acks were handled during the run
    page.wait_for_function("(p) => window.__ipa.panel(p).sessionContext.session.kernel.status === 'idle'",
                           arg=name, timeout=60_000)
