"""Where to cut: the first entry kept verbatim, and whether that cut splits a turn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ipyagent.session.context import context_message
from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message

CUT_ROLES = ("user", "assistant", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary")
TURN_START_ROLES = ("user", "bashExecution")

Estimate = Callable[[Entry, Message], int]


def is_cut_point(entry: Entry) -> bool:
    """A cut may land on any message but a tool result, or on a custom message / branch summary."""
    kind = entry.get("type")
    if kind == "message":
        return entry["message"].get("role") in CUT_ROLES
    return kind in ("custom_message", "branch_summary")


def is_turn_start(entry: Entry) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return entry["message"].get("role") in TURN_START_ROLES
    return kind in ("custom_message", "branch_summary")


def find_turn_start(path: Sequence[Entry], index: int, start: int) -> int:
    """The index of the turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if is_turn_start(path[i]):
            return i
    return -1


@dataclass(frozen=True)
class CutPoint:
    first_kept_index: int
    turn_start_index: int  # -1 unless the cut splits a turn
    is_split_turn: bool


def find_cut_point(path: Sequence[Entry], start: int, end: int, keep_recent_tokens: int,
                   estimate: Estimate) -> CutPoint:
    """Keep about ``keep_recent_tokens`` of the newest context verbatim (Pi's ``findCutPoint``).

    Walks back from ``end`` summing estimates of every entry that puts a message in the context
    (``custom_message`` and ``branch_summary`` count too — Pi 0.58 skipped them); once the sum
    reaches the budget, the cut is the first valid cut point at or after that entry, so a tool
    result is never separated from its call.
    """
    first_valid = next((i for i in range(start, end) if is_cut_point(path[i])), None)
    if first_valid is None:
        return CutPoint(start, -1, False)
    cut = first_valid
    accumulated = 0
    for i in range(end - 1, start - 1, -1):
        message = context_message(path[i])
        if message is None:
            continue
        accumulated += estimate(path[i], message)
        if accumulated >= keep_recent_tokens:
            after = next((j for j in range(i, end) if is_cut_point(path[j])), None)
            if after is None:
                # The newest tool results alone exceed the budget and no cut point follows them:
                # Pi keeps everything (nothing to summarise, exactly when a tool loop most needs
                # room). Cut at the last cut point before them — the call that produced them.
                after = next((j for j in range(i - 1, start - 1, -1) if is_cut_point(path[j])), cut)
            cut = after
            break
    landing = cut
    # Settings entries (model/thinking changes, labels…) just before the cut stay with the tail.
    while cut > start:
        previous = path[cut - 1]
        if previous.get("type") in ("compaction", "message"):
            break
        cut -= 1
    return _split_decision(path, start, cut, landing)


def _split_decision(path: Sequence[Entry], start: int, cut: int, landing: int) -> CutPoint:
    """The cut at ``cut``, and whether it splits a turn. Fix of Pi's spurious split: decided on
    the entry the cut landed on, not on a settings entry that backward inclusion moved it to; and
    a cut at a turn start splits nothing."""
    if is_turn_start(path[landing]):
        return CutPoint(cut, -1, False)
    turn_start = find_turn_start(path, landing, start)
    if turn_start < 0 or turn_start >= cut:
        # No turn start, or backward inclusion already moved the cut back over it (a custom
        # message or branch summary): the kept tail starts at a turn boundary, nothing is split.
        return CutPoint(cut, -1, False)
    return CutPoint(cut, turn_start, True)


def cut_at(path: Sequence[Entry], start: int, first_kept_index: int) -> CutPoint:
    """The cut that keeps ``path[first_kept_index:]`` verbatim (a cut chosen before, e.g. a
    recorded compaction's ``firstKeptEntryId``), with the split-turn decision
    :func:`find_cut_point` makes for it: on the cut point the cut landed on, the first one at or
    after ``first_kept_index`` past the settings entries that backward inclusion kept with it."""
    landing = first_kept_index
    while (landing < len(path) - 1 and not is_cut_point(path[landing])
           and path[landing].get("type") not in ("compaction", "message")):
        landing += 1
    if not is_cut_point(path[landing]):
        landing = first_kept_index
    return _split_decision(path, start, first_kept_index, landing)
