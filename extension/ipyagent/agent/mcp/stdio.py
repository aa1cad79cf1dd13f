"""A stdio MCP server as a process the hub owns: started in its own session (so ``os.killpg``
reaches its children too), its messages as the SDK's ``ClientSession`` reads and writes them, only
the last :data:`STDERR_TAIL` bytes of its stderr kept, and an end that does not depend on it
behaving.

The end, as the MCP specification orders it: stdin is closed; a process still running after
:data:`EXIT_GRACE` seconds gets SIGTERM, and after :data:`TERM_GRACE` more, SIGKILL. While the
process runs its group is in a :class:`ProcessGroups`, so that a hub closing from another thread
(the kernel shutting down, with the loop busy or stuck) can SIGKILL what is left without waiting
for the loop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["EXIT_GRACE", "STDERR_TAIL", "TERM_GRACE", "ProcessGroups", "StderrTail", "stdio_streams"]

EXIT_GRACE = 1.0  # seconds after stdin closes before SIGTERM
TERM_GRACE = 1.0  # seconds after SIGTERM before SIGKILL
STDERR_TAIL = 64 * 1024  # bytes of a server's stderr kept (its last line is what a failure quotes)
_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)


class StderrTail:
    """The last ``limit`` bytes of what a server wrote on stderr (across its restarts)."""

    def __init__(self, limit: int = STDERR_TAIL):
        self.limit = limit
        self.total = 0  # bytes written in all
        self._data = bytearray()
        self._tail_lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._tail_lock:
            self.total += len(chunk)
            self._data += chunk[-self.limit:]
            if len(self._data) > 2 * self.limit:  # trimmed now and then, not at every chunk
                del self._data[:-self.limit]

    def kept(self) -> bytes:
        with self._tail_lock:
            return bytes(self._data[-self.limit:])

    def last_line(self) -> str:
        lines = [line.strip() for line in self.kept().decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(pid, sig)  # started with start_new_session: its group id is its pid
        else:  # pragma: no cover - Windows has no process groups to signal
            os.kill(pid, sig)


class ProcessGroups:
    """The process groups of one server that have not ended yet; safe to use from any thread."""

    def __init__(self) -> None:
        self._pids: set[int] = set()
        self._pids_lock = threading.Lock()

    def add(self, pid: int) -> None:
        with self._pids_lock:
            self._pids.add(pid)

    def discard(self, pid: int) -> None:
        with self._pids_lock:
            self._pids.discard(pid)

    def pids(self) -> list[int]:
        with self._pids_lock:
            return sorted(self._pids)

    def kill(self) -> None:
        """SIGKILL every group still here (the last resort of a close)."""
        for pid in self.pids():
            _signal_group(pid, _KILL)


async def _end(process: Any) -> None:
    """Close stdin, then SIGTERM, then SIGKILL, each after its grace; then what is left of the group."""
    import anyio

    if process.returncode is None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
        with anyio.move_on_after(EXIT_GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(TERM_GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(process.pid, _KILL)
        with anyio.move_on_after(TERM_GRACE):
            await process.wait()
    _signal_group(process.pid, _KILL)  # children it left in its group


async def _read_messages(stdout: Any, sink: Any) -> None:
    import mcp.types as types
    from anyio.streams.text import TextReceiveStream
    from mcp.shared.message import SessionMessage

    async with sink:
        pending = ""
        with contextlib.suppress(Exception):  # the process went away: the stream just ends
            async for chunk in TextReceiveStream(stdout, encoding="utf-8", errors="replace"):
                *lines, pending = (pending + chunk).split("\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message: Any = SessionMessage(types.JSONRPCMessage.model_validate_json(line))
                    except Exception as exc:  # noqa: BLE001 - the session reports a line it cannot parse
                        message = exc
                    await sink.send(message)


async def _write_messages(stdin: Any, source: Any) -> None:
    async with source:
        with contextlib.suppress(Exception):  # the process went away: nothing more to write
            async for item in source:
                line = item.message.model_dump_json(by_alias=True, exclude_none=True) + "\n"
                await stdin.send(line.encode("utf-8"))


async def _read_stderr(stderr: Any, tail: StderrTail) -> None:
    with contextlib.suppress(Exception):
        async for chunk in stderr:
            tail.feed(chunk)


@contextlib.asynccontextmanager
async def stdio_streams(command: str, args: list[str], env: dict[str, str], cwd: str | None,
                        tail: StderrTail, groups: ProcessGroups) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server; yield the (read, write) streams a ``ClientSession`` takes; end it."""
    import anyio
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process([command, *args], env=env, cwd=cwd, start_new_session=True)
    groups.add(process.pid)
    read_sink, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_source = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_read_messages, process.stdout, read_sink)
            group.start_soon(_write_messages, process.stdin, write_source)
            group.start_soon(_read_stderr, process.stderr, tail)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):  # a cancelled start ends its process too
                    await _end(process)
                group.cancel_scope.cancel()
    finally:
        groups.discard(process.pid)
        for stream in (read_stream, write_stream, read_sink, write_source):
            with contextlib.suppress(Exception):
                await stream.aclose()
