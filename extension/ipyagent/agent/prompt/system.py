"""The system prompt, composed: the base prompt, the environment (notebook path, working directory,
Python version), the project's instruction files, and the pinned instructions.

Everything here is re-sent with every request and never enters the summarised history, so it
survives every compaction. ``%agent context`` shows each part with its token count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ipyagent.agent.prompt.notebook_context import SystemContext
from ipyagent.agent.prompt.pinned import MAX_PIN_BYTES, Pin
from ipyagent.agent.skills.skill_tool import skills_text


@dataclass(frozen=True)
class PromptPart:
    label: str
    text: str


def environment_text(context: SystemContext) -> str:
    lines = ["## Environment",
             f"- Notebook: {context.notebook_path or 'unknown (not found from the kernel)'}",
             f"- Working directory: {context.cwd or 'unknown'}"]
    if context.python_version:
        lines.append(f"- Python: {context.python_version} (the kernel's)")
    return "\n".join(lines)


def instructions_text(context: SystemContext) -> str:
    """The instruction files, outermost first, each under its path."""
    out = ["## Project instructions",
           ("From the instruction files in the notebook's folder and its parents; the later, nearer "
            "files are the more specific.")]
    for file in context.files:
        out += ["", f"### {file.path}", file.text]
        if file.truncated:
            out.append(f"[ipyagent: {file.path} was cut at 32 KB]")
    return "\n".join(out)


def pins_text(pins: Sequence[Pin]) -> str:
    lines = ["## Pinned instructions",
             "The user pinned these with %agent pin; they hold for the whole session."]
    for n, pin in enumerate(pins, 1):
        lines.append(f"{n}. {pin.prompt_text}")
        if pin.cut:
            lines.append(f"[ipyagent: pin {n} was cut at {MAX_PIN_BYTES // 1024} KB]")
    return "\n".join(lines)


def system_prompt_parts(base: str, context: SystemContext | None = None,
                        pins: Sequence[Pin] = ()) -> list[PromptPart]:
    """The parts in the order they are sent; empty parts are left out."""
    parts = [PromptPart("base prompt", base)] if base else []
    if context is not None:
        parts.append(PromptPart("environment", environment_text(context)))
        if context.files:
            names = ", ".join(f.path for f in context.files)
            parts.append(PromptPart(f"instruction files ({names})", instructions_text(context)))
        if context.skills:
            parts.append(PromptPart(f"skills ({len(context.skills)})", skills_text(context.skills)))
    if pins:
        parts.append(PromptPart(f"pinned instructions ({len(pins)})", pins_text(pins)))
    return parts


def compose_system_prompt(parts: Sequence[PromptPart]) -> str:
    return "\n\n".join(p.text for p in parts if p.text)
