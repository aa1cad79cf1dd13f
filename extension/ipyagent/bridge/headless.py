"""Headless execution: ``ipyagent run NOTEBOOK`` — nbclient in a real kernel, with this process
playing the frontend of ``docs/protocol.md``.

* Before any cell runs, the notebook's stored sessions (metadata ∪ journal outputs) are pushed
  into the kernel with one silent execute request, exactly as the labextension does.
* Each execute request carries the cell's nbformat id as ``metadata.cellId`` (nbclient sends
  none), so re-running an earlier ``%%agent`` cell forks the session like in JupyterLab.
* The ``ipyagent`` comm is answered: ``hello_ack``, every ``entries`` message is stored
  (idempotently, by entry id) and acknowledged; an ``insert_cell`` request (the ``notebook``
  tool, ``Agent.code_cells``) is acknowledged with the new cell's id, and the cell is added to
  the output notebook after the running cell (after the cells inserted before it) — not executed.
* Every message of a cell is read, up to its ``idle`` status, however far this process lags
  behind the kernel (nbclient alone stops 4 s after the reply and drops the rest: outputs,
  entries, inserted cells).
* At the end the sessions — what the bridge delivered, plus any journal outputs — are written
  into the output notebook's ``metadata["ipyagent"]``. Visible cells are nbclient's doing only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from ipyagent.bridge import comm as bridge_mod
from ipyagent.bridge.parameters import inject_parameters
from ipyagent.shapes import Ipynb, IpynbCell, KernelMessage
from ipyagent.store.chunks import LAYOUT_KEYED
from ipyagent.store.ipynb import read_notebook, sessions_from_notebook, write_notebook, write_sessions_into_notebook
from ipyagent.store.schema import METADATA_KEY, NotebookSessions

__all__ = ["CellInsertion", "HeadlessFrontend", "HeadlessRun", "RunOutcome", "execute_notebook", "place_inserted_cells",
           "push_code", "run_notebook", "static_views", "with_cell_ids"]

# (code cell n, of total, seconds it ran, its source): told as each code cell ends
CellProgress = Callable[[int, int, float, str], None]

_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def push_code(metadata: dict[str, Any], source: str = "ipyagent-run") -> str:
    """The silent request that hands stored sessions to a new kernel (docs/protocol.md)."""
    text = json.dumps(metadata, ensure_ascii=True).replace("'", "\\u0027")
    return ("try:\n"
            "    import ipyagent.bridge.comm as _ipyagent_b\n"
            f"    _ipyagent_b.receive_push(r'''{text}''', source={source!r})\n"
            "    del _ipyagent_b\n"
            "except ImportError:\n"
            "    pass\n")


class _FrontendComm:
    def __init__(self, frontend: HeadlessFrontend, comm_id: str):
        self.frontend = frontend
        self.comm_id = comm_id

    def handle_msg(self, msg: KernelMessage) -> None:
        self.frontend.on_comm_msg(self.comm_id, msg)


@dataclass(frozen=True)
class CellInsertion:
    """A cell the agent's ``notebook`` tool inserted (``insert_cell``): where it goes in the output
    notebook is after the cell ``after`` names, else after ``anchor`` (the running cell), else at the end."""

    cell: IpynbCell
    after: object = None  # a cell id (a string) when the request named one; anything else is ignored
    anchor: object = None


@dataclass
class HeadlessFrontend:
    """The frontend side of the ``ipyagent`` comm, for a kernel client this process owns."""

    kc: Any = None
    metadata: dict[str, Any] = field(default_factory=lambda: {"version": 1, "sessions": {}})
    comms: list[str] = field(default_factory=list)
    received: int = 0  # entries messages
    entries_received: int = 0  # entries in them, repeats included
    stored: int = 0  # entries newly stored
    inserted: list[CellInsertion] = field(default_factory=list)  # in the order asked
    name: str = "ipyagent-run"  # the frontend hello_ack names (the kernel never compacts in idle time under it)
    path: str | None = None  # the notebook's path its hello_ack gives (a page's, relative to the server's root)

    def on_comm_open(self, msg: KernelMessage) -> _FrontendComm | None:
        content = msg.get("content") or {}
        data = content.get("data") or {}
        comm_id = content.get("comm_id")
        if not comm_id or data.get("type") != "hello":
            return None
        self.comms.append(comm_id)
        self.send(comm_id, {"type": "hello_ack", "protocol": bridge_mod.PROTOCOL, "frontend": self.name,
                            "path": self.path, "features": ["insert_cell"]})
        return _FrontendComm(self, comm_id)

    def on_comm_msg(self, comm_id: str, msg: KernelMessage) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        if data.get("type") == "insert_cell":
            self.on_insert_cell(comm_id, data)
            return
        if data.get("type") != "entries" or not isinstance(data.get("session"), str):
            return
        self.received += 1
        name = data["session"]
        entries = [e for e in data.get("entries") or [] if isinstance(e, dict) and isinstance(e.get("id"), str)]
        self.entries_received += len(entries)
        session = self.metadata["sessions"].get(name) or {"entries": []}
        have = {e.get("id") for e in session.get("entries", [])}
        new = [e for e in entries if e["id"] not in have]
        piece: dict[str, object] = {"leaf": data.get("leaf"), "entries": new}
        for key in ("header", "settings"):
            if isinstance(data.get(key), dict):
                piece[key] = data[key]
        update: dict[str, object] = {"sessions": {name: piece}}
        if data.get("active"):
            update["active"] = name
        self.metadata = bridge_mod.merge_metadata(self.metadata, update)
        self.stored += len(new)
        self.send(comm_id, {"type": "ack", "seq": data.get("seq"), "session": name, "stored": len(new),
                            "ids": [e["id"] for e in entries]})

    def on_insert_cell(self, comm_id: str, data: Mapping[str, object]) -> None:
        """Keep the requested cell for the output notebook; acknowledge with its id."""
        cell_type, source = data.get("cell_type"), data.get("source")
        if cell_type not in ("code", "markdown") or not isinstance(source, str):
            self.send(comm_id, {"type": "insert_cell_ack", "seq": data.get("seq"),
                                "error": "insert_cell needs cell_type 'code' or 'markdown' and a string source"})
            return
        cell_id = data.get("cell_id")
        taken = {c.cell["id"] for c in self.inserted}
        if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id) or cell_id in taken:
            cell_id = uuid.uuid4().hex[:16]
        cell: IpynbCell = {"cell_type": cell_type, "id": cell_id, "metadata": {}, "source": source}
        if cell_type == "code":
            cell.update({"execution_count": None, "outputs": []})
        self.inserted.append(CellInsertion(cell, data.get("after"), data.get("anchor")))
        self.send(comm_id, {"type": "insert_cell_ack", "seq": data.get("seq"), "cell_id": cell_id})

    def send(self, comm_id: str, data: Mapping[str, object]) -> None:
        # kc.shell_channel.send is the ordered path (OrderedShell) once the runner installed it
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)


class OrderedShell:
    """The one path every message to the kernel's shell socket takes, in order.

    jupyter_client's ``Session.send`` writes through a *synchronous shadow* of the asyncio socket.
    That skips pyzmq's re-check for pending reads after a send: the socket's file descriptor is
    edge-triggered, so when a reply arrives while the send runs, the edge is consumed and a reader
    already awaiting (nbclient waiting for ``execute_reply``) never wakes up until its timeout —
    the ~60 s stalls after cells that sent bridge messages. Sending with the asyncio socket's own
    ``send_multipart`` re-schedules waiting readers; using it for *every* shell message (nbclient's
    execute requests, our acks) keeps them in one queue, so an ack still reaches the kernel before
    the next cell's request.
    """

    def __init__(self, kc: Any):
        self.kc = kc
        self.failures: list[str] = []

    def install(self) -> None:
        self.kc.shell_channel.send = self.send

    def send(self, msg: KernelMessage) -> None:
        session, socket = self.kc.session, self.kc.shell_channel.socket
        frames = session.serialize(msg)
        frames.extend(msg.get("buffers") or [])
        sent = socket.send_multipart(frames)
        if hasattr(sent, "add_done_callback"):  # an asyncio socket returns a future
            sent.add_done_callback(self._check)

    def _check(self, future: Any) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.failures.append(f"a message to the kernel was not sent: {future.exception()}")


class ReplyLost(RuntimeError):
    """The kernel went idle after a request, and its reply never arrived."""


@dataclass
class ReplyWatchdog:
    """Never wait out a whole cell timeout for a reply that was missed.

    ipykernel sends ``execute_reply`` *before* it publishes ``status: idle``. So once the kernel
    has been idle for the pending request for ``grace`` seconds, the reply is overdue: the
    shell channel is polled once more, and if nothing is there the run fails with a clear error.
    ``recovered`` counts replies that only that extra poll found (0 in a healthy run).
    """

    grace: float = 3.0
    tick: float = 0.5
    pending: str | None = None
    idle_at: dict[str, float] = field(default_factory=dict)
    recovered: int = 0

    def saw_idle(self, msg_id: str) -> None:
        self.idle_at.setdefault(msg_id, time.monotonic())

    def overdue(self) -> bool:
        since = self.idle_at.get(self.pending or "")
        return since is not None and time.monotonic() - since >= self.grace

    def install(self, kc: Any) -> None:
        plain_get_msg = kc.shell_channel.get_msg

        async def get_msg(timeout: float | None = None) -> KernelMessage:
            waiting = asyncio.ensure_future(plain_get_msg(timeout=timeout))
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=self.tick)
                if done:
                    reply: KernelMessage = waiting.result()  # or Empty at nbclient's own timeout
                    return reply
                if not self.overdue():
                    continue
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError, Empty):
                    await waiting
                try:
                    msg: KernelMessage = await plain_get_msg(timeout=0)
                except Empty:
                    raise ReplyLost(
                        f"the kernel finished a cell (idle for {self.grace:g} s) but its execute_reply never "
                        "arrived; stopped instead of waiting out the cell timeout") from None
                self.recovered += 1
                return msg

        kc.shell_channel.get_msg = get_msg


def _with_cell_ids(kc: Any, current: dict[str, Any], watchdog: ReplyWatchdog) -> None:
    """Make ``kc.execute`` send the running cell's id as ``metadata.cellId`` (like JupyterLab), and
    tell the watchdog which request's reply is awaited."""
    plain_execute = kc.execute

    def execute(code: str, silent: bool = False, store_history: bool = True, user_expressions: Any = None,
                allow_stdin: bool | None = None, stop_on_error: bool = True) -> str:
        cell_id = current.get("id")
        if silent or not cell_id:
            msg_id: str = plain_execute(code, silent=silent, store_history=store_history,
                                        user_expressions=user_expressions, allow_stdin=allow_stdin,
                                        stop_on_error=stop_on_error)
            return msg_id
        content = {"code": code, "silent": silent, "store_history": store_history,
                   "user_expressions": user_expressions or {},
                   "allow_stdin": kc.allow_stdin if allow_stdin is None else allow_stdin,
                   "stop_on_error": stop_on_error}
        msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
        kc.shell_channel.send(msg)
        sent: str = msg["header"]["msg_id"]
        watchdog.pending = sent
        return sent

    kc.execute = execute


