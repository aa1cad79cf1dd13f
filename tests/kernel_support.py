"""Helpers for tests that run ipyagent in a REAL kernel against the fake provider server.

* :func:`fake_provider` starts a :class:`FakeProviderServer` and points the environment (which
  kernels started afterwards inherit) at it, with a recognisable fake API key.
* :func:`notebook` builds a notebook from cell sources (nbformat 4.5, stable cell ids).
* :class:`LiveKernel` is a jupyter_client kernel plus a frontend that behaves like the
  labextension: it answers the ``ipyagent`` comm, stores entries in its own copy of the
  notebook metadata, keeps every cell's outputs (applying ``update_display_data`` by display id,
  across cells, and writing an answered ``input()`` prompt as a ``stdin`` stream, as JupyterLab
  does), pushes the stored sessions after a restart, and can
  interrupt a running cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ipyagent.bridge.headless import HeadlessFrontend, kernel_environment, push_code
from ipyagent.store.ipynb import new_notebook
from ipyagent.testing import FakeProviderServer

FAKE_KEY = "sk-ipyagent-test-RECOGNISABLE-KEY-4242"
SETUP = "%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n"



# the soak test's notebook (tests/bridge/test_headless_reliability.py, tests/benchmarks/headless.py)
SMALL_WINDOW = ("%config Agent.context_window = 6000\n%config Agent.reserve_tokens = 1000\n"
                "%config Agent.keep_recent_tokens = 1500\n")


def twelve_cells() -> list[str]:
    """A setup cell, ten ``%%agent`` cells and a ``%compact``: every one sends bridge messages."""
    cells = [SETUP + SMALL_WINDOW]
    for i in range(10):
        cells.append(f"%%agent\nStep {i}: tell me about the number {i}. " + "context " * 150)
        if i == 6:
            cells.append("%compact keep the numbers")
    return cells


def chatty(body: dict) -> str:
    """The soak test's provider policy: every reply long enough to fill the small window."""
    return "A reply about numbers, long enough to fill the window. " * 25

@contextlib.contextmanager
def fake_provider(**server_kwargs: Any) -> Iterator[FakeProviderServer]:
    with FakeProviderServer(**server_kwargs) as server, \
            kernel_environment(OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY=FAKE_KEY,
                               JPY_SESSION_NAME=None, IPYAGENT_MODEL=None):
        yield server


def code_cell(source: str, cell_id: str) -> dict[str, Any]:
    return {"cell_type": "code", "id": cell_id, "metadata": {}, "execution_count": None, "source": source,
            "outputs": []}


def notebook(*sources: str, prefix: str = "cell") -> dict[str, Any]:
    return new_notebook([code_cell(src, f"{prefix}-{i}") for i, src in enumerate(sources)])


def user_messages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("type") == "message" and e["message"].get("role") == "user"]


def path_of(session: dict[str, Any]) -> list[dict[str, Any]]:
    by_id = {e["id"]: e for e in session["entries"]}
    out, cur = [], by_id.get(session.get("leaf"))
    while cur is not None:
        out.append(cur)
        cur = by_id.get(cur.get("parentId"))
    return out[::-1]


def ipc_kernel_manager() -> tuple[Any, str]:
    """A jupyter_client ``KernelManager`` (python3) whose kernel talks over IPC, and the temporary
    folder of its sockets (the caller removes it after the kernel's shutdown). As ipyagent run's
    kernels: a TCP kernel binds ports its manager found free a moment before, and beside two other
    workers' kernels and servers one was sometimes taken by then ("Address already in use", the
    kernel dead before its first reply)."""
    from jupyter_client.manager import KernelManager

    folder = tempfile.mkdtemp(prefix="ipyagent-k-")  # short: Unix socket paths are limited to ~100 characters
    return KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(folder, "k")), folder


@dataclass
class CellRun:
    cell_id: str | None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""
    error: dict[str, Any] | None = None


