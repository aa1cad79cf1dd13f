"""The system prompt as the session records it: Pi 1.6's system messages.

The first prompt of a session records the whole system prompt the model gets — one section per
part (``preamble`` = the base prompt, ``environment``, ``project_context`` = the instruction
files, ``pins``) and the tool declarations — as a ``role: "system"`` message. A later prompt
records only what changed: the sections replaced by name (``None`` removes one) and the tools
added or removed. Replaying the system messages of the path (``current_system_message``) gives
the prompt the model has, and that text is what ipyagent sends, so an exported session opened by
Pi 1.6 gives the model context ipyagent sent, and the notebook shows exactly what the model was
told.

Absolute paths under the user's home are written ``~/…`` (in what is recorded and so in what is
sent), as nothing else of the session names the home directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ipyagent.agent.prompt.system import PromptPart
from ipyagent.session.messages import Message, current_tools, system_message

# PromptPart labels start with these words; the section is Pi's name where Pi has one
SECTION_NAMES = {"base prompt": "preamble", "environment": "environment", "instruction files": "project_context",
                 "pinned instructions": "pins"}


def section_name(part: PromptPart) -> str:
    for start, name in SECTION_NAMES.items():
        if part.label.startswith(start):
            return name
    return part.label.split(" (")[0].replace(" ", "_")


def _home_relative(text: str, home: str) -> str:
    return text.replace(home + "/", "~/").replace(home, "~") if home and home != "/" else text


def sections_of(parts: Sequence[PromptPart], home: str | None = None) -> dict[str, str]:
    """The system prompt's parts as named sections, in the order they are sent."""
    home = str(Path.home()) if home is None else home
    return {section_name(p): _home_relative(p.text, home) for p in parts if p.text}


def declarations(tool_specs: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool declarations as Pi records them: name, description, parameters."""
    out = []
    for spec in tool_specs:
        data = spec.to_dict() if hasattr(spec, "to_dict") else dict(spec)
        out.append({"name": data["name"], "description": data.get("description", ""),
                    "parameters": data.get("parameters", {})})
    return out


def system_patch(current: Message | None, sections: dict[str, str], tools: list[dict[str, Any]],
                 timestamp: int | None = None) -> Message | None:
    """The system message that brings ``current`` (the replayed one, None: none yet) to
    ``sections`` and ``tools``; None when nothing changed. A changed tool is removed and added
    again, as Pi's ``getToolStateChanges`` does."""
    before = (current or {}).get("sections") or {}
    patch: dict[str, str | None] = {name: text for name, text in sections.items() if before.get(name) != text}
    patch.update({name: None for name in before if name not in sections})
    declared = {t.get("name"): t for t in current_tools([current] if current else [])}
    wanted = {t["name"]: t for t in tools}
    added = [t for name, t in wanted.items() if declared.get(name) != t]
    removed = [name for name, t in declared.items() if wanted.get(name) != t and isinstance(name, str)]
    if not patch and not added and not removed:
        return None
    return system_message(sections=patch, tools_added=added, tools_removed=removed, timestamp=timestamp)


def is_system_entry(entry: dict[str, Any] | None) -> bool:
    return entry is not None and entry.get("type") == "message" and entry["message"].get("role") == "system"