def place_inserted_cells(cells: list[IpynbCell], inserted: list[CellInsertion]) -> None:
    """Put each inserted cell after the cell it names (``after``, else ``anchor``, else at the
    end), in order; a cell whose id is taken gets a new one."""
    for item in inserted:
        cell = item.cell.copy()
        ids = [c.get("id") for c in cells]
        if cell["id"] in ids:
            cell["id"] = uuid.uuid4().hex[:16]
        for target in (item.after, item.anchor):
            if isinstance(target, str) and target in ids:
                cells.insert(ids.index(target) + 1, cell)
                break
        else:
            cells.append(cell)


@dataclass
class RunOutcome:
    nb: Ipynb
    error: str | None = None
    sessions: NotebookSessions | None = None
    problems: list[str] = field(default_factory=list)
    replies_recovered: int = 0  # execute replies only the watchdog's extra poll found (0 when healthy)
    cell_error: str | None = None  # a failing cell's full report (nbclient's), when a cell raised
    interrupted: BaseException | None = None  # Ctrl-C / SystemExit, re-raised once the output is written

    @property
    def ok(self) -> bool:
        return self.error is None


def _kernel_manager_class(ipc_dir: str | None) -> Any:
    """nbclient's kernel manager; over IPC in ``ipc_dir`` where the platform has Unix sockets (no
    TCP ports, and no "running over TCP without encryption" warning from the kernel)."""
    from jupyter_client.manager import AsyncKernelManager

    if ipc_dir is None:
        return AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = os.path.join(str(ipc_dir), "k")  # short: Unix socket paths are limited to ~100 chars

    return IpcKernelManager


