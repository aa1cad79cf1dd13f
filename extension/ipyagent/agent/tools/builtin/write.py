"""``write(path, content)`` and ``edit(path, oldText, newText)``."""

from __future__ import annotations

import difflib
import os
from typing import Any, ClassVar

from ipyagent.agent.tools.paths import looks_binary, resolve_path
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.shapes import JsonSchema


class WriteTool(Tool):
    name = "write"
    description = (
        "Write content to a file. Creates the file if it doesn't exist, overwrites it if it does. "
        "Parent directories are created as needed."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
            "content": {"type": "string", "description": "Content to write to the file"},
        },
        "required": ["path", "content"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        path: str = arguments["path"]
        data = arguments["content"].encode("utf-8")
        full = resolve_path(path, context.cwd)
        if os.path.isdir(full):
            return ToolOutput(f"{path} is a directory; give a file path.", is_error=True)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        return ToolOutput(f"Successfully wrote {len(data)} bytes to {path}")


class EditTool(Tool):
    name = "edit"
    description = (
        "Edit a file by replacing exact text. The oldText must match exactly (including "
        "whitespace) and occur exactly once; include surrounding lines to make it unique."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
            "oldText": {"type": "string", "description": "Exact text to find and replace (must match exactly)"},
            "newText": {"type": "string", "description": "New text to replace the old text with"},
        },
        "required": ["path", "oldText", "newText"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        path: str = arguments["path"]
        full = resolve_path(path, context.cwd)
        try:
            with open(full, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return ToolOutput(f"File not found: {path}", is_error=True)
        except IsADirectoryError:
            return ToolOutput(f"{path} is a directory, not a file.", is_error=True)
        if looks_binary(raw):
            return ToolOutput(f"{path} is a binary file; edit only changes text files.", is_error=True)

        original = raw.decode("utf-8", errors="surrogateescape")
        # Models write "\n"; match CRLF files on normalised text and write CRLF back.
        crlf = "\r\n" in original
        text = original.replace("\r\n", "\n") if crlf else original
        old = arguments["oldText"].replace("\r\n", "\n") if crlf else arguments["oldText"]
        new = arguments["newText"].replace("\r\n", "\n") if crlf else arguments["newText"]

        if not old:
            return ToolOutput("oldText must not be empty.", is_error=True)
        count = text.count(old)
        if count == 0:
            return ToolOutput(
                f"Could not find the exact text in {path}. The old text must match exactly "
                "including all whitespace and newlines.",
                is_error=True,
            )
        if count > 1:
            return ToolOutput(
                f"Found {count} occurrences of the text in {path}. The text must be unique. "
                "Please provide more context to make it unique.",
                is_error=True,
            )
        if old == new:
            return ToolOutput(f"No changes made to {path}: oldText and newText are identical.", is_error=True)

        updated = text.replace(old, new, 1)
        out = updated.replace("\n", "\r\n") if crlf else updated
        with open(full, "wb") as f:
            f.write(out.encode("utf-8", errors="surrogateescape"))

        diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True), updated.splitlines(keepends=True), f"a/{path}", f"b/{path}"
            )
        )
        diff = diff.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
        first_changed = text[: text.index(old)].count("\n") + 1
        return ToolOutput(
            f"Successfully replaced text in {path}.", details={"diff": diff, "first_changed_line": first_changed}
        )
