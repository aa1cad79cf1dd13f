"""Pi's ``buildSessionProjection`` / ``buildSessionContext``: what the model gets for a root→leaf path.

The projection (Pi 1.6) is a list of *projected entries*: each selected entry with the messages
it contributes. The latest compaction comes first (its ``systemMessage`` checkpoint, if any, then
its summary), then the entries from its ``firstKeptEntryId`` (system messages there give way to
the checkpoint), then everything after it. The latest ``context_edit`` per target among the
selected entries applies: ``replacement: null`` hides the target, a replacement changes only its
``content``. An older compaction inside the kept range contributes nothing.

``ContextState`` is the incremental form the session tree keeps: appending one entry under the
current leaf extends it in O(1) (estimates are cached per entry id), so a turn costs the same at
100 entries as at 16,000. Only a compaction, a context edit or a leaf move rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipyagent.session.entries import Entry
from ipyagent.session.messages import (
    CUT_ROLES,
    Message,
    current_system_message,
    entry_messages,
    to_llm_message,
)
from ipyagent.session.tokens import Chars4Estimator, is_valid_usage_message, usage_tokens

EDITABLE_ROLES = ("user", "assistant", "toolResult", "custom")
_INVALIDATING = ("compaction", "context_edit")  # usage recorded before one of these is stale


def context_message(entry: Entry) -> Message | None:
    """The conversation message an entry contributes (no edits applied); compactions and system
    messages contribute none here (they are prompt state and summaries, see :func:`project`)."""
    if entry.get("type") == "compaction":
        return None
    messages = entry_messages(entry)
    for message in messages:
        if message.get("role") != "system":
            return message
    return None


def latest_compaction_index(path: Sequence[Entry]) -> int:
    for i in range(len(path) - 1, -1, -1):
        if path[i].get("type") == "compaction":
            return i
    return -1


def _is_system_entry(entry: Entry) -> bool:
    return entry.get("type") == "message" and entry["message"].get("role") == "system"


def selected_indexes(path: Sequence[Entry]) -> list[int]:
    """Pi's ``buildContextEntries``, as path indexes: the latest compaction, the entries from its
    first kept entry on (system messages left out, the checkpoint replaces them), everything after."""
    ci = latest_compaction_index(path)
    if ci < 0:
        return list(range(len(path)))
    first_kept = path[ci].get("firstKeptEntryId")
    start = next((i for i in range(ci) if path[i].get("id") == first_kept), ci)
    return [ci, *(i for i in range(start, ci) if not _is_system_entry(path[i])), *range(ci + 1, len(path))]


def context_entries(path: Sequence[Entry]) -> tuple[list[Entry], int]:
    """The selected entries in order, and the position of the first entry after the latest
    compaction (0 when there is none)."""
    indexes = selected_indexes(path)
    ci = latest_compaction_index(path)
    after = next((k for k, i in enumerate(indexes) if i > ci), len(indexes)) if ci >= 0 else 0
    return [path[i] for i in indexes], after


def apply_edit(messages: list[Message], edit: Entry | None) -> list[Message]:
    """Pi's ``projectContextEntry``: the latest edit of an entry applied to its messages."""
    if edit is None:
        return messages
    replacement = edit.get("replacement")
    if not isinstance(replacement, dict):
        return []
    content = replacement.get("content")
    out = []
    for message in messages:
        role = message.get("role")
        if role not in EDITABLE_ROLES:
            out.append(message)
            continue
        if role in ("assistant", "toolResult") and isinstance(content, str):
            out.append({**message, "content": [{"type": "text", "text": content}]})
        else:
            out.append({**message, "content": content})
    return out


@dataclass
class Projected:
    """One selected entry and the messages it contributes (after its latest edit)."""

    entry: Entry
    messages: list[Message]
    path_index: int
    edited: bool = False


