"""What every ``ipyagent`` command shares: the error type, command registration, reading a
session file, and the common arguments.

Command modules import from here (never from the package ``__init__``), so the package imports
its command modules and no module imports back up.
"""

from __future__ import annotations

import argparse
from typing import Callable

__all__ = ["COMMANDS", "CliError", "Command", "budget_args", "command", "file_args", "load_session"]

Command = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]

COMMANDS: dict[str, tuple[Configure, Command]] = {}  # name -> (configure its parser, run it); in order


def command(name: str, configure: Configure):
    """Register the decorated function as ``ipyagent NAME`` (its docstring's first line is the help)."""
    def register(run: Command) -> Command:
        COMMANDS[name] = (configure, run)
        return run

    return register


class CliError(Exception):
    pass


def load_session(args: argparse.Namespace):
    from ipyagent.core import Session

    try:
        return Session.from_file(args.file, estimator=getattr(args, "estimator", "chars4"),
                                 **({"session": args.session} if getattr(args, "session", None) else {}))
    except FileNotFoundError:
        raise CliError(f"no such file: {args.file}")
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {args.file}: {exc}")


def file_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a notebook (.ipynb) or a Pi session file (.jsonl)")
    parser.add_argument("--session", help="which session of a notebook (default: the active one)")


def budget_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimator", choices=["chars4", "tiktoken"], default="chars4")
    parser.add_argument("--reserve-tokens", type=int, default=16384)
    parser.add_argument("--keep-recent-tokens", type=int, default=20000)
    parser.add_argument("--context-window", type=int, help="the model's window, for the budget")
