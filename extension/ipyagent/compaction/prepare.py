"""``prepare_compaction``: everything a compaction needs, computed without calling a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ipyagent.compaction.cut_point import Estimate, cut_at, find_cut_point
from ipyagent.compaction.file_ops import FileOperation, FileOps, file_operations
from ipyagent.compaction.ledger import Ledger, build_ledger
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.session.context import build_session_context, context_message, latest_compaction_index
from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message
from ipyagent.session.tokens import Chars4Estimator, Estimator, estimate_context_tokens


@dataclass
class CompactionPlan:
    """Pi's ``CompactionPreparation``, plus the indexes a teaching view wants to draw."""

    first_kept_entry_id: str
    messages_to_summarize: list[Message]
    turn_prefix_messages: list[Message]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOps
    settings: CompactionSettings
    boundary_start: int = 0  # path index where summarising starts
    first_kept_index: int = 0
    turn_start_index: int = -1
    summarized_entry_ids: list[str] = field(default_factory=list)
    turn_prefix_entry_ids: list[str] = field(default_factory=list)
    # the previous compaction's details when it was not written by a hook (its ledger carries over)
    previous_details: dict[str, Any] | None = None

    def ledger(self) -> Ledger:
        """The artifact ledger of this compaction (``compaction/ledger.py``): the previous one's,
        then what the summarised messages and the turn prefix did. Computed on demand, so
        planning (dry runs, the explorer) never pays for reading the python calls."""
        return build_ledger(self.messages_to_summarize + self.turn_prefix_messages,
                            self.summarized_entry_ids + self.turn_prefix_entry_ids, self.previous_details)

    def to_summary_dict(self) -> dict[str, Any]:
        """The plan as ``ipyagent compact --dry-run --json`` prints it."""
        read_files, modified_files = self.file_ops.lists()
        return {
            "first_kept_entry_id": self.first_kept_entry_id,
            "is_split_turn": self.is_split_turn,
            "tokens_before": self.tokens_before,
            "messages_to_summarize": len(self.messages_to_summarize),
            "turn_prefix_messages": len(self.turn_prefix_messages),
            "read_files": read_files,
            "modified_files": modified_files,
            "previous_summary": self.previous_summary is not None,
        }


def summarizing_boundary(path: Sequence[Entry], previous_index: int) -> int:
    """Where the next compaction starts: at the previous compaction's first kept entry.

    Pi 0.58 started after the previous compaction entry, so the messages that compaction had
    kept were neither summarised nor kept by the next one (Pi #2608).
    """
    if previous_index < 0:
        return 0
    first_kept = path[previous_index].get("firstKeptEntryId")
    for i in range(previous_index):
        if path[i].get("id") == first_kept:
            return i
    return previous_index + 1


def _summarized_message(entry: Entry) -> Message | None:
    # Compaction entries: the previous summary goes separately. An empty branch summary adds
    # nothing to the context, but Pi still counts it among the messages to summarise.
    if entry.get("type") == "branch_summary":
        return {"role": "branchSummary", "summary": entry.get("summary") or "", "fromId": entry.get("fromId"),
                "timestamp": 0}
    return context_message(entry)


def _messages(entries: Sequence[Entry]) -> tuple[list[Message], list[str]]:
    messages, ids = [], []
    for entry in entries:
        # message entries are nearly all of a path: take them without the general dispatch
        message = entry["message"] if entry["type"] == "message" else _summarized_message(entry)
        if message is not None:
            messages.append(message)
            ids.append(entry["id"])
    return messages, ids


def _add_file_operations(file_ops: FileOps, entries: Sequence[Entry],
                         cache: dict[str, tuple[FileOperation, ...]] | None) -> None:
    cache = {} if cache is None else cache
    cached = cache.get
    for entry in entries:
        if entry["type"] == "message":
            operations = cached(entry["id"])
            if operations is None:
                operations = cache[entry["id"]] = file_operations(entry["message"])
            if operations:
                file_ops.add(operations)


def prepare_compaction(path: Sequence[Entry], settings: CompactionSettings | None = None, *,
                       estimator: Estimator | None = None, entry_estimate: Estimate | None = None,
                       tokens_before: int | None = None,
                       operations_cache: dict[str, tuple[FileOperation, ...]] | None = None,
                       previous_index: int | None = None,
                       first_kept_entry_id: str | None = None) -> CompactionPlan | None:
    """The plan for compacting ``path`` (root→leaf), or None when there is nothing to summarise.

    ``first_kept_entry_id`` fixes the cut (a replay reproducing a recorded compaction) instead of
    finding it from ``keep_recent_tokens``; None is returned when that entry is not on the part
    of the path this compaction may summarise.

    ``entry_estimate`` lets a session reuse its per-entry cache; ``tokens_before`` its context
    tokens; ``operations_cache`` (entry id → file operations) its scan of the tool calls;
    ``previous_index`` the path index of the latest compaction (-1: none). Without them both are
    computed from ``estimator`` (chars/4 by default).
    """
    settings = settings or CompactionSettings()
    if not path or path[-1].get("type") == "compaction":
        return None
    estimator = estimator or Chars4Estimator()
    estimate = entry_estimate or (lambda entry, message: estimator.estimate(message))

    if previous_index is None:
        previous_index = latest_compaction_index(path)
    start = summarizing_boundary(path, previous_index)
    if first_kept_entry_id is None:
        cut = find_cut_point(path, start, len(path), settings.keep_recent_tokens, estimate)
    else:
        index = next((i for i in range(start, len(path)) if path[i].get("id") == first_kept_entry_id), None)
        if index is None:
            return None
        cut = cut_at(path, start, index)
    first_kept = path[cut.first_kept_index]
    if not isinstance(first_kept.get("id"), str):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    to_summarize, summarized_ids = _messages(path[start:history_end])
    prefix, prefix_ids = _messages(path[cut.turn_start_index:cut.first_kept_index]) if cut.is_split_turn else ([], [])
    if not to_summarize and not prefix:
        return None  # Pi 0.58 would ask the model to summarise an empty conversation
    if tokens_before is None:
        tokens_before = estimate_context_tokens(build_session_context(path), estimator)
    previous = path[previous_index] if previous_index >= 0 else None
    file_ops = FileOps()
    previous_details = None
    if previous is not None and not previous.get("fromHook"):
        file_ops.add_details(previous.get("details"))
        previous_details = previous.get("details") if isinstance(previous.get("details"), dict) else None
    _add_file_operations(file_ops, path[start:history_end], operations_cache)
    if cut.is_split_turn:
        _add_file_operations(file_ops, path[cut.turn_start_index:cut.first_kept_index], operations_cache)
    return CompactionPlan(
        first_kept_entry_id=first_kept["id"],
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous.get("summary") if previous is not None else None,
        file_ops=file_ops,
        settings=settings,
        boundary_start=start,
        first_kept_index=cut.first_kept_index,
        turn_start_index=cut.turn_start_index,
        summarized_entry_ids=summarized_ids,
        turn_prefix_entry_ids=prefix_ids,
        previous_details=previous_details,
    )
