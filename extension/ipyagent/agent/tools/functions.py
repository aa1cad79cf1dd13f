"""A plain Python function as a tool: the JSON schema from its signature, the description from its
docstring.

    @read_only
    def word_count(text: str, unique: bool = False) -> int:
        \"\"\"Count the words of a text.

        Args:
            text: the text to count in
            unique: count each distinct word once
        \"\"\"
        words = text.split()
        return len(set(words) if unique else words)

    register_tool(word_count)          # or register_tool(fn, read_only=True), name="…"

Parameters need type hints (``str``, ``int``, ``float``, ``bool``, ``list[...]``, ``dict[...]``,
``Literal[...]``, ``X | None``, ``Any``); a parameter with a default is optional. A parameter
annotated :class:`ToolContext` receives the call's context and is not shown to the model. What the
function returns becomes the result's text (a string as is, anything else as JSON, else its
repr), truncated with Pi's limits; a :class:`ToolOutput` is passed through. A function that is not
marked read-only asks for approval under ``tool_approval="ask"``.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import cut_result
from ipyagent.shapes import JsonSchema

__all__ = ["FunctionTool", "function_tool", "read_only"]

F = TypeVar("F", bound=Callable[..., Any])
READ_ONLY_ATTR = "__ipyagent_read_only__"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what the providers accept as a function name

_SIMPLE: dict[Any, JsonSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    dict: {"type": "object"},
}


def read_only(fn: F) -> F:
    """Mark a function tool as read-only: it runs without asking, like ``read`` and ``grep``."""
    setattr(fn, READ_ONLY_ATTR, True)
    return fn


def _schema(hint: Any, where: str) -> tuple[JsonSchema, bool]:
    """The JSON schema of a type hint, and whether ``None`` is allowed."""
    if hint is Any:
        return {}, True
    if hint in _SIMPLE:
        return _SIMPLE[hint].copy(), False
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        kinds = {type(a) for a in args}
        schema: JsonSchema = {"enum": list(args)}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE:
            schema["type"] = _SIMPLE[next(iter(kinds))]["type"]
        return schema, False
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _schema(rest[0], where)[0], len(rest) < len(args)
        return {"anyOf": [_schema(a, where)[0] for a in rest]}, len(rest) < len(args)
    if origin in (list, tuple, set, frozenset) or origin is typing.Sequence:
        schema = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _schema(args[0], where)[0]
        return schema, False
    if origin is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _schema(args[1], where)[0]
        return schema, False
    raise TypeError(f"{where}: type {hint!r} has no JSON schema (use str, int, float, bool, list, dict, "
                    "Literal, X | None or Any)")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """The description (what comes before an ``Args:`` section) and each parameter's line, from a
    Google-style ``Args:`` section or reST ``:param name:`` lines."""
    text = inspect.cleandoc(doc)
    params: dict[str, str] = {}
    for match in re.finditer(r"^:param\s+(\w+):\s*(.+)$", text, re.MULTILINE):
        params[match.group(1)] = match.group(2).strip()
    head = re.split(r"^(?:Args|Arguments|Parameters|Returns|Raises):\s*$|^:param", text, maxsplit=1,
                    flags=re.MULTILINE)[0]
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)+)", text, re.MULTILINE)
    if section:
        current = None
        for line in section.group(1).splitlines():
            item = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if item and (current is None or len(line) - len(line.lstrip()) <= _indent(section.group(1))):
                current = item.group(1)
                params[current] = item.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return head.strip(), params


def _indent(block: str) -> int:
    lines = [line for line in block.splitlines() if line.strip()]
    return min((len(line) - len(line.lstrip()) for line in lines), default=0)


class FunctionTool(Tool):
    """A tool made of a function (see the module's docstring); ``function_tool`` builds one."""

    name: str  # type: ignore[misc]  # per instance here, a class attribute for the built-ins
    description: str  # type: ignore[misc]
    parameters: JsonSchema  # type: ignore[misc]
    read_only: bool  # type: ignore[misc]

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 read_only: bool | None = None):
        self.function = fn
        self.name = name or str(getattr(fn, "__name__", ""))
        where = f"tool {self.name!r}"
        if not TOOL_NAME.match(self.name):
            raise TypeError(f"{where}: a tool name is 1-64 letters, digits, '_' or '-'")
        summary, documented = _docstring_parts(inspect.getdoc(fn) or "")
        self.description = description or summary
        if not self.description:
            raise TypeError(f"{where}: {getattr(fn, '__qualname__', fn)!r} needs a docstring (the model reads it "
                            "to know what the tool does)")
        self.read_only = bool(getattr(fn, READ_ONLY_ATTR, False)) if read_only is None else read_only
        self.parameters, self.context_names = self._parameters(fn, documented, where)

    @staticmethod
    def _parameters(fn: Callable[..., Any], documented: dict[str, str],
                    where: str) -> tuple[JsonSchema, tuple[str, ...]]:
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:  # noqa: BLE001 - an unresolvable annotation: say which function
            raise TypeError(f"{where}: its type hints cannot be read ({exc})") from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        context: list[str] = []
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"{where}: *{param.name} cannot be described to the model; name each parameter")
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"{where}: parameter {param.name!r} is positional-only; the model passes names")
            if param.name not in hints:
                raise TypeError(f"{where}: parameter {param.name!r} has no type hint (the schema is made of them)")
            hint = hints[param.name]
            if ToolContext in (hint, *get_args(hint)):  # ToolContext, or ToolContext | None
                context.append(param.name)
                continue
            schema, nullable = _schema(hint, f"{where}, parameter {param.name!r}")
            if param.name in documented:
                schema["description"] = documented[param.name]
            properties[param.name] = schema
            if param.default is param.empty and not nullable:
                required.append(param.name)
        parameters: JsonSchema = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        return parameters, tuple(context)

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        value = self.function(**arguments, **{name: context for name in self.context_names})
        if isinstance(value, ToolOutput):
            return value
        if isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError):
                text = repr(value)
        return ToolOutput(cut_result(text, self.name))

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, read_only={self.read_only})"


def function_tool(fn: Callable[..., Any], **options: Any) -> FunctionTool:
    """``fn`` as a tool (``name``, ``description`` and ``read_only`` override what it says)."""
    return FunctionTool(fn, **options)
