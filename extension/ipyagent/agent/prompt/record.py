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

:class:`SystemPromptRecord` is the loop's collaborator for all of it: it composes the prompt from
its parts, holds the text one prompt sends, records it, and says which instruction files and
skills were left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipyagent.agent.prompt.notebook_context import NotebookContext, SystemContext
from ipyagent.agent.prompt.pinned import active_pins
from ipyagent.agent.prompt.system import PromptPart, compose_system_prompt, system_prompt_parts
from ipyagent.agent.skills.skill_tool import listed_skills
from ipyagent.agent.tools.tool import ApprovalCallback
from ipyagent.session.messages import Message, current_tools, system_message, system_prompt_text
from ipyagent.shapes import Entry, ToolDeclaration

if TYPE_CHECKING:
    from ipyagent.agent.redaction import Redactor
    from ipyagent.core import Session

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


def declarations(tool_specs: Iterable[Any]) -> list[ToolDeclaration]:
    """Tool declarations as Pi records them: name, description, parameters."""
    out: list[ToolDeclaration] = []
    for spec in tool_specs:
        data = spec.to_dict() if hasattr(spec, "to_dict") else dict(spec)
        out.append({"name": data["name"], "description": data.get("description", ""),
                    "parameters": data.get("parameters", {})})
    return out


def system_patch(current: Message | None, sections: dict[str, str], tools: list[ToolDeclaration],
                 timestamp: int | None = None) -> Message | None:
    """The system message that brings ``current`` (the replayed one, None: none yet) to
    ``sections`` and ``tools``; None when nothing changed. A changed tool is removed and added
    again, as Pi's ``getToolStateChanges`` does."""
    before = (current or {}).get("sections") or {}
    patch: dict[str, str | None] = {name: text for name, text in sections.items() if before.get(name) != text}
    patch.update({name: None for name in before if name not in sections})
    declared = {t.get("name", ""): t for t in current_tools([current] if current else [])}
    wanted = {t["name"]: t for t in tools}
    added = [t for name, t in wanted.items() if declared.get(name) != t]
    removed = [name for name, t in declared.items() if wanted.get(name) != t and isinstance(name, str)]
    if not patch and not added and not removed:
        return None
    return system_message(sections=patch, tools_added=added, tools_removed=removed, timestamp=timestamp)


def is_system_entry(entry: Entry | None) -> bool:
    return entry is not None and entry.get("type") == "message" and entry["message"].get("role") == "system"


class SystemPromptRecord:
    """The system prompt of a session's requests: composed from ``base`` (``Agent.system_prompt``)
    and what ``notebook`` tells (the environment, instruction files and skills; None: outside a
    notebook) with the session's pins; held for the prompt under way; recorded in the session."""

    def __init__(self, base: str, notebook: NotebookContext | None = None) -> None:
        self.base = base
        self.notebook = notebook
        self.context: SystemContext | None = None  # the notebook's, as the last parts read it
        self.sent: str | None = None  # the text the prompt under way sends (None between prompts)

    def parts(self, session: Session, offered: Collection[str], approve: ApprovalCallback | None = None
              ) -> list[PromptPart]:
        """The system prompt's parts: base, environment, instruction files, skills (listed only
        where the ``skill`` tool is among the ``offered`` tools' names), pins (from the session)."""
        context = self.notebook.system_context(approve) if self.notebook is not None else None
        if context is not None and context.skills and "skill" not in offered:
            context = dataclasses.replace(context, skills=())
        self.context = context
        return system_prompt_parts(self.base, context, active_pins(session.entries))

    def text(self, session: Session, offered: Collection[str], approve: ApprovalCallback | None = None) -> str:
        """The system prompt the next request sends: the prompt's own during one, else composed now."""
        if self.sent is not None:
            return self.sent
        return compose_system_prompt(self.parts(session, offered, approve))

    def begin(self, session: Session, offered: Collection[str], approve: ApprovalCallback | None = None
              ) -> list[PromptPart]:
        """Compose the prompt's system prompt once; it is sent until :meth:`end`. Returns its parts."""
        parts = self.parts(session, offered, approve)
        self.sent = compose_system_prompt(parts)
        return parts

    def end(self) -> None:
        self.sent = None

    def notices(self) -> list[str]:
        """One line for each instruction file found and not read, and one for the skills left out
        of the system prompt's list (of the last parts composed)."""
        context = self.context
        if context is None:
            return []
        lines = [f"Instruction file not read: {skipped.reason}." for skipped in context.skipped]
        _, unlisted = listed_skills(context.skills)
        left_out = len(context.skipped_skills)
        if unlisted or left_out:
            over = f"{len(unlisted):,} of {len(context.skills):,} skills are over the list's cap (named in one line)"
            said = [over] if unlisted else []
            said += [f"{left_out:,} skill(s) found are not used"] if left_out else []
            lines.append(f"Skills: {'; '.join(said)}. %agent skills lists each one, and why.")
        return lines

    def record(self, session: Session, parts: Sequence[PromptPart], tool_specs: Iterable[Any], redactor: Redactor,
               append: Callable[[Message], object]) -> None:
        """Record the system prompt ``parts`` and tools as Pi 1.6's system message (the whole
        prompt first, then only what changed), through ``append``; what is sent from now on is the
        text the recorded messages replay to. A replay follows the recorded system message,
        whatever this kernel's environment is now, and records none where the recording has none."""
        if session.on_followed_path():
            recorded = session.followed_next()
            if is_system_entry(recorded):
                assert recorded is not None
                append(recorded["message"].copy())  # the same entry: the path is followed
            return
        sections = redactor.data(sections_of(parts))  # as the record stores them
        patch = system_patch(session.system_message(), sections, declarations(tool_specs))
        if patch is not None:
            append(patch)
        current = session.system_message()
        if current is not None:
            self.sent = system_prompt_text(current)
