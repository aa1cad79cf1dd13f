"""Pinned instructions: Pi ``custom`` entries in the session.

``%agent pin TEXT`` appends ``{"type": "custom", "customType": "ipyagent.pin", "data": {"text": …}}``;
``%agent unpin N`` appends ``{"customType": "ipyagent.unpin", "data": {"pinId": …}}``. Custom
entries produce no message, so compaction never summarises them; they live in the session, so they
survive a kernel restart, an export to Pi's JSONL and a replay. The pins in force are folded from
all of the session's entries in the order they were appended, whatever the branch (re-running an
earlier ``%%agent`` cell forks the conversation, not the user's standing instructions), and go into
the system prompt, each cut at 32 KB as instruction files are (a pin stored in a notebook is as
untrusted as the notebook). :func:`pins_note` names them, for the resume note and ``%agent status``:
a pin that arrives with a notebook never applies unseen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ipyagent.agent.prompt.instructions import MAX_FILE_BYTES
from ipyagent.shapes import Entry
from ipyagent.text import one_line

PIN_TYPE = "ipyagent.pin"
UNPIN_TYPE = "ipyagent.unpin"
MAX_PIN_BYTES = MAX_FILE_BYTES  # each pin, in the system prompt: 32 KB of UTF-8


@dataclass(frozen=True)
class Pin:
    id: str  # the pin entry's id
    text: str

    @property
    def cut(self) -> bool:
        """Whether the system prompt gets only the first :data:`MAX_PIN_BYTES` of it."""
        return len(self.text) > MAX_PIN_BYTES // 4 and len(self.text.encode("utf-8", "surrogatepass")) > MAX_PIN_BYTES

    @property
    def prompt_text(self) -> str:
        """The text the system prompt gets: the pin, cut at :data:`MAX_PIN_BYTES` (whole characters)."""
        if not self.cut:
            return self.text
        return self.text.encode("utf-8", "surrogatepass")[:MAX_PIN_BYTES].decode("utf-8", "ignore")


def pin_entry(text: str) -> Entry:
    return {"type": "custom", "customType": PIN_TYPE, "data": {"text": text}}


def unpin_entry(pin_id: str) -> Entry:
    return {"type": "custom", "customType": UNPIN_TYPE, "data": {"pinId": pin_id}}


def active_pins(entries: Iterable[Entry]) -> list[Pin]:
    """The pins in force after ``entries`` (the session's, in append order), oldest first; a text
    pinned twice counts once, and entries of the wrong shape are ignored."""
    pins: dict[str, Pin] = {}
    for entry in entries:
        if entry.get("type") != "custom":
            continue
        data = entry.get("data")
        if not isinstance(data, dict):
            continue
        kind = entry.get("customType")
        if kind == PIN_TYPE and isinstance(data.get("text"), str) and data["text"].strip():
            if all(p.text != data["text"] for p in pins.values()):
                pins[entry["id"]] = Pin(entry["id"], data["text"])
        elif kind == UNPIN_TYPE and isinstance(data.get("pinId"), str):
            pins.pop(data["pinId"], None)
    return list(pins.values())


def _shown(text: str, limit: int) -> str:
    # one line, control characters (terminal escapes in a stored pin) shown as "?"
    return one_line("".join(ch if ch.isprintable() or ch.isspace() else "?" for ch in text[:limit * 4]), limit)


def pins_note(pins: Sequence[Pin], where: str = "", limit: int = 60) -> str:
    """The pins in force, named and shortened, and which are cut: ``2 pins from the notebook, in
    the system prompt of every request: 1. Use polars…; 2. …`` (``where``: " from the notebook")."""
    if not pins:
        return f"no pins{where}"
    count = f"{len(pins)} pin{'s' if len(pins) != 1 else ''}{where}"
    listed = "; ".join(f"{n}. {_shown(pin.text, limit)}" for n, pin in enumerate(pins, 1))
    cut = [f"#{n} ({len(pin.text):,} characters)" for n, pin in enumerate(pins, 1) if pin.cut]
    tail = (f" — cut to {MAX_PIN_BYTES // 1024} KB in the system prompt: {', '.join(cut)}" if cut else "")
    return f"{count}, in the system prompt of every request: {listed}{tail}"
