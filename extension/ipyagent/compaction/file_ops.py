"""Which files the summarised work read and modified (Pi's file-operation tracking)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ipyagent.session.messages import Message, call_arguments, tool_calls_of

READ_TOOLS = {"read"}
WRITE_TOOLS = {"write"}
EDIT_TOOLS = {"edit"}


FileOperation = tuple[str, str]  # ("read" | "written" | "edited", path)
_KIND = {**{n: "read" for n in READ_TOOLS}, **{n: "written" for n in WRITE_TOOLS}, **{n: "edited" for n in EDIT_TOOLS}}


def file_operations(message: Message) -> tuple[FileOperation, ...]:
    """The file operations of one message's tool calls (a non-empty string ``path`` argument), in
    order; for a tool result, those of the calls a script made inside it (Pi 1.6's codemode
    ``nestedCalls``).

    Recorded even when the call later failed; other tools (bash, grep…) are not tracked, as in Pi.
    """
    if message.get("role") == "toolResult":
        nested = message.get("nestedCalls")
        calls = nested.get("calls") if isinstance(nested, dict) else None
        return tuple(op for c in (calls if isinstance(calls, list) else []) if isinstance(c, dict)
                     for op in _operation(c.get("name"), c.get("arguments")))
    return tuple(op for call in tool_calls_of(message) for op in _operation(call.get("name"), call_arguments(call)))


def _operation(name: Any, args: Any) -> tuple[FileOperation, ...]:
    kind = _KIND.get(name) if isinstance(name, str) else None
    path = args.get("path") if kind is not None and isinstance(args, dict) else None
    return ((kind, path),) if kind is not None and isinstance(path, str) and path else ()


@dataclass
class FileOps:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add(self, operations: Iterable[FileOperation]) -> None:
        for kind, path in operations:
            getattr(self, kind).add(path)

    def add_tool_calls(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.add(file_operations(message))

    def add_details(self, details: Any) -> None:
        """Carry the lists of an earlier (non-hook) compaction or branch summary forward."""
        if not isinstance(details, dict):
            return
        self.read.update(p for p in details.get("readFiles") or [] if isinstance(p, str))
        self.edited.update(p for p in details.get("modifiedFiles") or [] if isinstance(p, str))

    def lists(self) -> tuple[list[str], list[str]]:
        """(read_files, modified_files): modified = edited ∪ written; read = only-read files."""
        modified = self.edited | self.written
        return js_sorted(self.read - modified), js_sorted(modified)

    def details(self) -> dict[str, list[str]]:
        read, modified = self.lists()
        return {"readFiles": read, "modifiedFiles": modified}


def js_sorted(items: Iterable[str]) -> list[str]:
    """Sorted as JavaScript's ``Array.prototype.sort`` orders strings: by UTF-16 code units."""
    return sorted(items, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


def format_file_lists(read_files: list[str], modified_files: list[str]) -> str:
    """The text appended to a summary: a blank line, then the non-empty tagged lists."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
