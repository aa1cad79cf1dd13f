"""Pi's ``buildSessionContext``: the messages the model gets for a root→leaf path.

``ContextState`` is the incremental form the session tree keeps: appending one entry under the
current leaf extends it in O(1) (estimates are cached per entry id), so a turn costs the same at
100 entries as at 16,000. Only a compaction or a leaf move rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message, compaction_summary_message, entry_to_message, to_llm_message
from ipyagent.session.tokens import is_valid_usage_message, usage_tokens


def context_message(entry: Entry) -> Message | None:
    """The message an entry contributes to the context; compactions contribute only as the latest summary."""
    if entry.get("type") == "compaction":
        return None
    return entry_to_message(entry)


def latest_compaction_index(path: Sequence[Entry]) -> int:
    for i in range(len(path) - 1, -1, -1):
        if path[i].get("type") == "compaction":
            return i
    return -1


def context_entries(path: Sequence[Entry]) -> tuple[list[Entry], int]:
    """The entries whose messages form the context, in order, and the position of the first
    entry after the latest compaction (0 when there is none).

    With a compaction: its summary first, then the entries from its ``firstKeptEntryId`` (if that
    is on the path before it), then everything after it.
    """
    ci = latest_compaction_index(path)
    if ci < 0:
        return [e for e in path if context_message(e) is not None], 0
    compaction = path[ci]
    kept: list[Entry] = []
    first_kept = compaction.get("firstKeptEntryId")
    emitting = False
    for entry in path[:ci]:
        if not emitting and entry.get("id") == first_kept:
            emitting = True
        if emitting and context_message(entry) is not None:
            kept.append(entry)
    after = [e for e in path[ci + 1:] if context_message(e) is not None]
    ordered = [compaction, *kept, *after]
    return ordered, 1 + len(kept)


def summarized_away(path: Sequence[Entry]) -> list[Entry]:
    """The entries of ``path`` that the latest compaction summarised away: everything before its
    first kept entry (before the compaction itself when that id is not on the path), without the
    compaction entries. None of them is in the context; empty when there is no compaction."""
    ci = latest_compaction_index(path)
    if ci < 0:
        return []
    first_kept = path[ci].get("firstKeptEntryId")
    end = next((i for i in range(ci) if path[i].get("id") == first_kept), ci)
    return [e for e in path[:end] if e.get("type") != "compaction"]


def build_session_context(path: Sequence[Entry]) -> list[Message]:
    """The agent messages (Pi shapes, before ``convert_to_llm``) for a path."""
    ordered, _ = context_entries(path)
    return [_message_of(e) for e in ordered]


def _message_of(entry: Entry) -> Message:
    if entry.get("type") == "compaction":
        return compaction_summary_message(entry)
    message = context_message(entry)
    assert message is not None
    return message


@dataclass
class ContextState:
    """The context of one leaf, kept up to date as entries are appended under it."""

    leaf_id: str | None
    entry_ids: list[str] = field(default_factory=list)
    agent_messages: list[Message] = field(default_factory=list)
    llm_messages: list[Message] = field(default_factory=list)
    estimates: list[int] = field(default_factory=list)
    # Usage recorded before the latest compaction describes the old, larger context: ignore it.
    usage_floor: int = 0
    compaction_index: int = -1  # path index of the latest compaction (-1: none)
    last_usage_index: int = -1
    trailing: int = 0

    @classmethod
    def build(cls, path: Sequence[Entry], leaf_id: str | None,
              estimate: Callable[[Entry, Message], int]) -> ContextState:
        state = cls(leaf_id=leaf_id, compaction_index=latest_compaction_index(path))
        ordered, floor = context_entries(path)
        state.usage_floor = floor
        for entry in ordered:
            state._add(entry, _message_of(entry), estimate)
        return state

    def extend(self, entry: Entry, estimate: Callable[[Entry, Message], int]) -> None:
        message = context_message(entry)
        if message is not None:
            self._add(entry, message, estimate)
        self.leaf_id = entry["id"]

    def _add(self, entry: Entry, message: Message, estimate: Callable[[Entry, Message], int]) -> None:
        index = len(self.agent_messages)
        tokens = estimate(entry, message)
        self.entry_ids.append(entry["id"])
        self.agent_messages.append(message)
        llm = to_llm_message(message)
        if llm is not None:
            self.llm_messages.append(llm)
        self.estimates.append(tokens)
        if index >= self.usage_floor and is_valid_usage_message(message):
            self.last_usage_index = index
            self.trailing = 0
        else:
            self.trailing += tokens

    def context_tokens(self) -> int:
        if self.last_usage_index < 0:
            return self.trailing
        usage: Any = self.agent_messages[self.last_usage_index].get("usage")
        return usage_tokens(usage) + self.trailing
