"""The plugin hooks (pluggy hookspecs, project ``ipyagent``). A plugin is a module or object with
functions of these names marked ``@ipyagent.hookimpl``; each takes its one argument by name (a
plugin may leave out a hook it does not need). ``docs/extending.md`` shows each in use."""

from __future__ import annotations

from typing import Any

from ipyagent.plugin_markers import hookspec


class PluginSpec:
    @hookspec
    def register_tools(self, register: Any) -> None:
        """Add tools: ``register(fn)`` (a typed, documented function; ``read_only=True`` or
        ``@ipyagent.read_only`` to run it without asking; ``name=``, ``description=``) or
        ``register(tool)`` (a ``Tool`` or ``Tool`` subclass)."""

    @hookspec
    def register_providers(self, register: Any) -> None:
        """Add providers: ``register(name, factory)`` makes ``name:model`` resolve through
        ``factory(**Agent.provider_options[name])``, which returns a ``Provider``."""

    @hookspec
    def register_commands(self, register: Any) -> None:
        """Add ``%agent NAME``: ``register(name, function, parser=None)``. With an
        ``argparse.ArgumentParser`` the function gets the parsed arguments, without one the rest
        of the line; what it returns (if not None) is the cell's result."""

    @hookspec
    def register_hooks(self, hooks: Any) -> None:
        """Observe or steer the session: ``hooks.on("session_before_compact", handler)`` (the
        events of ``ipyagent.hooks``)."""

    @hookspec
    def register_mcp_transports(self, register: Any) -> None:
        """Add ways to reach an MCP server: ``register(McpTransport(...))`` or
        ``register(name, connect, types=(), needs="command" | "url")``; a definition's ``type``
        selects it (``ipyagent.agent.mcp.transports``)."""