def _describe_failure(exc: BaseException) -> str:
    """One clear line for whatever stopped the run."""
    from nbclient.exceptions import (
        CellExecutionError,
        CellTimeoutError,
        DeadKernelError,
    )

    if isinstance(exc, CellExecutionError):
        name = getattr(exc, "ename", "") or "error"
        value = getattr(exc, "evalue", "")
        return f"a cell raised {name}: {value}".rstrip(": ")
    if isinstance(exc, CellTimeoutError):
        return "a cell timed out: " + (str(exc).strip().splitlines() or ["no reply"])[0]
    if isinstance(exc, DeadKernelError):
        return f"the kernel died: {exc}"
    if isinstance(exc, ReplyLost):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"the run stopped: {type(exc).__name__}" + (f": {first}" if first else "")


IOPUB_WAIT_WITHOUT_TIMEOUT = 3600  # s; nbclient needs a number (a dead kernel still ends the wait)


def iopub_wait(timeout: int | None) -> int:
    """How long to keep reading a cell's IOPub messages after its ``execute_reply`` (until its
    ``idle`` status arrives). nbclient's default, 4 s, then drops the rest of the cell's messages
    — outputs, and the bridge's ``entries`` and ``insert_cell`` requests (a lost inserted cell:
    the next *Run All* misses the code it held). On a loaded machine this process can be that far
    behind the kernel, so it waits as long as the cell itself may run."""
    return int(timeout) if timeout and timeout > 0 else IOPUB_WAIT_WITHOUT_TIMEOUT