def project(path: Sequence[Entry]) -> list[Projected]:
    """Pi 1.6's ``buildSessionProjection(path).entries``."""
    indexes = selected_indexes(path)
    edits = {path[i].get("targetId"): path[i] for i in indexes if path[i].get("type") == "context_edit"}
    out = []
    for k, i in enumerate(indexes):
        entry = path[i]
        edit = edits.get(entry.get("id"))
        if entry.get("type") == "compaction" and k > 0:
            messages: list[Message] = []
        else:
            messages = apply_edit(entry_messages(entry), edit)
        out.append(Projected(entry, messages, i, edit is not None))
    return out


def summarized_away(path: Sequence[Entry]) -> list[Entry]:
    """The entries of ``path`` that the latest compaction summarised away: everything before its
    first kept entry (before the compaction itself when that id is not on the path, or for a
    retain-none compaction), without the compaction entries. None of them is in the context;
    empty when there is no compaction."""
    ci = latest_compaction_index(path)
    if ci < 0:
        return []
    first_kept = path[ci].get("firstKeptEntryId")
    end = next((i for i in range(ci) if path[i].get("id") == first_kept), ci)
    return [e for e in path[:end] if e.get("type") != "compaction"]


def build_session_context(path: Sequence[Entry]) -> list[Message]:
    """Pi's ``buildSessionContext(...).messages``: the agent messages (system messages included,
    before ``convert_to_llm``) for a path."""
    return [m for p in project(path) for m in p.messages]


def edits_by_target(path: Sequence[Entry]) -> dict[str, Entry]:
    """The latest context edit per target among the selected entries of ``path``."""
    return {e["targetId"]: e for e in (path[i] for i in selected_indexes(path))
            if e.get("type") == "context_edit" and isinstance(e.get("targetId"), str)}


Estimate = Callable[[Entry, Message], int]
Fresh = Callable[[Message], int]


