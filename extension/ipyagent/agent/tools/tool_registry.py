"""Tools by name: a :class:`ToolRegistry`, and the tools a user registers.

The kernel's registry belongs to its plugin manager (``plugins/manager.py``): the built-ins
(``tools/builtin``, a plugin) and every plugin's tools register into it, and the runtime passes
the tools to each run. Outside a kernel, :func:`builtin_tools` makes a registry of the built-ins.

A user's own tools, a Tool class, a Tool or a plain typed function (``tools/functions.py``), go
through :func:`register_tool`::

    @register_tool
    class Weather(Tool):
        name = "weather"
        ...

    register_tool(word_count, read_only=True)

They land in :data:`USER_TOOLS`, the one registry of the process made for this: a decorator runs
when its module is imported, perhaps before ``%load_ext ipyagent``, so it cannot reach a runtime.
The kernel's registry (and :func:`default_tools`' outside a kernel) is made with
``user=USER_TOOLS`` and lays the user's tools over its own (:meth:`ToolRegistry.tools`), a
user's tool taking the place of one of the same name. Nothing of ipyagent writes into it but
``register_tool`` / ``unregister_tool``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ipyagent.agent.tools.functions import FunctionTool, function_tool
from ipyagent.agent.tools.tool import Tool

__all__ = ["USER_TOOLS", "ToolRegistry", "as_tool", "builtin_tools", "default_tools", "get_tool", "register_tool",
           "unregister_tool"]

T = TypeVar("T", bound=Tool | type[Tool] | Callable[..., Any])


def _check(tool: Tool) -> None:
    for attr in ("name", "description", "parameters"):
        if not getattr(tool, attr, None):
            raise TypeError(f"{type(tool).__name__} must define `{attr}`")
    if tool.parameters.get("type") != "object":
        raise TypeError(f"{tool.name}: `parameters` must be a JSON schema of type 'object'")


def as_tool(item: Any, **options: Any) -> Tool:
    """A Tool subclass (instantiated without arguments), a Tool, or a typed, documented function
    (``options``: its ``name``, ``description``, ``read_only``), checked."""
    if isinstance(item, type) and issubclass(item, Tool):
        tool = item()
    elif isinstance(item, Tool):
        tool = item
    elif callable(item) and not isinstance(item, type):
        tool = function_tool(item, **options)
    else:
        raise TypeError(f"not a Tool, a Tool class or a function: {item!r}")
    if options and not isinstance(tool, FunctionTool):
        raise TypeError(f"{tool.name}: name, description and read_only apply to functions only")
    _check(tool)
    return tool


class ToolRegistry:
    """Tools by name, in the order they were first registered. With ``user``, that registry's tools
    are laid over these in what a run is offered (:meth:`tools`): one of the same name takes the
    place of this registry's, the others follow."""

    def __init__(self, tools: Iterable[Tool] = (), *, user: ToolRegistry | None = None) -> None:
        self.user = user
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def register(self, item: T, **options: Any) -> T:
        """Register a Tool subclass, a Tool or a function (:func:`as_tool`) under its name.

        A later registration under the same name replaces the earlier one in place, so a user can
        override a built-in without reordering the tool list. Returns its argument, so it also
        works as a decorator.
        """
        self.add(as_tool(item, **options))
        return item

    def add(self, tool: Tool) -> Tool | None:
        """Put ``tool`` under its name (in place of one there); the one it replaced."""
        previous = self._tools.get(tool.name)
        self._tools[tool.name] = tool
        return previous

    def find(self, name: str) -> Tool | None:
        """This registry's own tool ``name`` (not the user's laid over it)."""
        return self._tools.get(name)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def tools(self) -> list[Tool]:
        """What a run is offered: every tool in registration order, the user's laid over them."""
        if self.user is None:
            return list(self._tools.values())
        over = {tool.name: tool for tool in self.user.tools()}
        mine = [over.get(name, tool) for name, tool in self._tools.items()]
        return mine + [tool for name, tool in over.items() if name not in self._tools]

    def get(self, name: str) -> Tool:
        """The tool ``name`` of :meth:`tools`."""
        offered = {tool.name: tool for tool in self.tools()}
        try:
            return offered[name]
        except KeyError:
            known = ", ".join(offered) or "none"
            raise KeyError(f"unknown tool {name!r} (registered: {known})") from None


USER_TOOLS = ToolRegistry()
"""The tools this process's user registered with :func:`register_tool` (see the module docstring)."""


def register_tool(item: T, **options: Any) -> T:
    """Register a user's Tool subclass, Tool or function in :data:`USER_TOOLS` (every run offers
    it); returns its argument, so it works as a decorator."""
    return USER_TOOLS.register(item, **options)


def unregister_tool(name: str) -> None:
    """Take a tool :func:`register_tool` registered back."""
    USER_TOOLS.remove(name)


def builtin_tools(*, user: ToolRegistry | None = None) -> ToolRegistry:
    """A new registry holding the built-in tools (their plugin's hook, ``tools/builtin``), with
    ``user``'s laid over them."""
    from ipyagent.agent.tools.builtin import register_tools

    registry = ToolRegistry(user=user)
    register_tools(registry.register)
    return registry


def default_tools() -> list[Tool]:
    """The tools of a run outside a kernel: the built-ins with the user's laid on them."""
    return builtin_tools(user=USER_TOOLS).tools()


def get_tool(name: str) -> Tool:
    """The tool ``name`` of :func:`default_tools` (a built-in, or the user's)."""
    return builtin_tools(user=USER_TOOLS).get(name)
