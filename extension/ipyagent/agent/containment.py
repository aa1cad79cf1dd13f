"""Where a project's files may come from: the folders searched for them, and a verdict for a path.

Project files (``AGENTS.md``, skills, ``.mcp.json``…) are found by walking up from the notebook's
folder. A hostile repository or a shared parent folder must not steer the agent, so:

* :func:`project_scope` — the folders to search, nearest first: the start folder and its parents
  up to the repository root or the home folder, whichever comes first. With neither on the way,
  only the start folder. The scope's ``root`` is the repository root, or the start folder when
  there is no repository: what lies inside it is the project's own.
* :func:`repository_refusal` — whether a folder's ``.git`` makes it a repository root. Anyone may
  write a ``.git`` file into a shared parent such as ``/tmp`` (git's own CVE-2022-24765), so, as
  git's ``safe.directory`` check does, a folder is a root only when its ``.git`` is a directory
  (or a ``gitdir:`` file, or a link, leading to an existing git directory) and the folder, its
  ``.git`` and the git directory are owned by the user running the kernel. A ``.git`` refused is
  reported (:attr:`ProjectScope.refused`) and the search goes on above it.
* :func:`check_path` — a :class:`PathVerdict` for a file against a root, symlinks and ``..``
  resolved: ``INSIDE`` (read freely), ``OUTSIDE`` (read only when the user approves) or
  ``FORBIDDEN`` (under ``/proc``, ``/sys`` or ``/dev``, anywhere on its chain of links: never read).

    scope = project_scope(notebook_folder)
    for folder in reversed(scope.dirs):          # the outermost first
        verdict = check_path(folder / "AGENTS.md", scope.root)
        if verdict.inside or (verdict.outside and user_approves(verdict.reason())):
            ...read verdict.real...
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FORBIDDEN_ROOTS", "PathVerdict", "ProjectScope", "Verdict", "check_path", "is_forbidden",
           "is_within", "leads_to_forbidden", "project_scope", "repository_refusal"]

# Kernel interfaces, not files: /proc/self/environ holds the process's keys, /dev/zero never ends.
FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")
_MAX_LINKS = 40  # as the kernel's own limit on a chain of symlinks


def is_within(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or below it (both compared as given: resolve them first)."""
    try:
        return os.path.commonpath([os.fspath(path), os.fspath(folder)]) == os.fspath(folder)
    except ValueError:  # different drives (Windows), or one relative and one absolute
        return False


def is_forbidden(path: str | Path) -> bool:
    """Whether the absolute ``path`` is under one of :data:`FORBIDDEN_ROOTS` (as written)."""
    return os.name == "posix" and any(is_within(os.path.normpath(path), root) for root in FORBIDDEN_ROOTS)


@dataclass(frozen=True)
class ProjectScope:
    """The folders searched for project files, and the root of what is the project's own."""

    start: Path  # the start folder, resolved
    root: Path  # the repository root, or ``start`` when there is no repository
    dirs: tuple[Path, ...]  # ``start`` and the parents searched, nearest first, ending at ``root`` or home
    repository: bool  # whether ``root`` is a repository root
    refused: tuple[tuple[Path, str], ...] = ()  # folders whose ``.git`` was not taken, and why

    @property
    def outermost_first(self) -> tuple[Path, ...]:
        """:attr:`dirs` from the outermost to ``start`` (general files first, the most specific last)."""
        return tuple(reversed(self.dirs))


