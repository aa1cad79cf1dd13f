"""The names and schemas MCP tools are offered under.

A tool is offered as ``mcp__<server>__<tool>`` (Pi's and Claude Code's form). Both wire protocols
ipyagent speaks take function names matching ``^[A-Za-z0-9_-]{1,64}$`` (OpenAI Chat Completions
and Responses, Anthropic Messages), so one name fits every provider and a session keeps its
recorded call names across a model switch: other characters become ``_``, and a name longer than
64 characters keeps its start and ends with a hash of the whole, so two long names stay apart.

Input schemas: both APIs want an object schema at the top, OpenAI rejects ``anyOf``/``oneOf``/
``allOf``/``enum``/``not`` there, and neither needs ``$schema``; nested schemas pass unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container
from typing import Any, cast

from ipyagent.shapes import JsonSchema

PREFIX = "mcp__"
MAX_NAME = 64
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_TOP_LEVEL_REJECTED = ("anyOf", "oneOf", "allOf", "enum", "not", "$schema", "$id")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def wire_name(server: str, tool: str, taken: Container[str] = ()) -> str:
    """The name ``tool`` of ``server`` is offered under; never one in ``taken``."""
    full = f"{PREFIX}{server}__{tool}"
    name = _NOT_ALLOWED.sub("_", full)
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME - 9] + "_" + _hash(full)
    n = 1
    candidate = name
    while candidate in taken:
        n += 1
        suffix = f"_{n}"
        candidate = name[:MAX_NAME - len(suffix)] + suffix
    return candidate


def is_mcp_name(name: str) -> bool:
    return name.startswith(PREFIX)


def adapt_schema(schema: Any) -> JsonSchema:
    """An MCP tool's ``inputSchema`` as the providers accept it (see the module's docstring)."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    out = {k: v for k, v in schema.items() if k not in _TOP_LEVEL_REJECTED}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    required = out.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        out.pop("required")
    return cast(JsonSchema, out)