class HeadlessRun:
    """This process as the frontend of one notebook's run: the bridge answered
    (:class:`HeadlessFrontend`), every shell message sent in order (:class:`OrderedShell`), the
    watchdog on replies, the running cell's id on each execute request, the stored sessions pushed
    first, and each code cell's end told to ``progress``. :meth:`client_class` makes an nbclient
    client class (``NotebookClient``, papermill's) run this way; :meth:`finish` writes the
    sessions and the static views into the executed notebook."""

    def __init__(self, stored: NotebookSessions, *, push: bool = True, progress: CellProgress | None = None):
        self.stored = stored
        self.push = push
        self.progress = progress
        self.frontend = HeadlessFrontend()
        self.watchdog = ReplyWatchdog()
        self.current: dict[str, Any] = {}
        self.code_cells: list[int] = []

    def hooks(self) -> dict[str, Any]:
        """nbclient's hooks this run needs (``NotebookClient`` keywords)."""
        return {"on_notebook_start": self.on_notebook_start, "on_cell_start": self.on_cell_start,
                "on_cell_executed": self.on_cell_executed}

    def attach(self, client: Any) -> None:
        client.comm_open_handlers[bridge_mod.TARGET] = self.frontend.on_comm_open
        client.headless = self
        self.client = client
        self.code_cells = [i for i, c in enumerate(client.nb.cells) if c.get("cell_type") == "code"]

    def on_notebook_start(self, notebook: Any) -> None:
        kc = self.client.kc
        assert kc is not None  # nbclient starts the client before this hook
        self.frontend.kc = kc
        OrderedShell(kc).install()
        self.watchdog.install(kc)
        _with_cell_ids(kc, self.current, self.watchdog)
        if self.push:  # also when empty: the kernel then knows a frontend holds the notebook
            kc.execute(push_code(self.stored.to_dict()), silent=True, store_history=False)

    def on_cell_start(self, cell: Any, cell_index: int) -> None:
        self.current.update(id=cell.get("id"), index=cell_index, started=time.monotonic())

    def on_cell_executed(self, cell: Any, cell_index: int, execute_reply: Any = None) -> None:
        if self.progress is not None and cell_index in self.code_cells:
            seconds = time.monotonic() - self.current.get("started", time.monotonic())
            self.progress(self.code_cells.index(cell_index) + 1, len(self.code_cells), seconds,
                          str(cell.get("source") or ""))

    def client_class(self, base: type) -> type:
        """``base`` (an nbclient ``NotebookClient`` class) answering this run: idle statuses told
        to the watchdog, and what a kernel sent before it died read to the end."""
        return _headless_client(base)

    def finish(self, out: Ipynb) -> NotebookSessions:
        """Into the executed notebook ``out`` (plain JSON): the inserted cells, the sessions
        (:func:`_final_sessions`), and outputs a reader can open anywhere (:func:`static_views`)."""
        place_inserted_cells(out.setdefault("cells", []), self.frontend.inserted)
        sessions = _final_sessions(out, self.stored, self.frontend)
        write_sessions_into_notebook(out, sessions)
        static_views(out)
        return sessions


