"""MCP tools as agent tools: :class:`McpTool` calls its server through the hub; it changes the
world as far as ipyagent knows, so it asks under ``tool_approval = "ask"`` (like ``python`` and
``write``) and runs under ``"auto"``.

:func:`offered_tools` names a set of servers' tools for the model (``agent/mcp/names.py``);
:func:`recorded_tools` rebuilds the MCP tools a session's system message declared, for a replay:
those never reach a server — a replay answers from the recorded results.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ipyagent.agent.mcp.names import adapt_schema, is_mcp_name, wire_name
from ipyagent.agent.mcp.server_definitions import ServerConfig
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.shapes import JsonSchema, ToolDeclaration

NOT_CALLED_IN_REPLAY = ("MCP tools are not called while a notebook replays; this call has no recorded result, "
                        "so it was not run.")


class Caller(Protocol):
    def call(self, name: str, tool: str, arguments: dict[str, Any], timeout: float | None = None) -> ToolOutput: ...


class McpTool(Tool):
    """One tool of one MCP server, offered as ``mcp__<server>__<tool>``."""

    def __init__(self, wire: str, server: str, tool: str, description: str, parameters: JsonSchema,
                 caller: Caller | None):
        # instance attributes shadow the Tool class variables: each MCP tool is its own
        self.name = wire  # type: ignore[misc]
        self.server, self.tool = server, tool
        self.description = description or f"The {tool} tool of the MCP server {server}."  # type: ignore[misc]
        self.parameters = parameters  # type: ignore[misc]
        self.caller = caller

    def approval_reason(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return f"it calls the MCP server {self.server!r}"

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        if self.caller is None:
            return ToolOutput(NOT_CALLED_IN_REPLAY, is_error=True)
        return self.caller.call(self.server, self.tool, arguments)


def offered_tools(servers: Iterable[tuple[ServerConfig, Iterable[Any]]], caller: Caller,
                  taken: Iterable[str] = ()) -> list[McpTool]:
    """The tools of ready servers (``(config, listed tools)``), in order, those the config enables,
    under names unique among themselves and ``taken`` (the built-ins)."""
    names = set(taken)
    out = []
    for config, listed in servers:
        for item in listed:
            if not config.offers(item.name):
                continue
            wire = wire_name(config.name, item.name, names)
            names.add(wire)
            out.append(McpTool(wire, config.name, item.name, item.description, adapt_schema(item.input_schema),
                               caller))
    return out


def recorded_tools(declared: Iterable[ToolDeclaration]) -> list[McpTool]:
    """The MCP tools among a recorded system message's tool declarations, without a server."""
    out = []
    for spec in declared:
        name = spec.get("name")
        if isinstance(name, str) and is_mcp_name(name):
            server, _, tool = name.removeprefix("mcp__").partition("__")
            parameters = spec.get("parameters")
            out.append(McpTool(name, server, tool, str(spec.get("description", "")),
                               parameters if isinstance(parameters, dict) else {"type": "object"}, None))
    return out
