"""``ipyagent`` on the command line: run, inspect, compact, export and import sessions
(notebooks or Pi JSONL session files)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from ipyagent.compaction.settings import CompactionSettings

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Command]] = {}


def command(name: str, configure: Callable[[argparse.ArgumentParser], None]):
    def register(run: Command) -> Command:
        _COMMANDS[name] = (configure, run)
        return run

    return register


class CliError(Exception):
    pass


def _load(args: argparse.Namespace):
    from ipyagent.core import Session

    try:
        return Session.from_file(args.file, estimator=getattr(args, "estimator", "chars4"),
                                 **({"session": args.session} if getattr(args, "session", None) else {}))
    except FileNotFoundError:
        raise CliError(f"no such file: {args.file}")
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {args.file}: {exc}")


def _file_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a notebook (.ipynb) or a Pi session file (.jsonl)")
    parser.add_argument("--session", help="which session of a notebook (default: the active one)")


def _budget_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimator", choices=["chars4", "tiktoken"], default="chars4")
    parser.add_argument("--reserve-tokens", type=int, default=16384)
    parser.add_argument("--keep-recent-tokens", type=int, default=20000)
    parser.add_argument("--context-window", type=int, help="the model's window, for the budget")


def _configure_inspect(parser: argparse.ArgumentParser) -> None:
    _file_args(parser)
    _budget_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@command("inspect", _configure_inspect)
def run_inspect(args: argparse.Namespace) -> int:
    """Show a session's entries, path, compactions, context tokens and budget."""
    session = _load(args)
    settings = CompactionSettings(args.reserve_tokens, args.keep_recent_tokens)
    path = session.path()
    counts: dict[str, int] = {}
    for entry in session.entries:
        key = entry["type"] if entry["type"] != "message" else "message:" + entry["message"].get("role", "?")
        counts[key] = counts.get(key, 0) + 1
    compactions = [{"id": e["id"], "tokensBefore": e.get("tokensBefore"), "firstKeptEntryId": e.get("firstKeptEntryId"),
                    "fromHook": bool(e.get("fromHook"))} for e in session.compactions()]
    report: dict[str, Any] = {
        "session_id": session.header.get("id"),
        "entries": len(session),
        "entry_types": counts,
        "leaf": session.leaf_id,
        "path_length": len(path),
        "context_messages": len(session.build_context()),
        "context_tokens": session.context_tokens(),
        "estimator": session.estimator.name,
        "compactions": compactions,
        "problems": [str(p) for p in session.load_report.problems],
    }
    if args.context_window:
        threshold = args.context_window - settings.reserve_tokens
        report["budget"] = {"context_window": args.context_window, "threshold": threshold,
                            "reserve_tokens": settings.reserve_tokens,
                            "percent": round(100 * report["context_tokens"] / args.context_window, 1),
                            "would_compact": session.should_compact(args.context_window, settings)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"session {report['session_id']}: {report['entries']} entries, leaf {report['leaf']}, "
          f"path {report['path_length']} entries")
    print("entry types: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"context: {report['context_messages']} messages, {report['context_tokens']:,} tokens ({session.estimator.name})")
    for c in compactions:
        print(f"compaction {c['id']}: {c['tokensBefore']:,} tokens before, first kept {c['firstKeptEntryId']}"
              + (" (from a hook)" if c["fromHook"] else ""))
    if "budget" in report:
        b = report["budget"]
        print(f"budget: {b['percent']}% of {b['context_window']:,}; compacts above {b['threshold']:,}"
              + (" — would compact now" if b["would_compact"] else ""))
    if report["problems"]:
        print(session.load_report.summary(), file=sys.stderr)
    return 0


def _configure_compact(parser: argparse.ArgumentParser) -> None:
    _file_args(parser)
    _budget_args(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--focus", help="additional focus for the summary")
    parser.add_argument("--summary-model", help="provider:model for the summary (default: $IPYAGENT_MODEL)")
    parser.add_argument("-o", "--output", help="where to write the compacted session (default: in place)")


@command("compact", _configure_compact)
def run_compact(args: argparse.Namespace) -> int:
    """Plan (--dry-run) or run a compaction of a session file or notebook."""
    session = _load(args)
    settings = CompactionSettings(args.reserve_tokens, args.keep_recent_tokens)
    plan = session.prepare_compaction(settings)
    if args.dry_run:
        result = {"nothing_to_compact": True} if plan is None else plan.to_summary_dict()
        if args.json:
            print(json.dumps(result))
        elif plan is None:
            print("nothing to compact")
        else:
            for key, value in result.items():
                print(f"{key}: {value}")
        return 0
    from ipyagent.commands_compact import compact_file  # provider-backed path

    return compact_file(session, plan, settings, args)


import ipyagent.commands_notebook  # noqa: E402,F401  (registers lift/export/import)
import ipyagent.commands_run  # noqa: E402,F401  (registers run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ipyagent", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (configure, run) in _COMMANDS.items():
        child = sub.add_parser(name, help=(run.__doc__ or "").strip().splitlines()[0] if run.__doc__ else None)
        configure(child)
        child.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CliError as exc:
        print(f"ipyagent {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ipyagent {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run through the importable module, so command modules share this module's classes.
    from ipyagent.cli import main as _main

    sys.exit(_main())