def _headless_client(base: type) -> type:
    from nbclient.exceptions import CellExecutionComplete, DeadKernelError
    from nbclient.util import ensure_async

    class HeadlessClient(base):  # type: ignore[misc]  # a class made at run time, from nbclient's
        headless: HeadlessRun

        def process_message(self, msg: KernelMessage, cell: Any, cell_index: int) -> Any:
            content = msg.get("content") or {}
            if msg.get("msg_type") == "status" and content.get("execution_state") == "idle":
                self.headless.watchdog.saw_idle((msg.get("parent_header") or {}).get("msg_id", ""))
            return super().process_message(msg, cell, cell_index)

        async def async_execute_cell(self, cell: Any, cell_index: int, execution_count: int | None = None,
                                     store_history: bool = True) -> Any:
            try:
                return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            except DeadKernelError:
                await self._read_what_the_dead_kernel_sent(cell, cell_index)
                raise

        async def _read_what_the_dead_kernel_sent(self, cell: Any, cell_index: int) -> None:
            """nbclient stops reading a cell's messages when it sees the kernel dead; what the
            kernel sent before it died (the entries of the steps it finished, its last outputs)
            may still wait in the socket: read it all."""
            kc = self.kc
            if kc is None:
                return
            while True:
                try:
                    msg = await ensure_async(kc.iopub_channel.get_msg(timeout=0))
                except Exception:  # noqa: BLE001 - Empty (nothing more), or the channel is gone
                    return
                if (msg.get("parent_header") or {}).get("msg_id") != self.headless.watchdog.pending:
                    continue
                with contextlib.suppress(CellExecutionComplete):
                    self.process_message(msg, cell, cell_index)

    return HeadlessClient


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "widgets"  # metadata["widgets"]: nbclient's saved widget state


