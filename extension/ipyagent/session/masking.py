"""Masking: the cheap way to forget. Old tool results are hidden behind a short placeholder
through Pi 1.6's own ``context_edit`` entries, so the calls stay, the bulky results leave the
context, no model is called, and Pi reads the result the same way.

The entry itself is never changed: ``recall(entry_id)`` returns it in full, and an unmask is one
more edit that gives the entry its own content back (the latest edit of a target wins).
"""

from __future__ import annotations

from collections.abc import Sequence

from ipyagent.session.context import Projected
from ipyagent.session.entries import Entry, context_edit_entry
from ipyagent.session.messages import text_block, text_of
from ipyagent.text import js_length

PLACEHOLDER = "[tool result hidden, {chars:,} chars: recall({entry_id!r}) returns it]"
TURN_START_ROLES = ("user", "bashExecution", "custom")


def placeholder(entry: Entry) -> str:
    """What the model sees instead of a masked tool result."""
    chars = js_length(text_of(entry["message"].get("content"), "\n"))
    return PLACEHOLDER.format(chars=chars, entry_id=entry["id"])


def is_tool_result(entry: Entry) -> bool:
    return entry.get("type") == "message" and entry["message"].get("role") == "toolResult"


def is_masked(entry: Entry, edit: Entry | None) -> bool:
    """Whether the latest edit of ``entry`` hides or replaces it (an unmask restores its own content)."""
    if edit is None:
        return False
    replacement = edit.get("replacement")
    if not isinstance(replacement, dict):
        return True
    own = entry["message"].get("content") if entry.get("type") == "message" else entry.get("content")
    return bool(replacement.get("content") != own)


def mask_edit(entry: Entry) -> Entry:
    """The ``context_edit`` that masks a tool result: its content becomes the placeholder (not
    ``null``: the call it answers must keep a result, or providers reject the request)."""
    return context_edit_entry(entry["id"], {"content": [text_block(placeholder(entry))]})


def unmask_edit(entry: Entry) -> Entry:
    """The ``context_edit`` that gives an entry its own content back."""
    own = entry["message"].get("content") if entry.get("type") == "message" else entry.get("content")
    return context_edit_entry(entry["id"], {"content": own})


def masked_entries(projection: Sequence[Projected], edits: dict[str, Entry]) -> list[Entry]:
    """The entries of the context that an edit hides or replaces, oldest first."""
    return [p.entry for p in projection if p.entry.get("type") in ("message", "custom_message")
            and is_masked(p.entry, edits.get(p.entry.get("id", "")))]


def turn_starts(projection: Sequence[Projected]) -> list[int]:
    """Where each turn of the context begins: at a prompt, a ``!command`` or an extension message —
    and, when a compaction kept the end of a turn whose prompt it summarised (a split turn), at
    the first entry after the summary, for that remainder is a turn too."""
    starts = [i for i, p in enumerate(projection) if p.entry.get("type") != "compaction"
              and any(m.get("role") in TURN_START_ROLES for m in p.messages)]
    first = next((i for i, p in enumerate(projection) if p.entry.get("type") != "compaction" and p.messages), None)
    if first is not None and (not starts or starts[0] > first):
        starts.insert(0, first)
    return starts


def tool_results_before(projection: Sequence[Projected], edits: dict[str, Entry], recent_turns: int) -> list[Entry]:
    """The tool results in the context that are not masked yet and lie before the last
    ``recent_turns`` turns (:func:`turn_starts`): ``1`` keeps the results of the latest turn only,
    ``0`` masks them all."""
    starts = turn_starts(projection)
    if len(starts) <= recent_turns:
        return []
    end = starts[len(starts) - recent_turns] if recent_turns > 0 else len(projection)
    return [p.entry for p in projection[:end] if is_tool_result(p.entry) and p.messages
            and not is_masked(p.entry, edits.get(p.entry["id"]))]


def masked_chars(entries: Sequence[Entry]) -> int:
    return sum(js_length(text_of(e["message"].get("content"), "\n")) for e in entries if is_tool_result(e))


__all__ = ["PLACEHOLDER", "is_masked", "is_tool_result", "mask_edit", "masked_chars", "masked_entries", "placeholder",
           "tool_results_before", "turn_starts", "unmask_edit"]
