"""``read(path, offset?, limit?)``: a text file's lines, head-truncated with Pi's limits."""

from __future__ import annotations

import mimetypes
import os
import shlex
from typing import Any

from ipyagent.agent.tools.base import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.paths import looks_binary, resolve_path
from ipyagent.agent.tools.registry import register_tool
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head


def _error(text: str) -> ToolOutput:
    return ToolOutput(text, is_error=True)


@register_tool
class ReadTool(Tool):
    name = "read"
    description = (
        "Read the contents of a text file. Output is truncated to "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
        "Use offset/limit for large files; when you need the full file, continue with offset "
        "until complete."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
            "offset": {"type": "integer", "description": "Line number to start reading from (1-indexed)"},
            "limit": {"type": "integer", "description": "Maximum number of lines to read"},
        },
        "required": ["path"],
    }
    read_only = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        path: str = arguments["path"]
        offset: int | None = arguments.get("offset")
        limit: int | None = arguments.get("limit")
        if offset is not None and offset < 1:
            return _error(f"offset must be 1 or more (lines are numbered from 1), got {offset}")
        if limit is not None and limit < 1:
            return _error(f"limit must be 1 or more, got {limit}")

        full = resolve_path(path, context.cwd)
        if os.path.isdir(full):
            return _error(f"{path} is a directory, not a file. Use ls to list it.")
        try:
            with open(full, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return _error(f"File not found: {path}")
        except OSError as e:
            return _error(f"Cannot read {path}: {e.strerror or e}")

        if looks_binary(data):
            kind = mimetypes.guess_type(full)[0] or "unknown type"
            return _error(
                f"{path} is a binary file ({kind}, {format_size(len(data))}); read only shows text files."
            )
        return _read_lines(path, data.decode("utf-8", errors="replace"), offset, limit)


def _read_lines(path: str, text: str, offset: int | None, limit: int | None) -> ToolOutput:
    if not text:
        return ToolOutput("(empty file)")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # a final newline ends the last line; it does not start another
    total = len(lines)

    start = (offset or 1) - 1
    if start >= total:
        return _error(f"Offset {offset} is beyond end of file ({total} lines total)")
    end = total if limit is None else min(start + limit, total)

    t = truncate_head("\n".join(lines[start:end]))
    first = start + 1
    if t.first_line_exceeds_limit:
        size = format_size(len(lines[start].encode("utf-8")))
        return ToolOutput(
            f"[Line {first} is {size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shlex.quote(path)} | head -c {DEFAULT_MAX_BYTES}]",
            details={"truncation": t.as_details()},
        )
    if t.truncated:
        last = start + t.output_lines
        limit_note = "" if t.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        notice = f"[Showing lines {first}-{last} of {total}{limit_note}. Use offset={last + 1} to continue.]"
        return ToolOutput(f"{t.content}\n\n{notice}", details={"truncation": t.as_details()})
    if end < total:
        return ToolOutput(f"{t.content}\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]")
    return ToolOutput(t.content)
