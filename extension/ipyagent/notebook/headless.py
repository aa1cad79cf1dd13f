"""Headless execution: ``ipyagent run NOTEBOOK`` — nbclient in a real kernel, with this process
playing the frontend of ``docs/protocol.md``.

* Before any cell runs, the notebook's stored sessions (metadata ∪ journal outputs) are pushed
  into the kernel with one silent execute request, exactly as the labextension does.
* Each execute request carries the cell's nbformat id as ``metadata.cellId`` (nbclient sends
  none), so re-running an earlier ``%%agent`` cell forks the session like in JupyterLab.
* The ``ipyagent`` comm is answered: ``hello_ack``, every ``entries`` message is stored
  (idempotently, by entry id) and acknowledged.
* At the end the sessions — what the bridge delivered, plus any journal outputs — are written
  into the output notebook's ``metadata["ipyagent"]``. Visible cells are nbclient's doing only.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ipyagent.notebook import bridge as bridge_mod
from ipyagent.notebook.store import (
    METADATA_KEY,
    NotebookSessions,
    read_notebook,
    sessions_from_notebook,
    write_notebook,
    write_sessions_into_notebook,
)

__all__ = ["HeadlessFrontend", "RunOutcome", "push_code", "run_notebook", "execute_notebook"]


def push_code(metadata: dict[str, Any], source: str = "ipyagent-run") -> str:
    """The silent request that hands stored sessions to a new kernel (docs/protocol.md)."""
    text = json.dumps(metadata, ensure_ascii=True).replace("'", "\\u0027")
    return ("try:\n"
            "    import ipyagent.notebook.bridge as _ipyagent_b\n"
            f"    _ipyagent_b.receive_push(r'''{text}''', source={source!r})\n"
            "    del _ipyagent_b\n"
            "except ImportError:\n"
            "    pass\n")


class _FrontendComm:
    def __init__(self, frontend: "HeadlessFrontend", comm_id: str):
        self.frontend = frontend
        self.comm_id = comm_id

    def handle_msg(self, msg: dict[str, Any]) -> None:
        self.frontend.on_comm_msg(self.comm_id, msg)


@dataclass
class HeadlessFrontend:
    """The frontend side of the ``ipyagent`` comm, for a kernel client this process owns."""

    kc: Any = None
    metadata: dict[str, Any] = field(default_factory=lambda: {"version": 1, "sessions": {}})
    comms: list[str] = field(default_factory=list)
    received: int = 0  # entries messages
    stored: int = 0  # entries newly stored

    def on_comm_open(self, msg: dict[str, Any]) -> _FrontendComm | None:
        content = msg.get("content") or {}
        data = content.get("data") or {}
        comm_id = content.get("comm_id")
        if not comm_id or data.get("type") != "hello":
            return None
        self.comms.append(comm_id)
        self.send(comm_id, {"type": "hello_ack", "protocol": bridge_mod.PROTOCOL, "frontend": "ipyagent-run",
                            "path": None})
        return _FrontendComm(self, comm_id)

    def on_comm_msg(self, comm_id: str, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        if data.get("type") != "entries" or not isinstance(data.get("session"), str):
            return
        self.received += 1
        name = data["session"]
        entries = [e for e in data.get("entries") or [] if isinstance(e, dict) and isinstance(e.get("id"), str)]
        session = self.metadata["sessions"].get(name) or {"entries": []}
        have = {e.get("id") for e in session.get("entries", [])}
        new = [e for e in entries if e["id"] not in have]
        piece: dict[str, Any] = {"leaf": data.get("leaf"), "entries": new}
        for key in ("header", "settings"):
            if isinstance(data.get(key), dict):
                piece[key] = data[key]
        update: dict[str, Any] = {"sessions": {name: piece}}
        if data.get("active"):
            update["active"] = name
        self.metadata = bridge_mod.merge_metadata(self.metadata, update)
        self.stored += len(new)
        self.send(comm_id, {"type": "ack", "seq": data.get("seq"), "session": name, "stored": len(new),
                            "ids": [e["id"] for e in entries]})

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)


def _with_cell_ids(kc: Any, current: dict[str, Any]) -> None:
    """Make ``kc.execute`` send the running cell's id as ``metadata.cellId`` (like JupyterLab)."""
    plain_execute = kc.execute

    def execute(code: str, silent: bool = False, store_history: bool = True, user_expressions: Any = None,
                allow_stdin: bool | None = None, stop_on_error: bool = True) -> str:
        cell_id = current.get("id")
        if silent or not cell_id:
            return plain_execute(code, silent=silent, store_history=store_history,
                                 user_expressions=user_expressions, allow_stdin=allow_stdin,
                                 stop_on_error=stop_on_error)
        content = {"code": code, "silent": silent, "store_history": store_history,
                   "user_expressions": user_expressions or {},
                   "allow_stdin": kc.allow_stdin if allow_stdin is None else allow_stdin,
                   "stop_on_error": stop_on_error}
        msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
        kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    kc.execute = execute


