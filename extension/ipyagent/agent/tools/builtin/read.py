"""``read(path, offset?, limit?)``: a text file's lines, head-truncated with Pi's limits."""

from __future__ import annotations

import mimetypes
import os
import shlex
from dataclasses import replace
from typing import Any, ClassVar

from ipyagent.agent.tools.lines import LineScan, scan_lines
from ipyagent.agent.tools.paths import NotARegularFile, looks_binary, open_regular, outside_root, resolve_path
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from ipyagent.shapes import JsonSchema

# read never reads more than this much of a file (a huge or sparse file must not fill the kernel's
# memory), and keeps only enough of the requested lines for Pi's output limits.
READ_BUDGET_BYTES = 256 * 1024 * 1024
WINDOW_KEEP_BYTES = 4 * DEFAULT_MAX_BYTES


def _error(text: str) -> ToolOutput:
    return ToolOutput(text, is_error=True)


class ReadTool(Tool):
    name = "read"
    description = (
        "Read the contents of a text file. Output is truncated to "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
        "Use offset/limit for large files; when you need the full file, continue with offset "
        "until complete."
    )
    parameters: ClassVar[JsonSchema] = {
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
        start = (offset or 1) - 1
        try:
            with open_regular(full) as f:
                size = os.fstat(f.fileno()).st_size
                scan = scan_lines(f, start, None if limit is None else start + limit,
                                  keep=WINDOW_KEEP_BYTES, budget=READ_BUDGET_BYTES)
        except FileNotFoundError:
            return _error(f"File not found: {path}")
        except NotARegularFile as e:
            return _error(f"{path} is {e.kind}, not a regular file; read only reads regular files.")
        except OSError as e:
            return _error(f"Cannot read {path}: {e.strerror or e}")

        if looks_binary(scan.head):
            kind = mimetypes.guess_type(full)[0] or "unknown type"
            return _error(f"{path} is a binary file ({kind}, {format_size(size)}); read only shows text files.")
        return _read_lines(path, scan, offset, limit)

    def approval_reason(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return outside_root(arguments["path"], context)


def _read_lines(path: str, scan: LineScan, offset: int | None, limit: int | None) -> ToolOutput:
    if scan.complete and scan.bytes_read == 0:
        return ToolOutput("(empty file)")
    total = scan.total_lines
    budget = format_size(READ_BUDGET_BYTES)
    # Past the budget the file's length in lines is unknown: say how far read counted.
    of_total = str(total) if scan.complete else f"at least {total} (read looks at the first {budget})"
    start = (offset or 1) - 1
    if start >= total:
        if scan.complete:
            return _error(f"Offset {offset} is beyond end of file ({total} lines total)")
        return _error(f"Offset {offset} is beyond the {total} lines in the first {budget} of {path}, which is "
                      f"as far as read looks. Use bash: sed -n '{offset}p' {shlex.quote(path)} | head -c "
                      f"{DEFAULT_MAX_BYTES}")
    end = total if limit is None else min(start + limit, total)

    text = scan.window.decode("utf-8", errors="replace")
    window_size = (scan.window_end - scan.window_start
                   if scan.window_end is not None and scan.window_start is not None else None)
    if window_size is not None and len(scan.window) == window_size:
        text = text.removesuffix("\n")  # the whole window: its last newline ends its last line
    t = truncate_head(text)
    if window_size is not None:  # the window's own size, not just the part kept
        t = replace(t, total_lines=end - start, total_bytes=window_size)
    first = start + 1
    if t.first_line_exceeds_limit:
        size = format_size(scan.first_line_bytes) if scan.first_line_bytes is not None else f"over {budget}"
        return ToolOutput(
            f"[Line {first} is {size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shlex.quote(path)} | head -c {DEFAULT_MAX_BYTES}]",
            details={"truncation": t.as_details()},
        )
    if t.truncated:
        last = start + t.output_lines
        limit_note = "" if t.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        notice = f"[Showing lines {first}-{last} of {of_total}{limit_note}. Use offset={last + 1} to continue.]"
        return ToolOutput(f"{t.content}\n\n{notice}", details={"truncation": t.as_details()})
    if end < total:
        more = str(total - end) if scan.complete else f"at least {total - end}"
        return ToolOutput(f"{t.content}\n\n[{more} more lines in file. Use offset={end + 1} to continue.]")
    if not scan.complete:
        return ToolOutput(f"{t.content}\n\n[read stopped after the first {budget}. Use offset={end + 1} to "
                          "continue.]")
    return ToolOutput(t.content)
