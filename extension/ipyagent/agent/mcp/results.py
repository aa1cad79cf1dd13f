"""An MCP ``CallToolResult`` as a tool result: text blocks as text, images through the image
checks (``agent/tools/images.py``), audio and embedded resources described (their text kept),
resource links named, and ``structuredContent`` as JSON text when the result has no text block (the
model reads it) and in ``details`` (the session keeps it as it came). ``isError`` stays an error.
The text is cut to the tools' output limits, like every tool's; a first line longer than the limit
keeps its start (cut by characters), so one long line is never cut to nothing.
"""

from __future__ import annotations

import json
from typing import Any

from ipyagent.agent.tools.images import ImageCollector
from ipyagent.agent.tools.tool import ToolOutput
from ipyagent.agent.tools.truncate import cut_result


def _field(block: Any, name: str, default: Any = None) -> Any:
    if isinstance(block, dict):
        return block.get(name, default)
    return getattr(block, name, default)


def tool_output(result: Any, *, server: str, tool: str) -> ToolOutput:
    """``result`` (an ``mcp.types.CallToolResult`` or its JSON form) as a ``ToolOutput``."""
    texts: list[str] = []
    images = ImageCollector()
    for block in _field(result, "content", None) or []:
        kind = _field(block, "type")
        if kind == "text":
            texts.append(str(_field(block, "text", "")))
        elif kind == "image":
            images.add(str(_field(block, "mimeType", "")), _field(block, "data"), label=f"{tool} image")
        elif kind == "audio":
            texts.append(f"[audio ({_field(block, 'mimeType', '?')}) not shown]")
        elif kind == "resource":
            resource = _field(block, "resource")
            uri = _field(resource, "uri", "")
            text = _field(resource, "text")
            texts.append(f"[resource {uri}]\n{text}" if isinstance(text, str) else f"[resource {uri} (binary)]")
        elif kind == "resource_link":
            texts.append(f"[resource link {_field(block, 'uri', '')} {_field(block, 'name', '')}]")
    structured = _field(result, "structuredContent")
    details: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    if structured is not None:
        details["structuredContent"] = structured
        if not texts:  # servers SHOULD send it as text too; when one does not, the model still reads it
            texts.append(json.dumps(structured, ensure_ascii=False))
    text = cut_result("\n".join(texts + images.notices), tool)
    is_error = bool(_field(result, "isError", False))
    if not text and not images.blocks:
        text = "(the tool returned nothing)" if not is_error else "(the tool failed without a message)"
    return ToolOutput(text, is_error=is_error, details=details, images=images.blocks)

