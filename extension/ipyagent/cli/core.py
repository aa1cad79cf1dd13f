"""``ipyagent inspect FILE``: a session's entries, path, compactions, context tokens and budget.

(The module is ``core``, not ``inspect``, so that it can never shadow the standard library's
``inspect`` module.)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ipyagent.cli.base import budget_args, command, file_args, load_session
from ipyagent.compaction.settings import CompactionSettings


def _configure_inspect(parser: argparse.ArgumentParser) -> None:
    file_args(parser)
    budget_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@command("inspect", _configure_inspect)
def run_inspect(args: argparse.Namespace) -> int:
    """Show a session's entries, path, compactions, context tokens and budget."""
    session = load_session(args)
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