class LiveKernel:
    """A kernel and a labextension-like frontend, driven from the test."""

    def __init__(self, cwd: str | None = None, env: dict[str, str] | None = None, *,
                 frontend: str = "ipyagent-run", path: str | None = None):
        self.km, self._ipc_dir = ipc_kernel_manager()
        kwargs: dict[str, Any] = {}
        if cwd:
            kwargs["cwd"] = cwd
        if env is not None:
            kwargs["env"] = {**os.environ, **env}
        self.km.start_kernel(**kwargs)
        # the frontend's name in its hello_ack: "ipyagent-run" (the default) is the headless runner,
        # where the kernel never compacts in its idle time; another name is a notebook page
        self.frontend = HeadlessFrontend(name=frontend, path=path)  # path: the page's, in its hello_ack
        self.answers: list[str] = []  # replies to input() (approval questions), in order
        self.prompts: list[str] = []  # the input() prompts seen
        self._questions = 0  # approval questions seen on IOPub
        self.cells: list[CellRun] = []
        self._display: dict[str, list[tuple[int, int]]] = {}  # display_id -> [(cell, output)]
        self._by_msg: dict[str, int] = {}
        self._connect()

    def _connect(self) -> None:
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.frontend.kc = self.kc
        self.frontend.comms.clear()
        self._comms: dict[str, Any] = {}

    # ---- messages ---------------------------------------------------------------------------

    def _handle(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == "ipyagent":
            comm = self.frontend.on_comm_open(msg)
            if comm is not None:
                self._comms[content["comm_id"]] = comm
            return
        if kind == "comm_msg" and content.get("comm_id") in self._comms:
            self._comms[content["comm_id"]].handle_msg(msg)
            return
        shown = (content.get("data") or {}).get("text/plain", content.get("text", ""))
        if isinstance(shown, str) and shown.startswith("ipyagent: approve this"):
            self._questions += 1
        parent = msg["parent_header"].get("msg_id")
        index = self._by_msg.get(parent)
        display_id = (content.get("transient") or {}).get("display_id")
        if kind == "update_display_data":
            for cell_index, output_index in self._display.get(display_id, []):
                out = self.cells[cell_index].outputs[output_index]
                out["data"], out["metadata"] = content["data"], content.get("metadata", {})
            return
        if index is None:
            return
        cell = self.cells[index]
        if kind == "stream":
            cell.outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
        elif kind in ("display_data", "execute_result"):
            cell.outputs.append({"output_type": kind, "data": content["data"],
                                 "metadata": content.get("metadata", {})})
            if display_id:
                self._display.setdefault(display_id, []).append((index, len(cell.outputs) - 1))
        elif kind == "error":
            cell.error = content
            cell.outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"]})
        elif kind == "clear_output":
            cell.outputs.clear()

    def drain(self, seconds: float = 0.3) -> None:
        end = time.time() + seconds
        while time.time() < end:
            try:
                self._handle(self.kc.get_iopub_msg(timeout=0.05))
            except queue.Empty:
                pass

    def drain_until(self, condition: Any, what: str, timeout: float = 120) -> None:
        """Process IOPub until ``condition()`` holds (the timeout is a safety net, not a measure)."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"never happened: {what}"
            with contextlib.suppress(queue.Empty):
                self._handle(self.kc.get_iopub_msg(timeout=0.1))

    def send_execute(self, code: str, cell_id: str | None = None, *, silent: bool = False) -> str:
        content = {"code": code, "silent": silent, "store_history": not silent, "user_expressions": {},
                   "allow_stdin": bool(self.answers), "stop_on_error": True}
        msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
        if not silent:
            self._by_msg[msg["header"]["msg_id"]] = len(self.cells)
            self.cells.append(CellRun(cell_id))
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def wait(self, msg_id: str, timeout: float = 180, until: Any = None) -> CellRun | None:
        """Process iopub until ``msg_id`` is idle (or ``until()`` is true); return its cell."""
        deadline = time.time() + timeout
        idle = False
        while time.time() < deadline:
            if until is not None and until():
                return self.cells[self._by_msg[msg_id]] if msg_id in self._by_msg else None
            self._answer_input()
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            self._handle(msg)
            if (msg["msg_type"] == "status" and msg["parent_header"].get("msg_id") == msg_id
                    and msg["content"]["execution_state"] == "idle"):
                idle = True
                break
        if not idle and until is None:
            raise TimeoutError(f"no idle for {msg_id} within {timeout} s")
        reply = self._reply(msg_id, timeout=60)
        index = self._by_msg.get(msg_id)
        if index is None:
            return None
        self.cells[index].status = reply["content"]["status"] if reply else "?"
        return self.cells[index]

    def _answer_input(self) -> None:
        try:
            request = self.kc.get_stdin_msg(timeout=0.01)
        except queue.Empty:
            return
        if request["msg_type"] == "input_request":
            # a person answers once the question is on screen: its output comes on IOPub, the
            # request on the stdin channel, in no fixed order
            deadline = time.time() + 120
            while self._questions <= len(self.prompts) and time.time() < deadline:
                with contextlib.suppress(queue.Empty):
                    self._handle(self.kc.get_iopub_msg(timeout=0.1))
            prompt = request["content"]["prompt"]
            self.prompts.append(prompt)
            answer = self.answers.pop(0) if self.answers else ""
            # as JupyterLab and Notebook 7 do: the prompt and the answer become a `stdin` stream
            # output at the end of the cell's outputs, saved with the notebook
            index = self._by_msg.get(request["parent_header"].get("msg_id"))
            if index is not None:
                self.cells[index].outputs.append({"output_type": "stream", "name": "stdin",
                                                  "text": f"{prompt} {answer}\n"})
            self.kc.input(answer)

    def _reply(self, msg_id: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=0.2)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply
        return None

    def run(self, code: str, cell_id: str | None = None, timeout: float = 180) -> CellRun:
        cell = self.wait(self.send_execute(code, cell_id), timeout)
        assert cell is not None
        self.drain(0.2)  # acks and late comm traffic
        return cell

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the kernel."""
        cell = self.run(f"import json as _j; print(_j.dumps({expression}))")
        assert cell.status == "ok", cell.outputs
        text = "".join(o["text"] for o in cell.outputs if o.get("output_type") == "stream")
        return json.loads(text.strip().splitlines()[-1])

    # ---- the frontend's jobs ----------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        return self.frontend.metadata

    def push(self) -> None:
        msg_id = self.send_execute(push_code(self.frontend.metadata, source="test-frontend"), silent=True)
        self._reply(msg_id, timeout=120)

    def restart(self) -> None:
        self.kc.stop_channels()
        self.km.restart_kernel(now=True)
        self._connect()
        if self.frontend.metadata.get("sessions"):
            self.push()

    def interrupt_when(self, predicate: Any, msg_id: str, timeout: float = 180) -> CellRun:
        """Interrupt the kernel as soon as ``predicate()`` holds while ``msg_id`` runs."""
        self.wait(msg_id, timeout, until=predicate)
        self.km.interrupt_kernel()
        cell = self.wait(msg_id, timeout)
        assert cell is not None
        self.drain(0.2)
        return cell

    def count_iopub(self) -> list[tuple[str, int]]:
        """From now on, (message type, bytes of its JSON content) of every IOPub message read: what
        the page is sent."""
        seen: list[tuple[str, int]] = []
        read = self.kc.get_iopub_msg

        def counted(*args: Any, **kwargs: Any) -> Any:
            msg = read(*args, **kwargs)
            seen.append((msg["msg_type"], len(json.dumps(msg["content"]))))
            return msg

        self.kc.get_iopub_msg = counted
        return seen

    def snapshot(self) -> str:
        return json.dumps([{"cell": c.cell_id, "outputs": c.outputs} for c in self.cells], sort_keys=True)

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.kc.stop_channels()
        with contextlib.suppress(Exception):
            self.km.shutdown_kernel(now=True)
        shutil.rmtree(self._ipc_dir, ignore_errors=True)

    def __enter__(self) -> LiveKernel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
