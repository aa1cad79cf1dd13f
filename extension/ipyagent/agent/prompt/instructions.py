"""Project instruction files (``AGENTS.md``, ``CLAUDE.md``) found from a folder up to the
repository root or home, as Pi and Codex find theirs (:func:`ipyagent.agent.containment.project_scope`:
with neither on the way, only the folder itself). They go into the system prompt on every request,
so compaction never summarises them away.

A file whose real path leaves the project (the repository, or the notebook's folder when there
is no repository) — a link to ``../secret.txt``, or a file in the home folder above a folder with
no repository — is read only when ``allow`` says so (the user approved it); nothing under
``/proc``, ``/sys`` or ``/dev`` is ever read. What is not read is reported, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipyagent.agent.containment import PathVerdict, check_path, project_scope
from ipyagent.agent.tools.paths import open_regular

INSTRUCTION_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_BYTES = 32 * 1024  # per file, as Codex's project_doc_max_bytes

_ASK = ' (read only when the user approves it: a %%agent run asks when tool_approval is "ask")'
# (the verdict of a file outside the project, the folder it was found in) -> read it?
AllowRead = Callable[[PathVerdict, Path], bool]


@dataclass(frozen=True)
class InstructionFile:
    path: str
    text: str
    truncated: bool = False


@dataclass(frozen=True)
class SkippedFile:
    """An instruction file that was found and not read, and why."""

    path: str
    reason: str
    needs_approval: bool = False  # outside the project: an approval would read it


@dataclass(frozen=True)
class InstructionSearch:
    files: tuple[InstructionFile, ...] = ()
    skipped: tuple[SkippedFile, ...] = ()


def read_project_file(path: Path, root: Path, folder: Path, *, max_bytes: int, allow: AllowRead | None,
                      seen: set[str], skipped: list[SkippedFile], ask: str) -> tuple[PathVerdict, bytes] | None:
    """The first ``max_bytes + 1`` bytes of a file a repository brought (an instruction file, a
    skill), under the containment rules, or None: never under /proc, /sys or /dev; outside
    ``root`` only when ``allow`` says so (else noted in ``skipped`` with ``ask``); each real file
    once (``seen``); never a FIFO or a device."""
    verdict = check_path(path, root)
    if verdict.real in seen:
        return None
    if verdict.forbidden:
        skipped.append(SkippedFile(str(path), verdict.reason()))
        return None
    if verdict.outside and not (allow is not None and allow(verdict, folder)):
        skipped.append(SkippedFile(str(path), verdict.reason() + ask, needs_approval=True))
        return None
    try:
        with open_regular(verdict.real) as handle:
            data = handle.read(max_bytes + 1)
    except OSError:  # gone, unreadable, a folder, a FIFO or a device
        return None
    seen.add(verdict.real)
    return verdict, data


def instruction_dirs(start: str | Path, home: str | Path | None = None) -> list[Path]:
    """The folders searched, nearest first: ``start`` up to the repository root or the home
    folder; only ``start`` with neither on the way."""
    return list(project_scope(start, home).dirs)


def search_instruction_files(start: str | Path, *, names: Sequence[str] = INSTRUCTION_NAMES,
                             home: str | Path | None = None, max_bytes: int = MAX_FILE_BYTES,
                             allow: AllowRead | None = None) -> InstructionSearch:
    """The instruction files from the outermost folder to ``start`` (general first, the most
    specific last), every name found in each folder, and the ones not read. A file reached twice
    (a symlink) or with the same text as one already taken is taken once; unreadable files and
    anything but regular files are skipped. ``allow`` decides for files outside the project
    (None: they are not read)."""
    scope = project_scope(start, home)
    found: list[InstructionFile] = []
    skipped: list[SkippedFile] = []
    seen_paths: set[str] = set()
    seen_texts: set[str] = set()
    # a .git that did not make its folder the root (a planted one in a shared parent): said once
    skipped += [SkippedFile(str(folder / ".git"), why) for folder, why in scope.refused]
    for folder in scope.outermost_first:
        for name in names:
            path = folder / name
            if not path.is_symlink() and not path.exists():
                continue
            read = read_project_file(path, scope.root, folder, max_bytes=max_bytes, allow=allow,
                                     seen=seen_paths, skipped=skipped, ask=_ASK)
            if read is None:
                continue
            _, data = read
            truncated = len(data) > max_bytes
            text = data[:max_bytes].decode("utf-8", errors="replace").strip()
            if not text or text in seen_texts:
                continue
            seen_texts.add(text)
            found.append(InstructionFile(str(path), text, truncated))
    return InstructionSearch(tuple(found), tuple(skipped))


def find_instruction_files(start: str | Path, *, names: Sequence[str] = INSTRUCTION_NAMES,
                           home: str | Path | None = None, max_bytes: int = MAX_FILE_BYTES,
                           allow: AllowRead | None = None) -> list[InstructionFile]:
    """The files :func:`search_instruction_files` reads."""
    return list(search_instruction_files(start, names=names, home=home, max_bytes=max_bytes, allow=allow).files)
