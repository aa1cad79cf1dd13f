"""``ipyagent git-setup`` and ``ipyagent merge-driver``: notebooks and their sessions in git.

``git-setup`` (in a repository) writes what git needs to merge ``*.ipynb`` files with the merge
driver, like nbstripout's ``--install``: the driver in the repository's git config
(``merge.ipyagent.driver``) and ``*.ipynb merge=ipyagent`` in ``.gitattributes``. Git then runs
``merge-driver %O %A %B %P`` for every notebook both branches changed: the sessions merge as
trees and the cells as nbdime's library merges them where it can (``store/notebook_merge.py``);
the result goes into ``%A``, and the exit status says whether a conflict was kept both ways for
the user to choose (git then stops the merge, as for any conflict).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, cast

from ipyagent.cli.common import CliError, command
from ipyagent.shapes import Ipynb

ATTRIBUTE = "*.ipynb merge=ipyagent"
DRIVER_NAME = "ipyagent: a notebook's cells and sessions"
EMPTY = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False, cwd=cwd)
    except OSError as exc:
        raise CliError(f"git is needed ({exc})") from None
    if done.returncode != 0:
        raise CliError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


# ---- git-setup ----------------------------------------------------------------------------------


def _configure_setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attributes", default=None, metavar="FILE",
                        help="the attributes file to write (default: .gitattributes at the repository's root, "
                             "shared with everyone who clones it; .git/info/attributes keeps it to this clone)")


def driver_command() -> str:
    """The driver git runs: this Python's ipyagent, so it works without ipyagent on PATH."""
    return f"{shlex.quote(sys.executable)} -m ipyagent merge-driver %O %A %B %P"


@command("git-setup", _configure_setup)
def run_git_setup(args: argparse.Namespace) -> int:
    """Make git merge this repository's notebooks with merge-driver."""
    root = Path(_git("rev-parse", "--show-toplevel"))
    _git("config", "merge.ipyagent.name", DRIVER_NAME, cwd=root)
    _git("config", "merge.ipyagent.driver", driver_command(), cwd=root)
    attributes = Path(args.attributes) if args.attributes else root / ".gitattributes"
    if not attributes.is_absolute():
        attributes = Path.cwd() / attributes
    lines = attributes.read_text(encoding="utf-8").splitlines() if attributes.exists() else []
    mine = [i for i, line in enumerate(lines) if line.strip() == ATTRIBUTE]
    later = [i for i, line in enumerate(lines) if "merge=" in line and (not mine or i > mine[-1])]
    if mine and not later:
        wrote = f"{attributes} has '{ATTRIBUTE}' already"
    else:  # last, so that it wins over another merge driver set for notebooks before (nbdime's)
        kept = [line for line in lines if line.strip() != ATTRIBUTE]
        attributes.parent.mkdir(parents=True, exist_ok=True)
        attributes.write_text("\n".join([*kept, ATTRIBUTE]) + "\n", encoding="utf-8")
        wrote = f"added '{ATTRIBUTE}' to {attributes}" + (" (after the merge driver set there before)" if later
                                                           else "")
    print(f"git config merge.ipyagent.driver: {driver_command()}\n{wrote}")
    if attributes == root / ".gitattributes":
        print("commit .gitattributes so the attribute holds in every clone (each clone runs ipyagent git-setup "
              "once for the driver: git never takes a command from a repository)")
    return 0


# ---- merge-driver -------------------------------------------------------------------------------


def _configure_driver(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="the common ancestor's version (git's %%O)")
    parser.add_argument("ours", help="this branch's version, where the result is written (git's %%A)")
    parser.add_argument("theirs", help="the other branch's version (git's %%B)")
    parser.add_argument("path", nargs="?", default=None, help="the notebook's path, for messages (git's %%P)")


def _read(path: Path, *, empty_ok: bool) -> dict[str, Any] | None:
    from ipyagent.store.ipynb import NotebookError, parse_notebook

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    if empty_ok and not data.strip():
        return dict(EMPTY, cells=[], metadata={})  # the file is new on both branches
    try:
        return cast(dict[str, Any], parse_notebook(data, str(path)))
    except NotebookError:
        return None


def _new_id(taken: set[str]) -> str:
    while True:
        cell_id = uuid.uuid4().hex[:8]
        if cell_id not in taken:
            return cell_id


def _text_merge(args: argparse.Namespace, name: str) -> int:
    """A side that is no notebook (conflict markers of an earlier merge): git's line merge."""
    print(f"ipyagent merge-driver: {name}: a version is not a notebook; merged line by line", file=sys.stderr)
    done = subprocess.run(["git", "merge-file", "-L", "ours", "-L", "base", "-L", "theirs", args.ours, args.base,
                           args.theirs], check=False)
    return 0 if done.returncode == 0 else 1


@command("merge-driver", _configure_driver)
def run_merge_driver(args: argparse.Namespace) -> int:
    """Merge a notebook's versions: cells, and sessions as trees (git)."""
    from ipyagent.store.ipynb import write_notebook
    from ipyagent.store.notebook_merge import merge_notebooks

    name = args.path or args.ours
    base = _read(Path(args.base), empty_ok=True)
    ours, theirs = _read(Path(args.ours), empty_ok=False), _read(Path(args.theirs), empty_ok=False)
    if base is None or ours is None or theirs is None:
        return _text_merge(args, name)
    result = merge_notebooks(base, ours, theirs, _new_id)
    write_notebook(Path(args.ours), cast(Ipynb, result.nb))
    for line in result.notes:
        print(f"ipyagent merge-driver: {name}: {line}", file=sys.stderr)
    for line in result.conflicts:
        print(f"ipyagent merge-driver: {name}: conflict: {line}", file=sys.stderr)
    if result.conflicts:
        print(f"ipyagent merge-driver: {name}: both sides are kept; choose, then git add it", file=sys.stderr)
        return 1
    return 0
