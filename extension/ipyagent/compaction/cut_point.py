"""Where to cut: the first entry kept verbatim, and whether that cut splits a turn.

Pi 1.6's ``findProjectedCutPoint``, on the projection (``session/context.py``): an entry's weight
is the estimate of the messages it contributes after its context edits, so a hidden tool result
weighs nothing and a replaced one weighs its replacement. Where ipyagent differs from Pi 1.6 (the
split decided where the cut landed, docs/pi-differences.md) it says so below.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ipyagent.session.context import Projected
from ipyagent.session.entries import Entry
from ipyagent.session.messages import CUT_ROLES, TURN_START_ROLES, Message, entry_messages

Weight = Callable[[int], int]  # projected index -> the estimate of the messages it contributes


def _any_role(messages: Sequence[Message], roles: tuple[str, ...]) -> bool:
    return any(m.get("role") in roles for m in messages)


def is_cut_point(entry: Entry) -> bool:
    """A cut may land on an entry that puts a user-like or assistant message in the context (never
    a tool result, a system message, an empty branch summary or a compaction)."""
    return entry.get("type") != "compaction" and _any_role(entry_messages(entry), CUT_ROLES)


def is_turn_start(entry: Entry) -> bool:
    """A user prompt, a ``!command``, an extension message or a (non-empty) branch summary."""
    return entry.get("type") != "compaction" and _any_role(entry_messages(entry), TURN_START_ROLES)


def _cut_point(p: Projected) -> bool:
    return p.entry.get("type") != "compaction" and _any_role(p.messages, CUT_ROLES)


def _turn_start(p: Projected) -> bool:
    return p.entry.get("type") != "compaction" and _any_role(p.messages, TURN_START_ROLES)


def find_turn_start(entries: Sequence[Projected], index: int, start: int) -> int:
    """The index of the turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if _turn_start(entries[i]):
            return i
    return -1


@dataclass(frozen=True)
class CutPoint:
    first_kept_index: int
    turn_start_index: int  # -1 unless the cut splits a turn
    is_split_turn: bool


def find_cut_point(entries: Sequence[Projected], start: int, end: int, keep_recent_tokens: int,
                   weight: Weight, cut_points: Sequence[int] | None = None) -> CutPoint:
    """Keep about ``keep_recent_tokens`` of the newest context verbatim.

    Walks back from ``end`` summing the weights of the projected entries (an entry worth 0 is
    skipped); once the sum reaches the budget, the cut is the first cut point at or after that
    entry, or, when the newest tool results alone exceed the budget, the last cut point before
    them (the call that produced them). Context-invisible entries just before the cut stay with
    the tail.
    """
    if cut_points is None:
        cuts = [i for i in range(start, end) if _cut_point(entries[i])]
    else:  # the projection's cut points, kept as it grew (ContextState.cut_points)
        cuts = list(cut_points[bisect.bisect_left(cut_points, start):bisect.bisect_left(cut_points, end)])
    if not cuts:
        return CutPoint(start, -1, False)
    cut = cuts[0]
    accumulated = 0
    exceeded = False
    for i in range(end - 1, start - 1, -1):
        tokens = weight(i)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            cut = next((c for c in cuts if c >= i), cuts[-1])
            break
    if exceeded and _recovery_omission_suffix(entries[cut + 1:end]):
        cut += 1
    landing = cut
    while cut > start:
        previous = entries[cut - 1]
        if previous.entry.get("type") == "compaction" or previous.messages:
            break
        cut -= 1
    return _split_decision(entries, start, cut, landing)


def _recovery_omission_suffix(suffix: Sequence[Projected]) -> bool:
    """Pi 1.6: everything after the cut is invisible — an abandoned attempt (an assistant message
    hidden by a context edit, with its hidden results and the edits) — so the cut moves past it."""
    def visible_by_itself(p: Projected) -> bool:
        return p.entry.get("type") != "context_edit" and bool(entry_messages(p.entry))

    def omitted(p: Projected) -> bool:
        return visible_by_itself(p) and not p.messages

    omitted_ids = {p.entry.get("id") for p in suffix if omitted(p)}
    replaced_other = any(p.entry.get("type") == "context_edit" and p.entry.get("replacement") is not None
                         and p.entry.get("targetId") not in omitted_ids for p in suffix)
    if replaced_other:
        return False
    if not any(p.entry.get("type") == "message" and p.entry["message"].get("role") == "assistant" and omitted(p)
               for p in suffix):
        return False
    return all(p.entry.get("type") != "compaction" and (not visible_by_itself(p) or omitted(p)) for p in suffix)


def _split_decision(entries: Sequence[Projected], start: int, cut: int, landing: int) -> CutPoint:
    """The cut at ``cut``, and whether it splits a turn. Decided on the entry the cut landed on,
    not on a settings entry that backward inclusion moved it to: Pi 1.6 still decides there and
    finds the previous turn's prompt, a spurious split (docs/pi-differences.md #1)."""
    if _turn_start(entries[landing]):
        return CutPoint(cut, -1, False)
    turn_start = find_turn_start(entries, landing, start)
    if turn_start < 0 or turn_start >= cut:
        return CutPoint(cut, -1, False)
    return CutPoint(cut, turn_start, True)


def cut_at(entries: Sequence[Projected], start: int, first_kept_index: int) -> CutPoint:
    """The cut that keeps ``entries[first_kept_index:]`` verbatim (a cut chosen before, e.g. a
    recorded compaction's ``firstKeptEntryId``), with the split-turn decision
    :func:`find_cut_point` makes for it: on the cut point the cut landed on, the first one at or
    after ``first_kept_index`` past the invisible entries that backward inclusion kept with it."""
    landing = first_kept_index
    while landing < len(entries) - 1 and not _cut_point(entries[landing]) and not entries[landing].messages \
            and entries[landing].entry.get("type") != "compaction":
        landing += 1
    if not _cut_point(entries[landing]):
        landing = first_kept_index
    return _split_decision(entries, start, first_kept_index, landing)