def _owner() -> int | None:
    """The user running the kernel (None where files have no owner id to compare, on Windows)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def _not_owned(path: str, owner: int | None, what: str) -> str | None:
    if owner is None:
        return None
    try:
        uid = os.stat(path).st_uid if what == "git directory" else os.lstat(path).st_uid
    except OSError as exc:
        return f"the {what} {path} cannot be read ({exc.strerror})"
    return None if uid == owner else f"the {what} {path} belongs to user id {uid}, not to the kernel's user ({owner})"


def _gitdir_of(dot_git: str, folder: str) -> tuple[str | None, str]:
    """(the git directory a ``.git`` leads to, or None; why not)."""
    if os.path.islink(dot_git) or os.path.isdir(dot_git):
        if not os.path.isdir(dot_git):
            return None, f"it is a link to {os.readlink(dot_git)!r}, which leads to no folder"
        return os.path.realpath(dot_git), ""
    if not os.path.isfile(dot_git):
        return None, "it is neither a folder nor a file"
    try:
        with open(dot_git, "rb") as handle:
            first = handle.read(4097).decode("utf-8", errors="replace").splitlines()[:1]
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror})"
    line = first[0].strip() if first else ""
    if not line.startswith("gitdir:"):
        return None, "it is a file without a 'gitdir:' line"
    target = os.path.realpath(os.path.join(folder, line[len("gitdir:"):].strip()))
    if not os.path.isfile(os.path.join(target, "HEAD")):
        return None, f"it points at {target}, which is not a git directory"
    return target, ""


def repository_refusal(folder: str | Path, owner: int | None = None) -> str | None:
    """None when ``folder`` is a repository root (see the module's docstring; ``owner`` defaults to
    the user running the kernel), else why its ``.git`` is not taken ("" when it has none)."""
    folder = os.fspath(folder)
    dot_git = os.path.join(folder, ".git")
    if not os.path.lexists(dot_git):
        return ""
    gitdir, why = _gitdir_of(dot_git, folder)
    if gitdir is None:
        return f"{dot_git} does not make {folder} a repository root: {why}"
    owner = _owner() if owner is None else owner
    for path, what in ((folder, "folder"), (dot_git, ".git"), (gitdir, "git directory")):
        why_not = _not_owned(path, owner, what)
        if why_not is not None:
            return f"{dot_git} does not make {folder} a repository root: {why_not}"
    return None


def project_scope(start: str | Path, home: str | Path | None = None, owner: int | None = None) -> ProjectScope:
    """The scope of a search from ``start`` (see the module's docstring); ``home`` defaults to the
    user's home folder, ``owner`` to the user id running the kernel. A folder counts as a
    repository root when :func:`repository_refusal` says so (a worktree's or a submodule's
    ``gitdir:`` file counts when it leads to a git directory)."""
    home_dir = Path(os.path.realpath(home if home is not None else Path.home()))
    folder = Path(os.path.realpath(start))
    walked: list[Path] = []
    refused: list[tuple[Path, str]] = []
    while True:
        walked.append(folder)
        why = repository_refusal(folder, owner)
        if why is None:
            return ProjectScope(walked[0], folder, tuple(walked), True, tuple(refused))
        if why:
            refused.append((folder, why))
        if folder == home_dir:
            return ProjectScope(walked[0], walked[0], tuple(walked), False, tuple(refused))
        if folder.parent == folder:  # the filesystem's root: neither repository nor home on the way
            return ProjectScope(walked[0], walked[0], (walked[0],), False, tuple(refused))
        folder = folder.parent


class Verdict(enum.Enum):
    INSIDE = "inside"  # the real path is within the root: read freely
    OUTSIDE = "outside"  # the real path leaves the root: read only with the user's approval
    FORBIDDEN = "forbidden"  # under /proc, /sys or /dev somewhere on its way: never read


@dataclass(frozen=True)
class PathVerdict:
    path: str  # the path as checked, absolute
    real: str  # where it really leads (realpath)
    root: str  # the root it was checked against, resolved
    verdict: Verdict

    @property
    def inside(self) -> bool:
        return self.verdict is Verdict.INSIDE

    @property
    def outside(self) -> bool:
        return self.verdict is Verdict.OUTSIDE

    @property
    def forbidden(self) -> bool:
        return self.verdict is Verdict.FORBIDDEN

    @property
    def shown(self) -> str:
        """The path for a message: ``path (really real)`` when a link or ``..`` leads elsewhere."""
        return self.path if self.real == self.path else f"{self.path} (really {self.real})"

    def reason(self) -> str:
        """Why the path may not be read freely ("" when it is inside)."""
        if self.verdict is Verdict.FORBIDDEN:
            return f"{self.shown} is under {', '.join(FORBIDDEN_ROOTS)}, which is never read"
        if self.verdict is Verdict.OUTSIDE:
            return f"{self.shown} is outside {self.root}"
        return ""


def _link_chain(path: str) -> list[str]:
    """``path`` and every absolute path its chain of symlinks passes through (the last link
    followed as written, before the folders on its way are resolved)."""
    chain = [path]
    current = path
    for _ in range(_MAX_LINKS):
        try:
            target = os.readlink(current)
        except OSError:  # not a link (or gone): the chain ends here
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        chain.append(current)
    return chain


def leads_to_forbidden(path: str | Path) -> bool:
    """Whether ``path``, any link it passes through, or its real path is under
    :data:`FORBIDDEN_ROOTS` (the link chain is only walked when links are involved)."""
    full = os.path.abspath(os.path.expanduser(os.fspath(path)))
    real = os.path.realpath(full)
    if is_forbidden(full) or is_forbidden(real):
        return True
    return real != full and any(is_forbidden(p) for p in _link_chain(full))


def check_path(path: str | Path, root: str | Path) -> PathVerdict:
    """The verdict for ``path`` (made absolute against the working directory) against ``root``:
    forbidden when the path, any link it passes through, or its real path is under
    :data:`FORBIDDEN_ROOTS`; else inside or outside ``root`` by its real path."""
    full = os.path.abspath(os.path.expanduser(os.fspath(path)))
    real = os.path.realpath(full)
    real_root = os.path.realpath(root)
    if leads_to_forbidden(full):
        verdict = Verdict.FORBIDDEN
    elif is_within(real, real_root):
        verdict = Verdict.INSIDE
    else:
        verdict = Verdict.OUTSIDE
    return PathVerdict(full, real, real_root, verdict)
