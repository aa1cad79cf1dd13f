"""The MCP client: every configured server runs in one background thread with its own asyncio
loop, through the official SDK (``mcp`` 1.x, imported only when a server starts).

    hub = McpHub()
    hub.start(config)                      # returns at once; the server starts in the background
    hub.wait_ready(["time"], timeout=5)    # at most 5 s; what is still starting joins later
    hub.call("time", "get_current_time", {"timezone": "UTC"})   # -> ToolOutput
    hub.close()                            # every server stopped, no process left

A server's connection lives in one task from start to stop (the SDK's context managers must be
entered and left in the same task). A server that stops on its own — at start, or during a call —
is started again once; if it stops again it is ``failed`` and its failure is one line
(:attr:`ServerStatus.error`), which the calls to its tools return. A stdio server gets the SDK's
default environment (``PATH``, ``HOME``, … — not the kernel's keys) plus its ``env``; its process
is the hub's (``agent/mcp/stdio.py``): only the tail of its stderr is kept, and stopping it — or
closing the hub, which stops every server at once, started or still starting — ends it within
:data:`STOP_TIMEOUT` seconds whether it cooperates or not (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ipyagent.agent.mcp.results import tool_output
from ipyagent.agent.mcp.server_definitions import ServerConfig
from ipyagent.agent.mcp.stdio import EXIT_GRACE, TERM_GRACE, ProcessGroups, StderrTail
from ipyagent.agent.mcp.transports import ConnectContext, transport_for, transport_types
from ipyagent.agent.tools.tool import ToolOutput
from ipyagent.text import one_line

__all__ = ["MISSING_EXTRA", "ListedTool", "McpHub", "ServerStatus"]

MISSING_EXTRA = "the MCP client is not installed: pip install 'ipyagent[mcp]'"
START_TIMEOUT = 60.0  # a server not ready after this long is failed (a prompt never waits for it)
CALL_TIMEOUT = 120.0
# a stopped server's process: stdin closed, SIGTERM, SIGKILL (agent/mcp/stdio.py), and a margin; then
# whatever is left of its process group is killed from the calling thread
STOP_TIMEOUT = EXIT_GRACE + 2 * TERM_GRACE + 0.5


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    input_schema: dict[str, Any]  # as the server sent it (names.adapt_schema checks it)


@dataclass(frozen=True)
class ServerStatus:
    config: ServerConfig
    state: str  # "starting", "ready", "restarting", "failed", "stopped"
    tools: tuple[ListedTool, ...] = ()
    error: str = ""
    startup_seconds: float | None = None
    restarts: int = 0


class _ServerGone(Exception):
    pass


@dataclass(eq=False)
class _Server:
    config: ServerConfig
    state: str = "starting"
    tools: tuple[ListedTool, ...] = ()
    error: str = ""
    startup_seconds: float | None = None
    restarts: int = 0
    generation: int = 0
    session: Any = None
    ready: threading.Event = field(default_factory=threading.Event)
    stop: asyncio.Event | None = None
    gone: asyncio.Event | None = None
    task: concurrent.futures.Future[None] | None = None
    running: asyncio.Task[None] | None = None  # the task of its current generation, in the loop
    stderr: StderrTail = field(default_factory=StderrTail)
    groups: ProcessGroups = field(default_factory=ProcessGroups)

    def status(self) -> ServerStatus:
        return ServerStatus(self.config, self.state, self.tools, self.error, self.startup_seconds, self.restarts)

    def last_stderr_line(self) -> str:
        return self.stderr.last_line()


class McpHub:
    def __init__(self, *, start_timeout: float = START_TIMEOUT, call_timeout: float = CALL_TIMEOUT):
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self._servers: dict[str, _Server] = {}
        self._guard = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ---- the background loop -----------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="ipyagent-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)  # the kernel's shutdown: no server left behind
            return self._loop

    # ---- servers -----------------------------------------------------------------------------

    def start(self, config: ServerConfig) -> None:
        """Start ``config``'s server in the background unless it runs (or failed) as defined;
        a server of that name with another definition is stopped first."""
        with self._guard:
            known = self._servers.get(config.name)
            if known is not None and known.config.fingerprint() == config.fingerprint() \
                    and known.state != "stopped":
                return
            if known is not None:
                self.stop_server(config.name)
            server = self._servers[config.name] = _Server(config)
            self._launch(server)

    def _launch(self, server: _Server) -> None:
        server.ready.clear()
        server.task = asyncio.run_coroutine_threadsafe(self._serve(server), self._running_loop())

    def wait_ready(self, names: list[str], timeout: float) -> list[str]:
        """Wait until each named server is ready or failed, ``timeout`` seconds at most in all;
        the names still starting."""
        deadline = time.monotonic() + timeout
        waiting = []
        for name in names:
            server = self._servers.get(name)
            if server is None:
                continue
            if not server.ready.wait(max(0.0, deadline - time.monotonic())):
                waiting.append(name)
        return waiting

    def status(self, name: str) -> ServerStatus | None:
        server = self._servers.get(name)
        return server.status() if server is not None else None

    def statuses(self) -> list[ServerStatus]:
        return [s.status() for s in list(self._servers.values())]

    def stop_server(self, name: str) -> None:
        with self._guard:
            server = self._servers.pop(name, None)
        if server is not None:
            self._stop(server)

    def retain(self, names: set[str]) -> None:
        """Stop every server not named (removed or disabled in the configuration)."""
        for name in [n for n in self._servers if n not in names]:
            self.stop_server(name)

    def _stop(self, server: _Server) -> None:
        self._stop_all([server])

    def _stop_all(self, servers: list[_Server]) -> None:
        """Stop ``servers`` together: a ready one leaves its connection (its process ends, see
        agent/mcp/stdio.py), one still starting is cancelled (its process ends the same way);
        after :data:`STOP_TIMEOUT` seconds whatever is left of their processes is killed."""
        loop = self._loop
        tasks = []
        for server in servers:
            ready = server.state == "ready"
            server.state = "stopped"
            server.ready.set()
            task = server.task
            if loop is None or task is None:
                continue
            tasks.append(task)
            if ready and server.stop is not None:
                loop.call_soon_threadsafe(server.stop.set)
            else:  # cancelled in the loop, so that its future ends only once its process has
                loop.call_soon_threadsafe(self._cancel_start, server)
        if tasks:
            concurrent.futures.wait(tasks, STOP_TIMEOUT)
        for server in servers:
            server.groups.kill()  # what did not end in time (or a loop too busy to end it)
            if server.task is not None and not server.task.done():
                server.task.cancel()

    @staticmethod
    def _cancel_start(server: _Server) -> None:
        if server.running is not None and not server.running.done():
            server.running.cancel()

    def close(self) -> None:
        """Stop every server and the loop (the kernel shuts down, or the extension unloads)."""
        with self._guard:
            servers = list(self._servers.values())
            self._servers.clear()
        self._stop_all(servers)
        with self._guard:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(1.0)
            if not thread.is_alive():
                loop.close()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    # ---- one server's life, in the loop ------------------------------------------------------

    async def _serve(self, server: _Server) -> None:
        # one generation of the server's connection: a restart starts the next one, and what this
        # one does when it ends no longer concerns the server if it was superseded
        generation = server.generation
        server.running = asyncio.current_task()
        if server.state == "stopped":  # stopped before this generation began: nothing to start
            return
        stop, gone = server.stop, server.gone = asyncio.Event(), asyncio.Event()

        def current() -> bool:
            return server.generation == generation

        started = time.monotonic()
        try:
            async with contextlib.AsyncExitStack() as stack:
                session = await self._connect(stack, server)
                await asyncio.wait_for(session.initialize(), self.start_timeout)
                tools = await asyncio.wait_for(self._list_tools(session), self.start_timeout)
                if current() and server.state != "stopped":
                    server.tools, server.session = tools, session
                    server.startup_seconds = time.monotonic() - started
                    server.state, server.error = "ready", ""
                    server.ready.set()
                    await stop.wait()
        except ImportError:
            if current():
                server.state, server.error = "failed", f"MCP server {server.config.name!r}: {MISSING_EXTRA}"
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - any way a server can fail
            if current() and server.state != "stopped":
                server.session = None
                self._crashed(server, _why(exc, asyncio.TimeoutError, self.start_timeout))
        finally:
            gone.set()
            if current():
                server.session = None
                if server.state == "ready":  # it stopped on its own while it seemed fine
                    self._crashed(server, "the server closed the connection")
                if server.state != "restarting":  # else the relaunch sets it when the new start ends
                    server.ready.set()

    async def _connect(self, stack: contextlib.AsyncExitStack, server: _Server) -> Any:
        from mcp import ClientSession  # the optional extra: only when a server starts

        transport = transport_for(server.config.transport)
        if transport is None:
            raise RuntimeError(f"no MCP transport {server.config.transport!r} (known: {', '.join(transport_types())})")
        read, write = await transport.connect(stack, server.config,
                                              ConnectContext(self.call_timeout, server.stderr, server.groups))
        return await stack.enter_async_context(ClientSession(read, write))

    @staticmethod
    async def _list_tools(session: Any) -> tuple[ListedTool, ...]:
        tools: list[ListedTool] = []
        cursor = None
        while True:
            page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
            for tool in page.tools:
                tools.append(ListedTool(tool.name, tool.description or "", dict(tool.inputSchema or {})))
            cursor = getattr(page, "nextCursor", None)
            if not cursor:
                return tuple(tools)

    def _crashed(self, server: _Server, why: str) -> None:
        """Restart once; after that, the failure in one line."""
        stderr = server.last_stderr_line()
        detail = one_line(why, 160) + (f"; its last stderr line: {one_line(stderr, 160)}" if stderr else "")
        with self._guard:
            if self._servers.get(server.config.name) is not server or server.state in ("stopped", "failed"):
                return
            # this generation is over: its task ends (closing the process) and is superseded
            server.generation += 1
            loop, stop = self._loop, server.stop
            if loop is not None and stop is not None:
                loop.call_soon_threadsafe(stop.set)
            if server.restarts == 0:
                server.restarts, server.state, server.error = 1, "restarting", detail
                server.tools, server.session = (), None
                server.ready.clear()
                if loop is not None:
                    loop.call_soon_threadsafe(self._relaunch, server)
                return
            server.state = "failed"
            server.error = (f"MCP server {server.config.name!r} failed: {detail} (it was restarted once and "
                            "stopped again; fix it and change Agent.mcp_servers, or %agent mcp restart NAME)")
            server.tools, server.session = (), None
            server.ready.set()

    def _relaunch(self, server: _Server) -> None:
        if server.state == "restarting" and self._loop is not None:
            server.task = asyncio.run_coroutine_threadsafe(self._serve(server), self._loop)
        else:
            server.ready.set()  # stopped meanwhile: nobody waits for it

    def restart(self, name: str) -> bool:
        """Start a stopped or failed server again, with a fresh restart allowance."""
        server = self._servers.get(name)
        if server is None:
            return False
        config = server.config
        self.stop_server(name)
        self.start(config)
        return True

    # ---- calls -------------------------------------------------------------------------------

    def call(self, name: str, tool: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolOutput:
        """Call ``tool`` on server ``name``: its result, or an error the model reads."""
        server = self._servers.get(name)
        if server is None:
            return ToolOutput(f"MCP server {name!r} is not running (not configured, disabled or stopped).",
                              is_error=True)
        if server.state in ("starting", "restarting"):
            server.ready.wait(min(self.start_timeout, 10.0))
        if server.state == "failed":
            return ToolOutput(server.error, is_error=True)
        if server.session is None or self._loop is None:
            return ToolOutput(f"MCP server {name!r} is {server.state}; try again later.", is_error=True)
        timeout = self.call_timeout if timeout is None else timeout
        future = asyncio.run_coroutine_threadsafe(self._call(server, tool, arguments, timeout), self._loop)
        try:
            result = future.result(timeout + 5.0)
        except KeyboardInterrupt:
            future.cancel()
            raise
        except _ServerGone:
            self._crashed(server, "the server stopped during the call")
            state = "restarted once" if server.state == "restarting" else "not restarted again"
            message = server.error if server.state == "failed" else (
                f"MCP server {name!r} stopped during the `{tool}` call ({server.error}); it is being {state}. "
                "Call the tool again.")
            return ToolOutput(message, is_error=True)
        except (TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            return ToolOutput(f"MCP server {name!r} did not answer `{tool}` within {timeout:.0f} s.", is_error=True)
        except Exception as exc:  # noqa: BLE001 - the SDK's McpError and the rest: a tool error
            return ToolOutput(f"MCP server {name!r}, tool `{tool}`: {_why(exc)}", is_error=True)
        return tool_output(result, server=name, tool=tool)

    async def _call(self, server: _Server, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        session, gone = server.session, server.gone
        assert session is not None and gone is not None
        call = asyncio.ensure_future(session.call_tool(tool, arguments,
                                                       read_timeout_seconds=timedelta(seconds=timeout)))
        watch = asyncio.ensure_future(gone.wait())
        try:
            done, _ = await asyncio.wait({call, watch}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if call in done:
            error = call.exception()
            if error is not None and _connection_closed(error):
                raise _ServerGone()
            return call.result()
        call.cancel()
        if watch in done or gone.is_set():
            raise _ServerGone()
        raise TimeoutError()


def _connection_closed(exc: BaseException) -> bool:
    code = getattr(getattr(exc, "error", None), "code", None)
    return code == -32000 or type(exc).__name__ in ("ClosedResourceError", "BrokenResourceError", "EndOfStream")


def _why(exc: BaseException, timeout_type: type[BaseException] | None = None, timeout: float = 0.0) -> str:
    """One line for an exception (an exception group: its first leaf)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if timeout_type is not None and isinstance(exc, timeout_type):
        return f"not ready after {timeout:.0f} s"
    if isinstance(exc, asyncio.CancelledError):
        return "its start was cancelled"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) or str(exc) or type(exc).__name__
    return one_line(f"{type(exc).__name__}: {message}" if not str(exc) else message, 200)
