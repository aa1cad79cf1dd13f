"""Finding Agent Skills, in the open format of agentskills.io: a folder ``<name>/`` holding
``SKILL.md``, whose YAML front matter gives ``name`` and ``description`` (optional ``scripts/``,
``references/`` and ``assets/`` beside it).

Where: ``.agents/skills/``, ``.claude/skills/`` and ``.pi/skills/`` in the notebook's folder and its
parents up to the repository root (``agent/containment.py``'s search, as for instruction files),
then the user's own ``~/.agents/skills/``. A name found twice is taken from the nearest folder
(the user's own last). The containment rules of instruction files apply: a skill whose real path
leaves the project (a symlink out of the repository) is used only when ``allow`` says so (the user
approved it; never in a headless run), nothing under ``/proc``, ``/sys`` or ``/dev`` is read, and
what is not used is reported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ipyagent.agent.containment import project_scope
from ipyagent.agent.prompt.instructions import AllowRead, SkippedFile, read_project_file
from ipyagent.agent.tools.paths import open_regular

SKILL_DIRS = (".agents/skills", ".claude/skills", ".pi/skills")
USER_SKILLS = ".agents/skills"  # under the home folder
SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
MAX_DESCRIPTION = 1024  # the format's limit
_ASK = ' (used only when the user approves it: a %%agent run asks when tool_approval is "ask")'


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str  # SKILL.md, as found
    folder: str  # the skill's real folder: read there without asking
    origin: str  # "project" or "user"
    size: int  # bytes of SKILL.md

    def body(self) -> str:
        """SKILL.md without its front matter."""
        with open_regular(os.path.join(self.folder, SKILL_FILE)) as handle:
            text = handle.read(MAX_SKILL_BYTES).decode("utf-8", errors="replace")
        return split_front_matter(text)[1].strip()

    def files(self, limit: int = 200) -> list[str]:
        """The skill's files, relative to its folder, sorted (links are not followed)."""
        out: list[str] = []
        for top, dirs, names in os.walk(self.folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                out.append(os.path.relpath(os.path.join(top, name), self.folder))
                if len(out) >= limit:
                    return out
        return out


@dataclass(frozen=True)
class SkillSearch:
    skills: tuple[Skill, ...] = ()
    skipped: tuple[SkippedFile, ...] = ()


_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):\s*(.*)$")


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """The top-level ``key: value`` fields of a YAML front matter (quoted, plain, folded ``>`` or
    literal ``|`` scalars; nested values are skipped) and the text after it."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return {}, text
    fields: dict[str, str] = {}
    key: str | None = None
    block: list[str] = []
    style = ""

    def finish() -> None:
        if key is not None and style in ("|", ">"):
            joined = ("\n" if style == "|" else " ").join(line.strip() for line in block)
            fields[key] = joined.strip()

    for line in lines[1:end]:
        match = _KEY.match(line)
        if match and not line[:1].isspace():
            finish()
            key, value = match.group(1), match.group(2).strip()
            block, style = [], ""
            if value in (">", "|", ">-", "|-", ">+", "|+"):
                style = value[0]
            elif value:
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
                fields[key] = value
            else:
                style = "?"  # a plain value on the next lines, or a nested mapping or list (skipped)
        elif key is not None and style and line.strip():
            if style == "?":
                nested = _KEY.match(line.strip()) or line.strip().startswith("- ")
                style = "" if nested else ">"
                if nested:
                    continue
            if style:
                block.append(line)
    finish()
    return fields, "\n".join(lines[end + 1:])


def skill_dirs(start: str | Path, home: str | Path | None = None) -> list[tuple[Path, Path, str]]:
    """(skills folder, the root its skills must stay in, origin), nearest first, the user's last."""
    scope = project_scope(start, home)
    out = [(folder / sub, scope.root, "project") for folder in scope.dirs for sub in SKILL_DIRS]
    home_dir = Path(home) if home is not None else Path.home()
    user = home_dir / USER_SKILLS
    out.append((user, user, "user"))
    return out


def find_skills(start: str | Path, *, home: str | Path | None = None, allow: AllowRead | None = None,
                dirs: Sequence[tuple[Path, Path, str]] | None = None) -> SkillSearch:
    """Every skill (see the module's docstring), and the ones not used."""
    skills: dict[str, Skill] = {}
    skipped: list[SkippedFile] = []
    seen: set[str] = set()
    for skills_dir, root, origin in dirs if dirs is not None else skill_dirs(start, home):
        try:
            entries = sorted(os.listdir(skills_dir))
        except OSError:
            continue
        for entry in entries:
            path = skills_dir / entry / SKILL_FILE
            if not path.is_symlink() and not path.exists():
                continue
            read = read_project_file(path, root, skills_dir, max_bytes=MAX_SKILL_BYTES, allow=allow,
                                     seen=seen, skipped=skipped, ask=_ASK)
            if read is None:
                continue
            verdict, data = read
            fields, _ = split_front_matter(data[:MAX_SKILL_BYTES].decode("utf-8", errors="replace"))
            name, description = fields.get("name", "").strip(), fields.get("description", "").strip()
            if not name or not description:
                skipped.append(SkippedFile(str(path), "its front matter lacks a name or a description"))
                continue
            if name in skills:
                continue  # the nearer folder's skill of that name wins
            skills[name] = Skill(name, description[:MAX_DESCRIPTION], str(path), os.path.dirname(verdict.real),
                                 origin, len(data))
    return SkillSearch(tuple(skills.values()), tuple(skipped))
