"""Which files the summarised work read and modified (Pi's file-operation tracking)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ipyagent.session.messages import Message, tool_calls_of

READ_TOOLS = {"read"}
WRITE_TOOLS = {"write"}
EDIT_TOOLS = {"edit"}


@dataclass
class FileOps:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_tool_calls(self, messages: Iterable[Message]) -> None:
        for message in messages:
            for call in tool_calls_of(message):
                args = call.get("arguments")
                path = args.get("path") if isinstance(args, dict) else None
                if not isinstance(path, str):
                    continue
                name = call.get("name")
                if name in READ_TOOLS:
                    self.read.add(path)
                elif name in WRITE_TOOLS:
                    self.written.add(path)
                elif name in EDIT_TOOLS:
                    self.edited.add(path)

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