@dataclass
class ContextState:
    """The context of one leaf, kept up to date as entries are appended under it.

    ``agent_messages`` / ``llm_messages`` / ``estimates`` / ``entry_ids`` hold the conversation
    (system messages aside, in ``system_messages``, since they are prompt state the request sends
    separately); ``projection`` holds every selected entry with its messages, for the planner."""

    leaf_id: str | None
    entry_ids: list[str] = field(default_factory=list)
    agent_messages: list[Message] = field(default_factory=list)
    llm_messages: list[Message] = field(default_factory=list)
    llm_entry_ids: list[str] = field(default_factory=list)  # the entry of each of llm_messages
    estimates: list[int] = field(default_factory=list)
    projection: list[Projected] = field(default_factory=list)
    entry_tokens: list[int] = field(default_factory=list)  # per projected entry: its messages' estimates
    message_start: list[int] = field(default_factory=list)  # per projected entry: its first index in agent_messages
    cut_points: list[int] = field(default_factory=list)  # projected indexes a compaction may cut at
    # (projected index, file operations) of the entries with some, scanned up to ``ops_scanned``
    file_ops: list[tuple[int, Any]] = field(default_factory=list)
    ops_scanned: int = 0
    # (position in agent_messages it comes before, the message, its estimate)
    system_messages: list[tuple[int, Message, int]] = field(default_factory=list)
    # Usage recorded before the latest compaction or context edit describes another context: ignore it.
    usage_floor: int = 0
    compaction_index: int = -1  # path index of the latest compaction (-1: none)
    last_usage_index: int = -1
    trailing: int = 0
    system_trailing: int = 0  # estimates of system messages after the last usage
    path_length: int = 0
    # estimates a message that is not its entry's own (an edited one, a compaction's checkpoint)
    fresh: Fresh | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, path: Sequence[Entry], leaf_id: str | None, estimate: Estimate,
              fresh: Fresh | None = None) -> ContextState:
        state = cls(leaf_id=leaf_id, compaction_index=latest_compaction_index(path),
                    fresh=fresh or Chars4Estimator().estimate)
        invalidating = max((i for i in range(len(path)) if path[i].get("type") in _INVALIDATING), default=-1)
        for projected in project(path):
            if projected.path_index <= invalidating:
                state.usage_floor = len(state.agent_messages) + len(projected.messages)
            state._add(projected, estimate)
        state.path_length = len(path)
        return state

    def extend(self, entry: Entry, estimate: Estimate) -> None:
        """Append ``entry`` (a child of the leaf that is neither a compaction nor a context edit)."""
        self._add(Projected(entry, entry_messages(entry), self.path_length), estimate)
        self.path_length += 1
        self.leaf_id = entry["id"]

    def _estimate(self, projected: Projected, message: Message, estimate: Estimate) -> int:
        own = not projected.edited and (projected.entry.get("type") != "compaction"
                                        or message.get("role") == "compactionSummary")
        if own:
            return estimate(projected.entry, message)
        return (self.fresh or Chars4Estimator().estimate)(message)

    def _add(self, projected: Projected, estimate: Estimate) -> None:
        if projected.entry.get("type") != "compaction" and any(m.get("role") in CUT_ROLES for m in projected.messages):
            self.cut_points.append(len(self.projection))
        self.message_start.append(len(self.agent_messages))
        self.projection.append(projected)
        entry = projected.entry
        weight = 0
        for message in projected.messages:
            tokens = self._estimate(projected, message, estimate)
            weight += tokens
            if message.get("role") == "system":
                self.system_messages.append((len(self.agent_messages), message, tokens))
                self.system_trailing += tokens
                continue
            index = len(self.agent_messages)
            self.entry_ids.append(entry["id"])
            self.agent_messages.append(message)
            llm = to_llm_message(message)
            if llm is not None:
                self.llm_messages.append(llm)
                self.llm_entry_ids.append(entry["id"])
            self.estimates.append(tokens)
            if index >= self.usage_floor and is_valid_usage_message(message):
                self.last_usage_index = index
                self.trailing = 0
                self.system_trailing = 0
            else:
                self.trailing += tokens
        self.entry_tokens.append(weight)

    def message_range(self, a: int, b: int) -> tuple[int, int]:
        """The agent_messages indexes the projected entries ``a:b`` contribute."""
        end = self.message_start[b] if b < len(self.message_start) else len(self.agent_messages)
        return (self.message_start[a] if a < len(self.message_start) else len(self.agent_messages)), end

    def weights(self) -> list[int]:
        """The estimate of what each projected entry contributes (the cut-point walk's weights)."""
        return self.entry_tokens

    def current_system_message(self) -> Message | None:
        """Every system message of the context replayed into one (Pi's ``getCurrentSystemMessage``)."""
        return current_system_message([m for _, m, _ in self.system_messages])

    def messages(self) -> list[Message]:
        """The projected messages in order, system messages in their places (Pi's
        ``buildSessionContext(...).messages``)."""
        return [m for p in self.projection for m in p.messages]

    def context_tokens(self) -> int:
        """Pi 1.6's ``estimateProjectedContextTokens``: the last valid usage (newer than the latest
        compaction and context edit) plus estimates after it; else everything estimated, with the
        replayed system message counted once."""
        if self.last_usage_index >= 0:
            usage: Any = self.agent_messages[self.last_usage_index].get("usage")
            return usage_tokens(usage) + self.trailing + self.system_trailing
        return self.trailing + self.system_tokens()

    def system_tokens(self) -> int:
        """The estimate of the replayed system message (0 without one)."""
        if not self.system_messages:
            return 0
        if len(self.system_messages) == 1:
            return self.system_messages[0][2]
        current = self.current_system_message()
        return (self.fresh or Chars4Estimator().estimate)(current) if current is not None else 0


__all__ = ["ContextState", "Projected", "apply_edit", "build_session_context", "context_entries", "context_message",
           "edits_by_target", "latest_compaction_index", "project", "selected_indexes", "summarized_away"]
