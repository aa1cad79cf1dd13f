"""Tools by name. Built-ins register themselves on import; user tools register the same way:

    @register_tool
    class Weather(Tool):
        name = "weather"
        ...
"""

from __future__ import annotations

from typing import TypeVar

from ipyagent.agent.tools.base import Tool

_tools: dict[str, Tool] = {}

T = TypeVar("T", bound=Tool | type[Tool])


def _check(tool: Tool) -> None:
    for attr in ("name", "description", "parameters"):
        if not getattr(tool, attr, None):
            raise TypeError(f"{type(tool).__name__} must define `{attr}`")
    if tool.parameters.get("type") != "object":
        raise TypeError(f"{tool.name}: `parameters` must be a JSON schema of type 'object'")


def register_tool(cls_or_instance: T) -> T:
    """Register a Tool subclass (instantiated without arguments) or instance under its name.

    A later registration under the same name replaces the earlier one in place, so a user can
    override a built-in without reordering the tool list. Returns its argument, so it also works
    as a class decorator.
    """
    tool = cls_or_instance() if isinstance(cls_or_instance, type) else cls_or_instance
    if not isinstance(tool, Tool):
        raise TypeError(f"not a Tool: {cls_or_instance!r}")
    _check(tool)
    _tools[tool.name] = tool
    return cls_or_instance


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
