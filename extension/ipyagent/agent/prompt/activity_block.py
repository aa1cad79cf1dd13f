"""The notebook-activity block: a pure function from :class:`NotebookActivity` to the text that
goes into the user message, before the prompt.

The block stays within ``max_tokens`` (chars/4, the session's own estimate): the newest cells come
first and in full (each part clipped), older ones shrink to one line, the oldest are left out —
and the block says so. Its cost depends on the cap, not on how many cells ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ipyagent.agent.prompt.notebook_context import CellError, CellRecord, NamespaceChange, NotebookActivity
from ipyagent.text import clip as text_clip

CHARS_PER_TOKEN = 4
OPEN = "<notebook-activity>"
CLOSE = "</notebook-activity>"
HEADER = ("What happened in the notebook since the previous prompt, newest cell first "
          "(recorded by ipyagent, not typed by the user):")
SHORT_HEADING = "Older cells, one line each:"
NOTE_RESERVE = 240  # room kept for the closing note that says what was shortened
# per-part limits of a cell shown in full (characters), before any scaling down
SOURCE_CHARS, VALUE_CHARS, OUTPUT_CHARS, MESSAGE_CHARS = 1500, 600, 800, 300
_BACKTICKS = re.compile(r"`{3,}")


def clip(text: str, limit: int) -> str:
    """``text`` within about ``limit`` characters: its head and tail, and how much was cut."""
    kept = max(limit, 40)
    head, tail, hidden = text_clip(text, limit, head=kept * 2 // 3, tail=kept // 3)
    return f"{head}\n[… {hidden:,} characters cut …]\n{tail}" if hidden else text


def fence(text: str, lang: str = "") -> str:
    """``text`` in a code fence longer than any backtick run inside it."""
    runs = [len(m.group()) for m in _BACKTICKS.finditer(text)]
    ticks = "`" * max([3, *(n + 1 for n in runs)])
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def format_error(error: CellError, *, message_chars: int = MESSAGE_CHARS) -> str:
    lines = [clip(error.line, message_chars)]
    if error.frames:
        lines.append("Traceback (last frames):")
        lines += [frame.rstrip() for frame in error.frames]
    return "\n".join(lines)


def _label(count: int | None) -> str:
    return f"[{count}]" if count is not None else "[ ]"


def full_cell(cell: CellRecord, scale: float = 1.0) -> str:
    def limit(chars: int) -> int:
        return max(60, int(chars * scale))

    parts = [f"In {_label(cell.execution_count)}:", fence(clip(cell.source, limit(SOURCE_CHARS)), "python")]
    if cell.value is not None:
        value = clip(cell.value, limit(VALUE_CHARS))
        parts.append(f"Out{_label(cell.execution_count)}: {value}" if "\n" not in value
                     else f"Out{_label(cell.execution_count)}:\n{fence(value)}")
    if cell.output.strip():
        parts += ["Printed and displayed:", fence(clip(cell.output, limit(OUTPUT_CHARS)))]
    if cell.error is not None:
        parts.append("Error: " + format_error(cell.error, message_chars=limit(MESSAGE_CHARS)))
    return "\n".join(parts)


def short_cell(cell: CellRecord) -> str:
    lines = cell.source.strip().splitlines() or [""]
    first = clip(lines[0], 80).replace("\n", " ")
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if cell.error is not None:
        outcome = f" → {clip(cell.error.line, 100)}".replace("\n", " ")
    elif cell.value is not None:
        outcome = f" → Out: {clip(cell.value.strip().splitlines()[0] if cell.value.strip() else '', 60)}"
    elif cell.output.strip():
        outcome = f" → printed {len(cell.output.strip().splitlines())} lines"
    else:
        outcome = ""
    return f"In {_label(cell.execution_count)}: {first}{more}{outcome}"


def _change_text(change: NamespaceChange) -> str:
    facts = ", ".join(x for x in (change.type_name, change.size) if x)
    return f"{change.name} ({facts})" if facts else change.name


def namespace_text(changes: Sequence[NamespaceChange], limit: int) -> str:
    """One line per kind of change, within ``limit`` characters ("… and N more")."""
    if not changes:
        return ""
    lines = ["Namespace changes:"]
    used = len(lines[0])
    left_out = 0
    for kind in ("added", "rebound", "removed"):
        names = [c for c in changes if c.change == kind]
        if not names:
            continue
        shown: list[str] = []
        for change in names:
            text = _change_text(change) if kind != "removed" else change.name
            if used + len(text) + 20 > limit:
                left_out += len(names) - len(shown)
                break
            shown.append(text)
            used += len(text) + 2
        if shown:
            lines.append(f"- {kind}: {', '.join(shown)}")
    if left_out:
        lines.append(f"- … and {left_out} more")
    return "\n".join(lines)


def format_activity(activity: NotebookActivity, max_tokens: int) -> str:
    """The block for ``activity`` within ``max_tokens``; empty when nothing happened."""
    if not activity or max_tokens <= 0:
        return ""
    budget = max_tokens * CHARS_PER_TOKEN
    namespace = namespace_text(activity.namespace, budget // 4)
    pieces: list[str] = [OPEN, HEADER]
    if namespace:
        pieces.append(namespace)
    room = budget - sum(len(p) + 1 for p in pieces) - len(CLOSE) - NOTE_RESERVE
    shortened = omitted = 0
    full = True
    for index, cell in enumerate(activity.cells):
        text = ""
        if full:
            for scale in (1.0, 0.5, 0.25) if index == 0 else (1.0,):
                candidate = full_cell(cell, scale)
                if len(candidate) + 2 <= room:
                    text = candidate
                    break
            if not text:
                full = False
        if not full:
            candidate = short_cell(cell)
            heading = "" if shortened else "\n" + SHORT_HEADING + "\n"
            if len(heading) + len(candidate) + 1 > room:
                omitted = len(activity.cells) - index
                break
            text = heading + candidate
            shortened += 1
        pieces.append(("\n" if full else "") + text)
        room -= len(text) + 2
    omitted += activity.earlier
    notes = []
    if shortened:
        notes.append(f"{shortened} older cell{'s' if shortened != 1 else ''} shortened to one line")
    if omitted:
        notes.append(f"{omitted} older cell{'s' if omitted != 1 else ''} left out")
    if notes:
        pieces.append(f"\n[ipyagent: {' and '.join(notes)}, to keep this block within "
                      f"~{max_tokens:,} tokens (Agent.notebook_context_tokens)]")
    pieces.append(CLOSE)
    return "\n".join(pieces)
