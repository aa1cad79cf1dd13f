"""Tools by name. The built-ins (``tools/builtin``, a plugin) and plugins' tools register here;
so can a user's, a Tool class, a Tool or a plain typed function (``tools/functions.py``)::

    @register_tool
    class Weather(Tool):
        name = "weather"
        ...

    register_tool(word_count, read_only=True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ipyagent.agent.tools.functions import FunctionTool, function_tool
from ipyagent.agent.tools.tool import Tool

_tools: dict[str, Tool] = {}

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


def register_tool(item: T, **options: Any) -> T:
    """Register a Tool subclass, a Tool or a function (:func:`as_tool`) under its name.

    A later registration under the same name replaces the earlier one in place, so a user can
    override a built-in without reordering the tool list. Returns its argument, so it also works
    as a decorator.
    """
    add_tool(as_tool(item, **options))
    return item


def add_tool(tool: Tool) -> Tool | None:
    """Put ``tool`` under its name (in place of one there); the one it replaced."""
    previous = _tools.get(tool.name)
    _tools[tool.name] = tool
    return previous


def find_tool(name: str) -> Tool | None:
    return _tools.get(name)


def unregister_tool(name: str) -> None:
    _tools.pop(name, None)


def get_tool(name: str) -> Tool:
    try:
        return _tools[name]
    except KeyError:
        known = ", ".join(_tools) or "none"
        raise KeyError(f"unknown tool {name!r} (registered: {known})") from None


def default_tools() -> list[Tool]:
    """Every registered tool, built-ins first, in registration order."""
    return list(_tools.values())
