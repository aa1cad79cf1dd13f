"""``ipyagent`` on the command line: run, inspect, compact, probe, export and import sessions
(notebooks or Pi JSONL session files), and merge notebooks in git."""

from __future__ import annotations

import argparse
import sys

from ipyagent.cli.common import COMMANDS, CliError, Command, command

# Importing a command module registers its commands, in the order ``ipyagent --help`` lists them.
# Command modules import ``ipyagent.cli.common``, never this package: no import goes back up.
# isort: off
from ipyagent.cli import inspect_command  # noqa: F401  inspect
from ipyagent.cli import compact_command  # noqa: F401  compact
from ipyagent.cli import notebook_commands  # noqa: F401  lift, export, import
from ipyagent.cli import run_command  # noqa: F401  run
from ipyagent.cli import probe_command  # noqa: F401  probe
from ipyagent.cli import git_commands  # noqa: F401  git-setup, merge-driver
# isort: on

__all__ = ["CliError", "build_parser", "command", "main"]


def build_parser() -> argparse.ArgumentParser:
    from ipyagent import __version__

    parser = argparse.ArgumentParser(
        prog="ipyagent", description="Run, inspect, compact, probe, export and import ipyagent sessions "
        "(notebooks or Pi JSONL session files).", epilog="ipyagent COMMAND --help shows one command's options.")
    parser.add_argument("--version", action="version", version=f"ipyagent {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for name, (configure, run_it) in COMMANDS.items():
        summary = (run_it.__doc__ or "").strip().splitlines()[0] if run_it.__doc__ else None
        child = sub.add_parser(name, help=summary, description=summary)
        configure(child)
        child.set_defaults(run=run_it)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        run: Command = args.run
        return run(args)
    except CliError as exc:
        print(f"ipyagent {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ipyagent {args.command}: interrupted", file=sys.stderr)
        return 130
