"""``%agent skills``: the Agent Skills the next prompt lists — each one's name, where it came from,
its size and description, and whether it is over the list's cap — the ones found but not used,
with the reason, and the shadowed ones. Plain text: names
and descriptions come from the repository (untrusted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipyagent.agent.skills.discovery import find_skills
from ipyagent.agent.skills.skill_tool import MAX_LISTED, MAX_LISTING_CHARS, listed_skills
from ipyagent.agent.tools.truncate import format_size
from ipyagent.kernel.cell_context import instruction_approver
from ipyagent.kernel.magics.commands import TOOLS, command, magic_arguments, parse_argstring
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
    _, unlisted = listed_skills(search.skills)
    over = {s.path for s in unlisted}
    lines = []
    for skill in search.skills:
        marks = [*(["not in the system prompt's list: over its cap"] if skill.path in over else []),
                 *([] if skill.readable else ["its folder is read only with approval"])]
        lines.append(f"{skill.name} ({skill.origin}, {format_size(skill.size)}): {skill.path}"
                     + (f" [{'; '.join(marks)}]" if marks else ""))
        lines.append(f"  {one_line(skill.description, 110)}")
    for skipped in search.skipped:
        lines.append(f"not used: {skipped.path}: {skipped.reason}")
    for shadowed in search.shadowed:
        lines.append(f"shadowed: {shadowed.path}: {shadowed.reason}")
    if not lines:
        return ("No Agent Skills found (<name>/SKILL.md in .agents/skills, .claude/skills or .pi/skills from the "
                "notebook's folder up to the repository root, or in ~/.agents/skills).")
    cap = (f"; {len(unlisted):,} over the list's cap ({MAX_LISTED} skills, {MAX_LISTING_CHARS:,} characters) are "
           "named in one line") if unlisted else ""
    lines.append(f"{len(search.skills)} skill(s): names and descriptions are in the system prompt{cap}; the skill "
                 "tool returns a body."
                 + (f" {len(search.skipped)} not used, {len(search.shadowed)} shadowed."
                    if search.skipped or search.shadowed else ""))
    return "\n".join(lines)


@command("skills", group=TOOLS)
@magic_arguments()
def agent_skills(runtime: AgentRuntime, rest: str) -> None:
    """The Agent Skills found: name, where each came from, its size."""
    parse_argstring(agent_skills, rest)
    print(skills_report(runtime))