def static_views(nb: Ipynb) -> int:
    """Outputs a reader can open anywhere: each widget view dropped where its output carries
    another view (ipyagent's widgets carry static HTML, Markdown and text), and no widget state
    stored (a live widget's model dies with the kernel; without it a viewer — nbconvert's HTML,
    JupyterLab, GitHub — draws the view blank or "model not found" instead of the static one).
    Returns how many views were dropped."""
    dropped = 0
    for cell in nb.get("cells") or []:
        for output in (cell.get("outputs") or []) if isinstance(cell, dict) else []:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
                dropped += 1
    metadata = nb.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop(WIDGET_STATE, None)
    return dropped


def with_cell_ids(nb: Ipynb) -> Ipynb:
    """``nb`` (nbformat 4) with an id on every cell, as nbformat 4.5 has them: the prompts a run
    records then carry their cells' ids (and replay finds them by id)."""
    taken = {c.get("id") for c in nb.get("cells") or [] if isinstance(c, dict)}
    for cell in nb.get("cells") or []:
        if isinstance(cell, dict) and not (isinstance(cell.get("id"), str) and _CELL_ID.match(cell["id"])):
            cell["id"] = next(i for i in iter(lambda: uuid.uuid4().hex[:8], "") if i not in taken)
            taken.add(cell["id"])
    if nb.get("nbformat") == 4 and int(nb.get("nbformat_minor") or 0) < 5:
        nb["nbformat_minor"] = 5
    return nb


def execute_notebook(nb: Ipynb, *, timeout: int | None = 600, kernel_name: str | None = None,
                     cwd: str | None = None, push: bool = True, startup_timeout: int = 60,
                     km: Any = None, progress: CellProgress | None = None) -> RunOutcome:
    """Run every cell of ``nb`` (a JSON dict) in a new kernel; return the executed notebook with
    its sessions written into ``metadata["ipyagent"]`` and its widget views replaced by their
    static views (:func:`static_views`).

    Whatever stops the run — a cell error, a timeout, a dead kernel, a lost reply, Ctrl-C — the
    outcome still holds every session the bridge delivered; ``error`` says what happened in one
    line and ``cell_error`` keeps a failing cell's full report. KeyboardInterrupt is re-raised
    by :func:`run_notebook` after the output is written. ``progress(n, total, seconds, source)``
    hears of each code cell as it ends (its number among the code cells, their count, how long
    it ran, its source).
    """
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(with_cell_ids(copy.deepcopy(nb))), as_version=4)  # also joins sources
    stored, report = sessions_from_notebook(nb)
    run = HeadlessRun(stored, push=push, progress=progress)
    kwargs: dict[str, Any] = {"timeout": timeout, "startup_timeout": startup_timeout, **run.hooks(),
                              "resources": {"metadata": {"path": cwd or "."}}, "iopub_timeout": iopub_wait(timeout)}
    if kernel_name:
        kwargs["kernel_name"] = kernel_name
    ipc_dir = None if km is not None or sys.platform == "win32" else tempfile.mkdtemp(prefix="ipyagent-")
    kwargs["kernel_manager_class"] = _kernel_manager_class(ipc_dir)
    client = run.client_class(NotebookClient)(node, km=km, **kwargs)
    run.attach(client)
    try:
        stopped = _execute(client, run)
    finally:
        if ipc_dir is not None:
            shutil.rmtree(ipc_dir, ignore_errors=True)
    out = json.loads(json.dumps(node))  # plain JSON again
    sessions = run.finish(out)
    return RunOutcome(out, stopped.error, sessions, [str(p) for p in report.problems],
                      replies_recovered=run.watchdog.recovered, cell_error=stopped.cell_error,
                      interrupted=stopped.interrupted)


@dataclass
class _Stopped:
    error: str | None = None
    cell_error: str | None = None
    interrupted: BaseException | None = None


