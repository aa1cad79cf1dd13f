"""Pinned instructions: Pi ``custom`` entries in the session.

``%agent pin TEXT`` appends ``{"type": "custom", "customType": "ipyagent.pin", "data": {"text": …}}``;
``%agent unpin N`` appends ``{"customType": "ipyagent.unpin", "data": {"pinId": …}}``. Custom
entries produce no message, so compaction never summarises them; they live in the session, so they
survive a kernel restart, an export to Pi's JSONL and a replay. The pins in force are folded from
all of the session's entries in the order they were appended, whatever the branch (re-running an
earlier ``%%agent`` cell forks the conversation, not the user's standing instructions), and go into
the system prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PIN_TYPE = "ipyagent.pin"
UNPIN_TYPE = "ipyagent.unpin"


@dataclass(frozen=True)
class Pin:
    id: str  # the pin entry's id
    text: str


def pin_entry(text: str) -> dict[str, Any]:
    return {"type": "custom", "customType": PIN_TYPE, "data": {"text": text}}


def unpin_entry(pin_id: str) -> dict[str, Any]:
    return {"type": "custom", "customType": UNPIN_TYPE, "data": {"pinId": pin_id}}


def active_pins(entries: Iterable[dict[str, Any]]) -> list[Pin]:
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