@dataclass
class RunOutcome:
    nb: dict[str, Any]
    error: str | None = None
    sessions: NotebookSessions | None = None
    bridge_messages: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def execute_notebook(nb: dict[str, Any], *, timeout: int | None = 600, kernel_name: str | None = None,
                     cwd: str | None = None, push: bool = True, startup_timeout: int = 60,
                     km: Any = None) -> RunOutcome:
    """Run every cell of ``nb`` (a JSON dict) in a new kernel; return the executed notebook with
    its sessions written into ``metadata["ipyagent"]``. A cell error stops the run (``error``)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    node = nbformat.reads(json.dumps(nb), as_version=4)  # also joins multi-line sources
    stored, report = sessions_from_notebook(nb)
    frontend = HeadlessFrontend()
    current: dict[str, Any] = {}

    def on_notebook_start(notebook: Any) -> None:
        frontend.kc = client.kc
        _with_cell_ids(client.kc, current)
        if push:  # also when empty: the kernel then knows a frontend holds the notebook
            client.kc.execute(push_code(stored.to_dict()), silent=True, store_history=False)

    def on_cell_start(cell: Any, cell_index: int) -> None:
        current["id"] = cell.get("id")

    kwargs: dict[str, Any] = {"timeout": timeout, "startup_timeout": startup_timeout,
                              "on_notebook_start": on_notebook_start, "on_cell_start": on_cell_start,
                              "resources": {"metadata": {"path": cwd or "."}}}
    if kernel_name:
        kwargs["kernel_name"] = kernel_name
    client = NotebookClient(node, km=km, **kwargs)
    client.comm_open_handlers[bridge_mod.TARGET] = frontend.on_comm_open
    error = None
    try:
        client.execute()
    except CellExecutionError as exc:
        error = str(exc)
    except CellTimeoutError as exc:
        error = f"a cell timed out: {exc}"
    except DeadKernelError as exc:
        error = f"the kernel died: {exc}"
    out = json.loads(json.dumps(node))  # plain JSON again
    sessions = _final_sessions(out, stored, frontend)
    write_sessions_into_notebook(out, sessions)
    outcome = RunOutcome(out, error, sessions, frontend.received)
    outcome.problems = [str(p) for p in report.problems]
    return outcome


def _final_sessions(out: dict[str, Any], stored: NotebookSessions, frontend: HeadlessFrontend) -> NotebookSessions:
    """Input sessions ∪ what the bridge delivered ∪ journal outputs of the executed cells."""
    merged = NotebookSessions(stored.active, dict(stored.sessions), set_aside=list(stored.set_aside))
    delivered, _ = NotebookSessions.from_metadata(frontend.metadata, source="bridge")
    merged.merge(delivered)
    metadata = out.setdefault("metadata", {})
    saved = metadata.get(METADATA_KEY)
    metadata[METADATA_KEY] = merged.to_dict()
    lifted, _ = sessions_from_notebook(out)  # adds journal outputs (runs no frontend acknowledged)
    if saved is not None:
        metadata[METADATA_KEY] = saved
    if frontend.metadata.get("active") in lifted.sessions:
        lifted.active = frontend.metadata["active"]
    return lifted


@contextlib.contextmanager
def _kernel_environment(**values: str | None) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is not None:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_notebook(path: str | Path, output: str | Path | None = None, *, timeout: int | None = 600,
                 kernel_name: str | None = None, replay: str | None = None, replay_tools: bool = False) -> RunOutcome:
    """``ipyagent run``: execute ``path`` and write the result to ``output`` (default: in place).

    ``replay`` ("on", "auto", "off"; None: the kernel's default) and ``replay_tools`` reach the
    kernel through ``IPYAGENT_REPLAY`` / ``IPYAGENT_REPLAY_TOOLS`` (the kernel inherits them).
    """
    path = Path(path)
    nb = read_notebook(path)
    with _kernel_environment(IPYAGENT_REPLAY=replay, IPYAGENT_REPLAY_TOOLS="1" if replay_tools else None):
        outcome = execute_notebook(nb, timeout=timeout, kernel_name=kernel_name, cwd=str(path.parent.resolve()))
    write_notebook(Path(output) if output else path, outcome.nb)
    return outcome