def _execute(client: Any, run: HeadlessRun) -> _Stopped:
    """``client.execute()``, and what stopped it (every failure, Ctrl-C included, is caught: the
    output notebook is written whatever happened)."""
    from nbclient.exceptions import CellExecutionError

    stopped = _Stopped()
    try:
        client.execute()
    except BaseException as exc:  # noqa: BLE001 - every failure, Ctrl-C included, still writes the output notebook
        stopped.error = _describe_failure(exc)
        if "index" in run.current and not isinstance(exc, CellExecutionError):
            stopped.error = f"cell {run.current['index'] + 1}: {stopped.error}"
        if isinstance(exc, CellExecutionError):
            stopped.cell_error = str(exc)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            stopped.interrupted = exc
    return stopped


def _final_sessions(out: Ipynb, stored: NotebookSessions, frontend: HeadlessFrontend) -> NotebookSessions:
    """Input sessions ∪ what the bridge delivered ∪ journal outputs of the executed cells.

    The bridge's messages are merged into the input's metadata as JSON first, the way the
    labextension stores them, and only then checked: an entry the bridge delivered is checked
    together with the stored entries it hangs from (checked alone, a child of a stored entry would
    look like an orphan and be cut loose as a root). The bridge's last leaf for a session wins,
    also when it only moved along stored entries.
    """
    merged = bridge_mod.merge_metadata(stored.to_dict(), frontend.metadata)
    metadata = out.setdefault("metadata", {})
    saved = metadata.get(METADATA_KEY)
    metadata[METADATA_KEY] = merged
    lifted, _ = sessions_from_notebook(out)  # adds journal outputs (runs no frontend acknowledged)
    if saved is not None:
        metadata[METADATA_KEY] = saved
    if frontend.metadata.get("active") in lifted.sessions:
        lifted.active = frontend.metadata["active"]
    return lifted


@contextlib.contextmanager
def kernel_environment(**values: str | None) -> Iterator[None]:
    """Set (a string) or unset (``None``) these environment variables until the block ends, then
    put back what was there: what a kernel started in the block inherits."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_notebook(path: str | Path, output: str | Path | None = None, *, timeout: int | None = 600,
                 kernel_name: str | None = None, replay: str | None = None, replay_tools: bool = False,
                 progress: CellProgress | None = None, parameters: Mapping[str, Any] | None = None) -> RunOutcome:
    """``ipyagent run``: execute ``path`` and write the result to ``output`` (default: in place),
    its sessions in the current layout (``store/chunks.py``'s layout 4; ``outcome.nb`` keeps the
    layout the notebook held).

    ``replay`` ("on", "auto", "off"; None: the kernel's default) and ``replay_tools`` reach the
    kernel through ``IPYAGENT_REPLAY`` / ``IPYAGENT_REPLAY_TOOLS`` (the kernel inherits them).
    ``parameters`` go into the notebook as papermill puts them (``bridge/parameters.py``).
    The output is written whatever stopped the run; an interrupt is re-raised after that.
    """
    path = Path(path)
    nb = inject_parameters(read_notebook(path), parameters or {})
    chosen = {"IPYAGENT_REPLAY": replay, "IPYAGENT_REPLAY_TOOLS": "1" if replay_tools else None}
    with kernel_environment(**{name: value for name, value in chosen.items() if value is not None}):
        outcome = execute_notebook(nb, timeout=timeout, kernel_name=kernel_name, cwd=str(path.parent.resolve()),
                                   progress=progress)
    # on disk in the layout the labextension writes: a page that opens the output has nothing to
    # move (a layout-1 output was moved at once and read modified before the user changed anything)
    on_disk = write_sessions_into_notebook(copy.deepcopy(outcome.nb), outcome.sessions, LAYOUT_KEYED) \
        if outcome.sessions is not None else outcome.nb
    write_notebook(Path(output) if output else path, on_disk)
    if outcome.interrupted is not None:
        raise outcome.interrupted
    return outcome
