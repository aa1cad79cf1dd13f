"""The ``skill`` tool and the system prompt's list of skills (progressive disclosure: the prompt
holds each skill's name and description, the tool returns its body and its files on demand).

The tool reads the skills of the run's system prompt from ``ToolContext.skills``; ``read`` reads
inside their folders without asking (``ToolContext.readable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ipyagent.agent.skills.discovery import Skill
from ipyagent.agent.tools.base import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head


def skills_text(skills: Sequence[Skill]) -> str:
    lines = ["## Skills",
             ("Skills give instructions for particular tasks. When a task matches a skill's description, call "
              "the `skill` tool with its name first: it returns the instructions, the skill's folder and its "
              "files, which `read` opens there without asking.")]
    lines += [f"- {s.name}: {s.description}" for s in skills]
    return "\n".join(lines)


class SkillTool(Tool):
    name = "skill"
    description = "Load a skill listed in the system prompt: its instructions, its folder and its files."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name, as listed"}},
        "required": ["name"],
    }
    read_only = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        skills = {s.name: s for s in context.skills}
        skill = skills.get(arguments["name"])
        if skill is None:
            known = ", ".join(skills) or "none"
            return ToolOutput(f"No skill named {arguments['name']!r}. Skills: {known}.", is_error=True)
        body = skill.body()
        cut = truncate_head(body, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
        files = skill.files()
        text = "\n".join([f"# Skill: {skill.name}", f"Folder: {skill.folder}", "", cut.content,
                          *([f"\n[{skill.name}: SKILL.md cut to {cut.output_lines} lines]"] if cut.truncated else []),
                          "", "Files:", *(f"- {f}" for f in files)])
        return ToolOutput(text, details={"skill": skill.name, "folder": skill.folder, "files": files})
