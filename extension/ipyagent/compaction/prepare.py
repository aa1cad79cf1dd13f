"""``prepare_compaction``: everything a compaction needs, computed without calling a model.

Pi 1.6's ``prepareCompaction``: it works on the projection of the path (``session/context.py``),
so context edits apply (a hidden tool result is neither kept nor summarised, a replaced one is
summarised as replaced), system messages are never summarised (the compaction records them as its
checkpoint), and the previous compaction's kept tail is where summarising starts.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ipyagent.compaction.cut_point import CutPoint, cut_at, find_cut_point
from ipyagent.compaction.file_ops import FileOperation, FileOps, file_operations
from ipyagent.compaction.ledger import Ledger, build_ledger
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.session.context import ContextState, latest_compaction_index
from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message
from ipyagent.session.tokens import Chars4Estimator, Estimator
from ipyagent.shapes import SummaryDetails


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
    first_kept_index: int = 0  # path index of the first kept entry
    turn_start_index: int = -1  # path index of the split turn's start (-1: not split)
    summarized_entry_ids: list[str] = field(default_factory=list)
    turn_prefix_entry_ids: list[str] = field(default_factory=list)
    # the previous compaction's details when it was not written by a hook (its ledger carries over)
    previous_details: SummaryDetails | None = None

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
    """The path index where the next compaction starts: the previous compaction's first kept entry
    (searched before it), else — its id is elsewhere, or it kept nothing (retain-none: its own
    id) — the entry after it."""
    if previous_index < 0:
        return 0
    first_kept = path[previous_index].get("firstKeptEntryId")
    for i in range(previous_index):
        if path[i].get("id") == first_kept:
            return i
    return previous_index + 1


def _summarized(state: ContextState, a: int, b: int) -> tuple[list[Message], list[str]]:
    """The messages the projected entries ``a:b`` give the summariser, with the id of the entry of
    each: the state's conversation messages (system messages are aside; an older compaction
    inside the range contributes none)."""
    if b <= a:
        return [], []
    lo, hi = state.message_range(a, b)
    return state.agent_messages[lo:hi], state.entry_ids[lo:hi]


def _scan_file_operations(state: ContextState, cache: dict[str, tuple[FileOperation, ...]] | None) -> None:
    """Extend the state's index of the projected entries that have file operations (each entry is
    scanned once per projection; ``cache`` keeps an unedited entry's across rebuilds)."""
    cache = {} if cache is None else cache
    projection = state.projection
    for i in range(state.ops_scanned, len(projection)):
        p = projection[i]
        if p.entry.get("type") != "message" or not p.messages:
            continue
        operations: tuple[FileOperation, ...] | None
        if p.edited:  # the summariser sees the replacement: its calls, not the original's
            operations = tuple(op for m in p.messages for op in file_operations(m))
        else:
            operations = cache.get(p.entry["id"])
            if operations is None:
                operations = cache[p.entry["id"]] = file_operations(p.messages[0])
        if operations:
            state.file_ops.append((i, operations))
    state.ops_scanned = len(projection)


def _add_file_operations(file_ops: FileOps, state: ContextState, a: int, b: int) -> None:
    """The file operations of the projected entries ``a:b``."""
    found = state.file_ops
    lo = bisect.bisect_left(found, (a,))
    hi = bisect.bisect_left(found, (b,))
    for _, operations in found[lo:hi]:
        file_ops.add(operations)


def _cut(state: ContextState, start: int, settings: CompactionSettings, first_kept_entry_id: str | None
         ) -> CutPoint | None:
    """Where to cut the projection after ``start``: found from ``keep_recent_tokens``, or at the
    entry ``first_kept_entry_id`` (None when it is not there)."""
    projection = state.projection
    if first_kept_entry_id is None:
        return find_cut_point(projection, start, len(projection), settings.keep_recent, state.weights().__getitem__,
                              state.cut_points)
    index = next((i for i in range(start, len(projection)) if projection[i].entry.get("id") == first_kept_entry_id),
                 None)
    return cut_at(projection, start, index) if index is not None else None


def prepare_compaction(path: Sequence[Entry], settings: CompactionSettings | None = None, *,
                       estimator: Estimator | None = None, state: ContextState | None = None,
                       operations_cache: dict[str, tuple[FileOperation, ...]] | None = None,
                       first_kept_entry_id: str | None = None) -> CompactionPlan | None:
    """The plan for compacting ``path`` (root→leaf), or None when there is nothing to summarise.

    ``first_kept_entry_id`` fixes the cut (a replay reproducing a recorded compaction) instead of
    finding it from ``keep_recent_tokens``; None is returned when that entry is not on the part
    of the path this compaction may summarise.

    ``state`` lets a session reuse its context (the projection, its estimates and context
    tokens); ``operations_cache`` (entry id → file operations) its scan of the tool calls.
    Without ``state`` the projection is built from ``path`` with ``estimator`` (chars/4 by default).
    """
    settings = settings or CompactionSettings()
    if not path or path[-1].get("type") == "compaction":
        return None
    if state is None:
        estimate = (estimator or Chars4Estimator()).estimate
        state = ContextState.build(path, None, lambda entry, message: estimate(message), estimate)
    projection = state.projection
    start = 1 if projection and projection[0].entry.get("type") == "compaction" else 0
    cut = _cut(state, start, settings, first_kept_entry_id)
    if cut is None or cut.first_kept_index >= len(projection):
        return None
    first_kept = projection[cut.first_kept_index].entry
    if not isinstance(first_kept.get("id"), str):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    to_summarize, summarized_ids = _summarized(state, start, history_end)
    prefix_start = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    prefix, prefix_ids = _summarized(state, prefix_start, cut.first_kept_index)
    if not to_summarize and not prefix:
        return None  # nothing to summarise: no compaction (Pi 0.73.1 asked for an empty summary)
    previous = projection[0].entry if start else None
    file_ops = FileOps()
    previous_details = None
    if previous is not None and not previous.get("fromHook"):
        file_ops.add_details(previous.get("details"))
        previous_details = previous.get("details") if isinstance(previous.get("details"), dict) else None
    _scan_file_operations(state, operations_cache)
    _add_file_operations(file_ops, state, start, history_end)
    _add_file_operations(file_ops, state, prefix_start, cut.first_kept_index)
    return CompactionPlan(
        first_kept_entry_id=first_kept["id"],
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=state.context_tokens(),
        previous_summary=previous.get("summary") if previous is not None else None,
        file_ops=file_ops,
        settings=settings,
        boundary_start=projection[start].path_index if start < len(projection) else len(path),
        first_kept_index=projection[cut.first_kept_index].path_index,
        turn_start_index=projection[cut.turn_start_index].path_index if cut.is_split_turn else -1,
        summarized_entry_ids=summarized_ids,
        turn_prefix_entry_ids=prefix_ids,
        previous_details=previous_details,
    )


__all__ = ["CompactionPlan", "latest_compaction_index", "prepare_compaction", "summarizing_boundary"]
