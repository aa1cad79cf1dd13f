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

The format's rules hold (agentskills.io/specification): a name is lowercase letters, digits and
single hyphens, at most 64 characters, and the name of its folder; a description at most 1,024
characters, listed on one line. A skill that breaks them is left out and named, with the reason;
a skill whose name a nearer one already took is reported as shadowed.

A skill's folder is the folder that holds its ``SKILL.md`` as found, never the folder its link
leads to: ``read`` opens files there without asking (:attr:`Skill.readable`), unless that folder
really is the notebook's folder, the repository root, the home folder or a parent of one of them
(a skill folder linked to ``../..`` would open the whole repository, ``.env`` and all).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ipyagent.agent.containment import is_within, project_scope
from ipyagent.agent.prompt.instructions import AllowRead, SkippedFile, read_project_file
from ipyagent.agent.tools.paths import open_regular
from ipyagent.text import one_line

SKILL_DIRS = (".agents/skills", ".claude/skills", ".pi/skills")
USER_SKILLS = ".agents/skills"  # under the home folder
SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
MAX_DESCRIPTION = 1024  # the format's limits
MAX_NAME = 64
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# control characters, line and paragraph separators, zero-width and direction marks
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_ASK = ' (used only when the user approves it: a %%agent run asks when tool_approval is "ask")'


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str  # SKILL.md, as found
    folder: str  # the folder holding SKILL.md as found (not a link's target's)
    origin: str  # "project" or "user"
    size: int  # bytes of SKILL.md
    real: str = ""  # the file SKILL.md led to when it was checked: the body is read there
    readable: bool = True  # ``read`` opens files in ``folder`` without asking

    def body(self) -> str:
        """SKILL.md without its front matter."""
        with open_regular(self.real or os.path.join(self.folder, SKILL_FILE)) as handle:
            text = handle.read(MAX_SKILL_BYTES).decode("utf-8", errors="replace")
        return split_front_matter(text)[1].strip()

    def files(self, limit: int = 200) -> list[str]:
        """The skill's files, relative to its folder, sorted (links are not followed); none when
        its folder is not :attr:`readable` (it would list the repository)."""
        out: list[str] = []
        if not self.readable:
            return out
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
    skipped: tuple[SkippedFile, ...] = ()  # found and left out (outside the project, the format's rules…)
    shadowed: tuple[SkippedFile, ...] = ()  # a nearer skill has the same name


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


def rule_broken(name: str, description: str, folder_name: str) -> str | None:
    """Why a skill breaks the format's rules (see the module's docstring), or None."""
    if not name or not description:
        return "its front matter lacks a name or a description"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return (f"its name {one_line(name, 50)!r} breaks the format's rules (lowercase letters, digits and single "
                f"hyphens, at most {MAX_NAME} characters)")
    if name != folder_name:
        return f"its name {name!r} is not its folder's name {one_line(folder_name, 50)!r}"
    if len(description) > MAX_DESCRIPTION:
        return f"its description has {len(description):,} characters, over the format's {MAX_DESCRIPTION:,}"
    return None


def _one_line(text: str) -> str:
    """``text`` on one line: line breaks, tabs and other control or invisible characters made spaces."""
    return " ".join(_UNPRINTABLE.sub(" ", text).split())


def _guarded(start: str | Path, home: str | Path | None) -> tuple[str, ...]:
    """The folders no skill folder may be (or be a parent of) to be read freely: the start folder,
    the repository root and the home folder, resolved."""
    scope = project_scope(start, home)
    home_dir = os.path.realpath(home if home is not None else Path.home())
    return tuple(dict.fromkeys((str(scope.start), str(scope.root), home_dir)))


def find_skills(start: str | Path, *, home: str | Path | None = None, allow: AllowRead | None = None,
                dirs: Sequence[tuple[Path, Path, str]] | None = None) -> SkillSearch:
    """Every skill (see the module's docstring), the ones left out and the shadowed ones."""
    skills: dict[str, Skill] = {}
    skipped: list[SkippedFile] = []
    shadowed: list[SkippedFile] = []
    seen: set[str] = set()
    guarded = _guarded(start, home)
    for skills_dir, root, origin in dirs if dirs is not None else skill_dirs(start, home):
        try:
            entries = sorted(os.listdir(skills_dir))
        except OSError:
            continue
        for entry in entries:
            path = skills_dir / entry / SKILL_FILE
            if not path.is_symlink() and not path.exists():
                continue
            real = os.path.realpath(path)
            if real in seen:  # two folders, one SKILL.md (a link): the first one found is it
                shadowed.append(SkippedFile(str(path), f"the same file ({real}) as a skill found before"))
                continue
            read = read_project_file(path, root, skills_dir, max_bytes=MAX_SKILL_BYTES, allow=allow,
                                     seen=seen, skipped=skipped, ask=_ASK)
            if read is None:
                continue
            verdict, data = read
            fields, _ = split_front_matter(data[:MAX_SKILL_BYTES].decode("utf-8", errors="replace"))
            name, description = fields.get("name", "").strip(), fields.get("description", "").strip()
            why = rule_broken(name, description, entry)
            if why is not None:
                skipped.append(SkippedFile(str(path), why))
                continue
            if name in skills:  # the nearer folder's skill of that name wins
                shadowed.append(SkippedFile(str(path), f"shadowed by the skill {name!r} of {skills[name].path}"))
                continue
            folder = os.path.abspath(skills_dir / entry)
            real_folder = os.path.realpath(folder)
            readable = not any(is_within(g, real_folder) for g in guarded)
            skills[name] = Skill(name, _one_line(description), str(path), folder, origin, len(data), verdict.real,
                                 readable)
    return SkillSearch(tuple(skills.values()), tuple(skipped), tuple(shadowed))
