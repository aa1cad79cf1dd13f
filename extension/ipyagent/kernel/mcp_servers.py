"""The kernel's MCP servers: which are defined (``Agent.mcp_servers``, then project ``.mcp.json``
files), starting them at the first prompt that offers tools, the tools a prompt offers, and
stopping them all when the kernel shuts down or the extension unloads.

The first prompt after a server is defined (the one that starts it) waits for it, with a live line
that Ctrl-C stops, ``Agent.mcp_start_wait`` seconds at most (30 s, like Claude Code's
``MCP_TIMEOUT``); a server slower than that is named, and its tools join a later prompt, whose own
start does not wait for it again. A call to a tool of a server still starting (the model knows its
tools from earlier turns) waits for it as long, instead of failing as an unknown tool. A failed
server is named once per failure, in one line. The hub (``agent/mcp/hub.py``) and its thread exist
only once a server is defined.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ipyagent.agent.budget import system_tools_tokens
from ipyagent.agent.mcp.hub import McpHub, ServerStatus
from ipyagent.agent.mcp.mcp_tool import McpTool, offered_tools, recorded_tools
from ipyagent.agent.mcp.names import is_mcp_name
from ipyagent.agent.mcp.server_definitions import ServerConfig, parse_servers
from ipyagent.agent.tools.tool import Tool
from ipyagent.display.progress import ProgressLine
from ipyagent.session.messages import current_tools
from ipyagent.shapes import Entry, ToolDeclaration

__all__ = ["KernelMcp", "ServerRow"]

Note = Callable[[str], None]
# the user approves a project file's server (shown whole) before it starts; False: not now
ApproveStart = Callable[[ServerConfig], bool]


@dataclass(frozen=True)
class ServerRow:
    """One server for ``%agent mcp``."""

    config: ServerConfig
    state: str
    tools: tuple[McpTool, ...]
    tokens: int
    error: str = ""
    startup_seconds: float | None = None
    listed: int = 0  # tools the server lists (``tools`` are the enabled ones)


def tool_tokens(tools: Iterable[Tool]) -> int:
    """chars/4 of the tools' definitions, as the budget counts them."""
    return system_tools_tokens("", [t.spec() for t in tools])


STARTING = ("starting", "restarting")


def wait_with_progress(hub: Any, names: list[str], limit: float, *, step: float = 0.1,
                       label: str = "Starting MCP servers") -> list[str]:
    """Wait for the servers ``names`` (``limit`` seconds at most; the names still starting). When
    one is not ready at once, a progress line in the cell counts them as they come up, and stays
    as one static line. A KeyboardInterrupt (Ctrl-C) ends the wait and goes on up."""
    waiting: list[str] = hub.wait_ready(names, 0.0)
    if not waiting or limit <= 0:
        return waiting
    line = ProgressLine(label)
    started = time.monotonic()
    deadline = started + limit
    try:
        while waiting and time.monotonic() < deadline:
            waiting = hub.wait_ready(waiting, min(step, max(0.0, deadline - time.monotonic())))
            ready = len(names) - len(waiting)
            line.update(f"{ready} of {len(names)} ready, {time.monotonic() - started:.1f} s", ready, len(names))
    finally:
        line.close(f"MCP servers: {len(names) - len(waiting)} of {len(names)} ready after "
                   f"{time.monotonic() - started:.1f} s.")
    return waiting


