"""MCP server definitions in the common ``mcpServers`` shape (Claude Code's ``.mcp.json``, VS Code,
notebook-intelligence):

    {"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
     "tracker": {"url": "http://localhost:8000/mcp", "headers": {"Authorization": "Bearer …"}},
     "old": {"command": "…", "disabled": true},
     "git": {"command": "mcp-server-git", "tools": ["git_log", "git_status"]}}

``type`` names the transport (``transports.py``'s table: ``stdio``, ``http``, a plugin's);
without it a ``command`` is stdio and a ``url`` Streamable HTTP. ``tools`` (or ``enabledTools``)
lists the only tools offered; absent: all of them. ``env`` and ``headers`` values are secrets:
they reach the server and nothing else (never a repr, a display, the notebook or an export);
:meth:`ServerConfig.shown` names their keys only.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ipyagent.agent.mcp.transports import transport_for, transport_types
from ipyagent.providers.transport.http import url_credentials

USER_CONFIG = "Agent.mcp_servers"
SERVER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    disabled: bool = False
    enabled_tools: tuple[str, ...] | None = None  # None: every tool the server lists
    origin: str = USER_CONFIG  # where it was defined: Agent.mcp_servers, or a project file's path
    kind: str = ""  # the transport's name (transports.py); "" : http for a url, else stdio

    @property
    def transport(self) -> str:
        return self.kind or ("http" if self.url else "stdio")

    @property
    def from_project(self) -> bool:
        return self.origin != USER_CONFIG

    def command_line(self) -> str:
        """The whole command (or the URL), as a shell would read it; no env or header values."""
        if self.url:
            return self.url
        return shlex.join([self.command, *self.args])

    def shown(self) -> str:
        """One line for listings and approval questions: the command, and the names (only) of
        the variables and headers it sets."""
        extra = []
        if self.env:
            extra.append("env: " + ", ".join(sorted(self.env)))
        if self.headers:
            extra.append("headers: " + ", ".join(sorted(self.headers)))
        if self.cwd:
            extra.append(f"cwd: {self.cwd}")
        return self.command_line() + (f"  ({'; '.join(extra)})" if extra else "")

    def fingerprint(self) -> str:
        """Identifies exactly what would be started (secrets included, hashed): an approval or a
        running server is for this definition, and a changed one is asked about or started anew."""
        data = [self.origin, self.name, self.command, list(self.args), sorted(self.env.items()), self.cwd,
                self.url, sorted(self.headers.items()), self.transport]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]

    def secret_values(self) -> tuple[str, ...]:
        """What the redactor scrubs for this server: its ``env`` and ``headers`` values and its
        URL's credentials."""
        return tuple(v for v in (*self.env.values(), *self.headers.values(), *url_credentials(self.url)) if v)

    def offers(self, tool: str) -> bool:
        return self.enabled_tools is None or tool in self.enabled_tools


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object of strings")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, (str, int, float, bool)):
            raise ValueError(f"{what} must be an object of strings")
        out[key] = item if isinstance(item, str) else json.dumps(item)
    return out


def parse_server(name: str, spec: Any, origin: str = USER_CONFIG) -> ServerConfig:
    """One server's definition, checked; raises ValueError saying what is wrong."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ValueError(f"MCP server name {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
    if not isinstance(spec, Mapping):
        raise ValueError(f"MCP server {name!r}: its definition must be an object")
    command, url = spec.get("command", ""), spec.get("url", spec.get("httpUrl", ""))
    if not isinstance(command, str) or not isinstance(url, str):
        raise ValueError(f"MCP server {name!r}: command and url must be strings")
    if bool(command) == bool(url):
        raise ValueError(f"MCP server {name!r}: give either a command (stdio) or a url (Streamable HTTP)")
    kind = spec.get("type")
    transport = transport_for(kind if isinstance(kind, str) else "") if kind is not None else \
        transport_for("http" if url else "stdio")
    if transport is None:
        kind = kind if kind is not None else ("http" if url else "stdio")
        raise ValueError(f"MCP server {name!r}: type {kind!r} is not supported (the transports are: "
                         f"{', '.join(transport_types()) or 'none; is the builtin-mcp plugin turned off?'})")
    if transport.needs == "url" and not url:
        raise ValueError(f"MCP server {name!r}: the {transport.name} transport needs a url")
    if transport.needs == "command" and not command:
        raise ValueError(f"MCP server {name!r}: the {transport.name} transport needs a command")
    if url and not url.startswith(transport.url_schemes):
        raise ValueError(f"MCP server {name!r}: the url must start with {' or '.join(transport.url_schemes)}")
    tools = spec.get("tools", spec.get("enabledTools"))
    cwd = spec.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"MCP server {name!r}: cwd must be a string")
    return ServerConfig(
        name=name, command=command, args=_strings(spec.get("args", []), f"MCP server {name!r}: args"),
        env=_string_map(spec.get("env", {}), f"MCP server {name!r}: env"), cwd=cwd, url=url,
        headers=_string_map(spec.get("headers", {}), f"MCP server {name!r}: headers"),
        disabled=bool(spec.get("disabled", False)),
        enabled_tools=None if tools is None else _strings(tools, f"MCP server {name!r}: tools"), origin=origin,
        kind=transport.name)


def parse_servers(servers: Any, origin: str = USER_CONFIG) -> tuple[list[ServerConfig], list[str]]:
    """Every well-formed server of an ``mcpServers`` mapping, and one line per one that is not."""
    if not isinstance(servers, Mapping):
        return [], [f"{origin}: mcpServers must be an object of servers"]
    found, problems = [], []
    for name, spec in servers.items():
        try:
            found.append(parse_server(name, spec, origin))
        except ValueError as exc:
            problems.append(f"{origin}: {exc}")
    return found, problems


def check_user_servers(value: Any) -> dict[str, Any]:
    """``Agent.mcp_servers`` as set: every definition must parse (the error says which does not)."""
    if not isinstance(value, Mapping):
        raise ValueError("Agent.mcp_servers must be a dict of server definitions")
    for name, spec in value.items():
        parse_server(name, spec)
    return dict(value)
