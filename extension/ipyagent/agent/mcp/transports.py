"""The ways the MCP hub reaches a server, one table: ``stdio`` (a process, over its stdin and
stdout) and ``http`` (Streamable HTTP), and whatever a plugin adds (``register_mcp_transports``).

A transport is chosen by a definition's ``type`` (any of the transport's ``types``), else by what
the definition gives: a ``command`` is ``stdio``, a ``url`` is ``http``. Its ``connect`` is a
coroutine that enters the SDK's streams on the server's exit stack and returns ``(read, write)``;
the hub wraps them in the SDK's ``ClientSession``.

These built-ins are a plugin like any other (:func:`register_mcp_transports` is its hook), called
on import as well.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ipyagent.agent.mcp.stdio import ProcessGroups, StderrTail, stdio_streams
from ipyagent.plugin_markers import hookimpl

__all__ = ["ConnectContext", "Endpoint", "McpTransport", "register_transport", "transport_for",
           "transport_types", "transports", "unregister_transport"]

PLUGIN_NAME = "builtin-mcp"


class Endpoint(Protocol):
    """What a transport reads of a server's definition (``config.ServerConfig``)."""

    @property
    def name(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


@dataclass
class ConnectContext:
    """What the hub gives a transport: the call timeout; the bounded tail a process's stderr goes
    into (its last line is quoted when the server fails); and where a transport that starts a
    process records its process group, so that closing the hub ends it (``agent/mcp/stdio.py``)."""

    call_timeout: float
    stderr: StderrTail = field(default_factory=StderrTail)
    groups: ProcessGroups = field(default_factory=ProcessGroups)


Connect = Callable[[AsyncExitStack, Endpoint, ConnectContext], Awaitable[tuple[Any, Any]]]


@dataclass(frozen=True)
class McpTransport:
    name: str
    connect: Connect
    # the definition's ``type`` values that select it (its name among them)
    types: tuple[str, ...] = ()
    # what a definition must give for it: a command to start, or a URL to reach
    needs: Literal["command", "url"] = "command"
    url_schemes: tuple[str, ...] = ("http://", "https://")

    def selected_by(self, kind: str) -> bool:
        return kind == self.name or kind in self.types


_transports: dict[str, McpTransport] = {}


def register_transport(transport: McpTransport) -> McpTransport | None:
    """Add ``transport`` (in place of one of that name, which it returns)."""
    if not isinstance(transport, McpTransport):
        raise TypeError(f"not an McpTransport: {transport!r}")
    previous = _transports.get(transport.name)
    _transports[transport.name] = transport
    return previous


def unregister_transport(name: str) -> None:
    _transports.pop(name, None)


def transports() -> list[McpTransport]:
    return list(_transports.values())


def transport_types() -> list[str]:
    """Every ``type`` a definition may give."""
    return [kind for t in _transports.values() for kind in dict.fromkeys((t.name, *t.types))]


def transport_for(kind: str) -> McpTransport | None:
    """The transport a definition's ``type`` (or a server's resolved transport name) selects."""
    found = _transports.get(kind)
    if found is not None:
        return found
    return next((t for t in _transports.values() if t.selected_by(kind)), None)


async def _stdio(stack: AsyncExitStack, endpoint: Endpoint, context: ConnectContext) -> tuple[Any, Any]:
    from mcp.client.stdio import get_default_environment

    return await stack.enter_async_context(stdio_streams(
        endpoint.command, list(endpoint.args), {**get_default_environment(), **endpoint.env}, endpoint.cwd,
        context.stderr, context.groups))


async def _streamable_http(stack: AsyncExitStack, endpoint: Endpoint, context: ConnectContext) -> tuple[Any, Any]:
    import httpx
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = await stack.enter_async_context(create_mcp_http_client(
        headers=dict(endpoint.headers), timeout=httpx.Timeout(30.0, read=context.call_timeout)))
    read, write, _ = await stack.enter_async_context(streamable_http_client(endpoint.url, http_client=client))
    return read, write


STDIO = McpTransport("stdio", _stdio, needs="command")
STREAMABLE_HTTP = McpTransport("http", _streamable_http, types=("streamable-http", "streamableHttp"), needs="url")


@hookimpl
def register_mcp_transports(register: Callable[[McpTransport], Any]) -> None:
    register(STDIO)
    register(STREAMABLE_HTTP)


register_mcp_transports(register_transport)