class KernelMcp:
    def __init__(self, settings: Any, project_servers: Callable[[], tuple[list[ServerConfig], list[str]]]):
        self.settings = settings
        self._project_servers = project_servers
        self._hub: McpHub | None = None
        self.approved: set[str] = set()  # fingerprints of project servers approved in this kernel
        self.declined: set[str] = set()
        self._lines_shown: set[str] = set()
        self._waited: set[str] = set()  # fingerprints of the servers a prompt's start waited for

    @property
    def hub(self) -> McpHub:
        if self._hub is None:
            self._hub = McpHub()
        return self._hub

    def definitions(self) -> tuple[list[ServerConfig], list[str]]:
        """Every defined server (the user's config wins over project files; of project files the
        nearest wins), and one line per problem."""
        servers, problems = parse_servers(dict(self.settings.mcp_servers))
        names = {s.name for s in servers}
        if self.settings.mcp_project_files:
            found, more = self._project_servers()
            problems += more
            for server in found:
                if server.name not in names:
                    names.add(server.name)
                    servers.append(server)
        return servers, problems

    def secrets(self) -> tuple[str, ...]:
        """The values of the user's own servers' ``env`` and ``headers`` and their URLs' credentials
        (``Agent.mcp_servers``). A project file's values come with the repository, not from the
        user's secrets: its approval question shows them (``kernel/cell_run.py``)."""
        servers, _ = parse_servers(dict(self.settings.mcp_servers))
        return tuple(v for s in servers for v in s.secret_values())

    def _say(self, note: Note, line: str) -> None:
        if line not in self._lines_shown:
            self._lines_shown.add(line)
            note(line)

    def prompt_tools(self, note: Note, *, approve_start: ApproveStart | None, window: int | None,
                     taken: Iterable[str], wait: float | None = None) -> list[McpTool]:
        """Start what is defined and enabled (project servers once approved), wait a little
        (``wait``, default ``Agent.mcp_start_wait``), and the tools of the servers that are ready."""
        servers, problems = self.definitions()
        for line in problems:
            self._say(note, f"ipyagent: {line}")
        wanted = [s for s in servers if not s.disabled and self._may_start(s, note, approve_start)]
        if self._hub is None and not wanted:
            return []
        hub = self.hub
        hub.retain({s.name for s in wanted})
        for server in wanted:
            hub.start(server)
        # an explicit wait (%agent mcp start) waits for every server; a prompt, for the new ones
        first = [s.name for s in wanted if wait is not None or s.fingerprint() not in self._waited]
        try:
            wait_with_progress(hub, first, self.settings.mcp_start_wait if wait is None else wait)
        finally:  # waited for once (also when Ctrl-C ended the wait): later prompts go on without it
            self._waited.update(s.fingerprint() for s in wanted)
        for server in wanted:
            status = hub.status(server.name)
            if status is not None and status.state in STARTING:
                note(f"MCP server {server.name!r} is still starting; its tools join the prompts after it is "
                     "ready (a call to one of them waits for it).")
        ready: list[tuple[ServerConfig, Any]] = []
        for server in wanted:
            status = hub.status(server.name)
            if status is None:
                continue
            if status.state == "failed":
                self._say(note, status.error)
            elif status.state == "ready":
                ready.append((server, status.tools))
        tools = offered_tools(ready, hub, taken)
        self._warn_heavy(note, tools, window)
        return tools

    def late_tool(self, name: str, taken: Iterable[str]) -> McpTool | None:
        """The tool ``name`` of a server that was still starting when the prompt began, once the
        server is ready: the call waits for it (``Agent.mcp_start_wait`` at most, a live line that
        Ctrl-C stops). None when no such server is starting, or it did not get ready in time."""
        if self._hub is None or not is_mcp_name(name):
            return None
        starting = [s for s in self._hub.statuses() if s.state in STARTING]
        if not starting:
            return None
        names = [s.config.name for s in starting]
        wait_with_progress(self._hub, names, self.settings.mcp_start_wait,
                           label=f"Waiting for MCP server{'s' if len(names) > 1 else ''} "
                                 f"{', '.join(repr(n) for n in names)} to call {name}")
        ready = [(s.config, s.tools) for s in (self._hub.status(n) for n in names)
                 if s is not None and s.state == "ready"]
        return next((t for t in offered_tools(ready, self._hub, taken) if t.name == name), None)

    def _may_start(self, server: ServerConfig, note: Note, approve_start: ApproveStart | None) -> bool:
        if not server.from_project:
            return True
        key = server.fingerprint()
        if key in self.approved:
            return True
        if key in self.declined:
            return False
        approved = False
        if approve_start is not None:
            try:
                approved = approve_start(server)
            except Exception:  # noqa: BLE001 - nobody can answer (headless): not started
                approved = False
        if approved:
            self.approved.add(key)
            return True
        self.declined.add(key)
        self._say(note, f"MCP server {server.name!r} from {server.origin} was not started (not approved; a headless "
                        "run never starts a project file's servers). Name it in Agent.mcp_servers to use it.")
        return False

    def _warn_heavy(self, note: Note, tools: list[McpTool], window: int | None) -> None:
        if not window:
            return
        share = self.settings.mcp_warn_share
        for server in dict.fromkeys(t.server for t in tools):
            mine = [t for t in tools if t.server == server]
            tokens = tool_tokens(mine)
            if tokens > share * window:
                self._say(note, f"MCP server {server!r}: its {len(mine)} tool definitions take ~{tokens:,} tokens, "
                                f"{tokens / window:.0%} of the {window:,}-token window. Offer only some with "
                                f'"tools": [...] in its definition (%agent mcp lists them).')

    def rows(self) -> list[ServerRow]:
        """Each defined server, its state and its tools (for ``%agent mcp``)."""
        servers, _ = self.definitions()
        statuses = {s.config.name: s for s in (self._hub.statuses() if self._hub is not None else [])}
        rows = []
        taken: set[str] = set()
        for server in servers:
            status = statuses.get(server.name)
            if server.disabled:
                state = "disabled"
            elif status is None:
                state = ("not approved" if server.fingerprint() in self.declined
                         else "not started (starts with the next %%agent prompt)")
            else:
                state = status.state
            tools: list[McpTool] = []
            if status is not None and status.state == "ready" and self._hub is not None:
                tools = offered_tools([(server, status.tools)], self._hub, taken)
                taken.update(t.name for t in tools)
            rows.append(ServerRow(server, state, tuple(tools), tool_tokens(tools),
                                  status.error if status else "", status.startup_seconds if status else None,
                                  len(status.tools) if status else 0))
        return rows

    def ready_tools(self) -> list[McpTool]:
        """The tools the running servers offer now (nothing is started): what ``%agent status``
        counts in the budget besides the built-ins."""
        return [t for row in self.rows() for t in row.tools]

    def status(self, name: str) -> ServerStatus | None:
        return self._hub.status(name) if self._hub is not None else None

    def close(self) -> None:
        if self._hub is not None:
            self._hub.close()
            self._hub = None


def replayed_tools(entries: Iterable[Entry]) -> list[McpTool]:
    """The MCP tools a recorded session declared anywhere: a replay offers them, and answers their
    calls from the recording (never from a server)."""
    declared: dict[str, ToolDeclaration] = {}
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "system":
            for tool in current_tools([message]):
                declared.setdefault(str(tool.get("name")), tool)
    return recorded_tools(declared.values())
