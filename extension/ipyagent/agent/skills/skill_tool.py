"""The ``skill`` tool and the system prompt's list of skills (progressive disclosure: the prompt
holds each skill's name and description, the tool returns its body and its files on demand).

The tool reads the skills of the run's system prompt from ``ToolContext.skills``; ``read`` reads
inside their folders without asking (``ToolContext.readable``), where a folder is
:attr:`Skill.readable`. The list is capped (:data:`MAX_LISTED` skills, :data:`MAX_LISTING_CHARS`
characters): the skills over the cap are named in one line, and the tool loads them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ipyagent.agent.skills.discovery import Skill
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head
from ipyagent.shapes import JsonSchema

MAX_LISTED = 100  # skills in the system prompt's list
MAX_LISTING_CHARS = 16_000  # characters of the list's lines (about 4,000 tokens)
MAX_UNLISTED_CHARS = 1_500  # characters of the line that names the skills over the cap


def _line(skill: Skill) -> str:
    return f"- {skill.name}: {skill.description}"


def listed_skills(skills: Sequence[Skill]) -> tuple[list[Skill], list[Skill]]:
    """(the skills the system prompt lists, the ones over its cap), each in the given order. The
    user's own skills take their places first, so a repository's many cannot push them out."""
    taken: set[int] = set()
    chars = 0
    for index in [i for i, s in enumerate(skills) if s.origin == "user"] + \
            [i for i, s in enumerate(skills) if s.origin != "user"]:
        size = len(_line(skills[index])) + 1
        if len(taken) < MAX_LISTED and chars + size <= MAX_LISTING_CHARS:
            taken.add(index)
            chars += size
    return ([s for i, s in enumerate(skills) if i in taken], [s for i, s in enumerate(skills) if i not in taken])


def unlisted_line(unlisted: Sequence[Skill]) -> str:
    """One line naming the skills over the cap (the names cut to :data:`MAX_UNLISTED_CHARS`)."""
    names: list[str] = []
    chars = 0
    for skill in unlisted:
        if chars + len(skill.name) + 2 > MAX_UNLISTED_CHARS:
            break
        names.append(skill.name)
        chars += len(skill.name) + 2
    more = len(unlisted) - len(names)
    shown = ", ".join(names) + (f" and {more:,} more" if more else "")
    return (f"- Not listed here ({len(unlisted):,} more skills; the list holds at most {MAX_LISTED} skills and "
            f"{MAX_LISTING_CHARS:,} characters): {shown}. The `skill` tool loads any of them by name.")


def skills_text(skills: Sequence[Skill]) -> str:
    lines = ["## Skills",
             ("Skills give instructions for particular tasks. When a task matches a skill's description, call "
              "the `skill` tool with its name first: it returns the instructions, the skill's folder and its "
              "files, which `read` opens there without asking.")]
    listed, unlisted = listed_skills(skills)
    lines += [_line(s) for s in listed]
    if unlisted:
        lines.append(unlisted_line(unlisted))
    return "\n".join(lines)


class SkillTool(Tool):
    name = "skill"
    description = "Load a skill listed in the system prompt: its instructions, its folder and its files."
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name, as listed"}},
        "required": ["name"],
    }
    read_only = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        skills = {s.name: s for s in context.skills}
        skill = skills.get(arguments["name"])
        if skill is None:
            names = list(skills)
            known = ", ".join(names[:MAX_LISTED]) or "none"
            if len(names) > MAX_LISTED:
                known += f" and {len(names) - MAX_LISTED:,} more"
            return ToolOutput(f"No skill named {arguments['name']!r}. Skills: {known}.", is_error=True)
        body = skill.body()
        cut = truncate_head(body, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
        files = skill.files()
        refused = (f"Files: not listed ({skill.folder} is, or holds, the notebook's folder, the repository root "
                   "or the home folder: `read` asks first there)")
        listing = ["Files:", *(f"- {f}" for f in files)] if skill.readable else [refused]
        text = "\n".join([f"# Skill: {skill.name}", f"Folder: {skill.folder}", "", cut.content,
                          *([f"\n[{skill.name}: SKILL.md cut to {cut.output_lines} lines]"] if cut.truncated else []),
                          "", *listing])
        return ToolOutput(text, details={"skill": skill.name, "folder": skill.folder, "files": files})
