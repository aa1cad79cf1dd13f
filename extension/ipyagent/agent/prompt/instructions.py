"""Project instruction files (``AGENTS.md``, ``CLAUDE.md``) found from a folder up to the
repository root or home, as Pi and Codex find theirs. They go into the system prompt on every
request, so compaction never summarises them away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

INSTRUCTION_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_FILE_BYTES = 32 * 1024  # per file, as Codex's project_doc_max_bytes


@dataclass(frozen=True)
class InstructionFile:
    path: str
    text: str
    truncated: bool = False


def instruction_dirs(start: str | Path, home: str | Path | None = None) -> list[Path]:
    """``start`` and its parents, nearest first, up to and including the first one that is a
    repository root (holds ``.git``) or the home folder; the filesystem root otherwise."""
    home_dir = Path(home).resolve() if home is not None else Path.home().resolve()
    folder = Path(start).resolve()
    dirs: list[Path] = []
    while True:
        dirs.append(folder)
        if folder == home_dir or (folder / ".git").exists() or folder.parent == folder:
            return dirs
        folder = folder.parent


def find_instruction_files(start: str | Path, *, names: Sequence[str] = INSTRUCTION_NAMES,
                           home: str | Path | None = None, max_bytes: int = MAX_FILE_BYTES) -> list[InstructionFile]:
    """The instruction files from the outermost folder to ``start`` (general first, the most
    specific last), every name found in each folder; a file reached twice (a symlink) or with the
    same text as one already taken is taken once. Unreadable files are skipped."""
    found: list[InstructionFile] = []
    seen_paths: set[Path] = set()
    seen_texts: set[str] = set()
    for folder in reversed(instruction_dirs(start, home)):
        for name in names:
            path = folder / name
            try:
                if not path.is_file():
                    continue
                real = path.resolve()
                if real in seen_paths:
                    continue
                with open(real, "rb") as handle:
                    data = handle.read(max_bytes + 1)
            except OSError:
                continue
            seen_paths.add(real)
            truncated = len(data) > max_bytes
            text = data[:max_bytes].decode("utf-8", errors="replace").strip()
            if not text or text in seen_texts:
                continue
            seen_texts.add(text)
            found.append(InstructionFile(str(path), text, truncated))
    return found
