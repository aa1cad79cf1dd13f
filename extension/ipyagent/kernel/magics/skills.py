"""``%agent skills``: the Agent Skills the next prompt lists — each one's name, where it came from,
its size and description — and the ones found but not used, with the reason. Plain text: names
and descriptions come from the repository (untrusted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipyagent.agent.skills.discovery import find_skills
from ipyagent.agent.tools.truncate import format_size
from ipyagent.kernel.context import instruction_approver
from ipyagent.kernel.magics.commands import command, magic_arguments, parse_argstring
from ipyagent.text import one_line

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["skills_report"]


def skills_report(runtime: AgentRuntime) -> str:
    if not runtime.config.skills:
        return "Agent Skills are off (%config Agent.skills = True offers them)."
    # what this kernel's user already decided about skills outside the project; nothing is asked here
    allow = instruction_approver(runtime.instruction_reads, None, "skill")
    search = find_skills(runtime.notebook_folder(), allow=allow)
    lines = []
    for skill in search.skills:
        lines.append(f"{skill.name} ({skill.origin}, {format_size(skill.size)}): {skill.path}")
        lines.append(f"  {one_line(skill.description, 110)}")
    for skipped in search.skipped:
        lines.append(f"not used: {skipped.path}: {skipped.reason}")
    if not lines:
        return ("No Agent Skills found (<name>/SKILL.md in .agents/skills, .claude/skills or .pi/skills from the "
                "notebook's folder up to the repository root, or in ~/.agents/skills).")
    lines.append(f"{len(search.skills)} skill(s): names and descriptions are in the system prompt; the skill tool "
                 "returns a body.")
    return "\n".join(lines)


@command("skills")
@magic_arguments()
def agent_skills(runtime: AgentRuntime, rest: str) -> None:
    """The Agent Skills found: name, where each came from, its size."""
    parse_argstring(agent_skills, rest)
    print(skills_report(runtime))
