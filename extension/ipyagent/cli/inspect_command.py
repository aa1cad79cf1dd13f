"""``ipyagent inspect FILE``: a session's entries, path, compactions, context tokens and budget.

(The module is ``core``, not ``inspect``, so that it can never shadow the standard library's
``inspect`` module.)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ipyagent.agent.budget import recorded_request_tokens
from ipyagent.cli.common import Budget, budget_args, budget_of, command, file_args, load_session_file
from ipyagent.compaction.settings import fit_budget, should_compact

if TYPE_CHECKING:
    from ipyagent.core import Session


def _configure_inspect(parser: argparse.ArgumentParser) -> None:
    file_args(parser)
    budget_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


@command("inspect", _configure_inspect)
def run_inspect(args: argparse.Namespace) -> int:
    """Show a session's entries, compactions, tokens and budget."""
    loaded = load_session_file(args)
    session = loaded.session
    budget = budget_of(args, loaded.settings)
    path = session.path()
    counts: dict[str, int] = {}
    for entry in session.entries:
        key = entry["type"] if entry["type"] != "message" else "message:" + str(entry["message"].get("role", "?"))
        counts[key] = counts.get(key, 0) + 1
    compactions = [{"id": e["id"], "tokensBefore": e.get("tokensBefore"), "firstKeptEntryId": e.get("firstKeptEntryId"),
                    "fromHook": bool(e.get("fromHook"))} for e in session.compactions()]
    on_path = {c["id"] for c in compactions}
    off_path = [e["id"] for e in session.entries if e.get("type") == "compaction" and e["id"] not in on_path]
    report: dict[str, Any] = {
        "session_id": session.header.get("id"),
        "session_name": loaded.name,
        "entries": len(session),
        "entry_types": counts,
        "leaf": session.leaf_id,
        "path_length": len(path),
        "context_messages": len(session.build_context()),
        "context_tokens": recorded_request_tokens(session),  # the widget's count (system prompt and tools included)
        "estimator": session.estimator.name,
        "compactions": compactions,  # those on the current path, oldest first
        "compactions_off_path": off_path,  # on branches the leaf is not on
        "set_aside_lines": len(session.set_aside),
        "problems": [str(p) for p in session.load_report.problems],
    }
    if budget.context_window:
        report["budget"] = _budget_report(session, budget)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_inspect(report, session)
    return 0


def _budget_report(session: Session, budget: Budget) -> dict[str, Any]:
    window = budget.context_window
    assert window
    fitted = fit_budget(budget.settings, window)  # derived where the session set none, never negative
    settings = fitted.settings(budget.settings.enabled)
    return {"context_window": window, "window_source": budget.window_source,
            "threshold": fitted.threshold, "reserve_tokens": fitted.reserve_tokens,
            "keep_recent_tokens": fitted.keep_recent_tokens, "reserve_from": fitted.reserve_from,
            "keep_recent_from": fitted.keep_from, "budget_text": fitted.describe(), "problem": fitted.problem,
            "auto_compact": settings.enabled,
            "percent": round(100 * recorded_request_tokens(session) / window, 1),
            "would_compact": should_compact(recorded_request_tokens(session), window, settings)}


def _print_inspect(report: dict[str, Any], session: Session) -> None:
    name = f"{report['session_name']!r} " if report["session_name"] else ""
    print(f"session {name}{report['session_id']}: {report['entries']} entries, leaf {report['leaf']}, "
          f"path {report['path_length']} entries")
    print("entry types: " + ", ".join(f"{k} {v}" for k, v in sorted(report["entry_types"].items())))
    print(f"context: {report['context_messages']} messages, {report['context_tokens']:,} tokens "
          f"({report['estimator']})")
    compactions, off_path = report["compactions"], report["compactions_off_path"]
    if off_path:
        total = len(compactions) + len(off_path)
        print(f"{total} compaction{'s' * (total != 1)}, {len(compactions)} on this path (the other "
              f"{len(off_path)} {'are' if len(off_path) != 1 else 'is'} on branches the leaf is not on; "
              "the context uses the latest one on its path)")
    for c in compactions:
        before = f"{c['tokensBefore']:,}" if isinstance(c["tokensBefore"], (int, float)) else "?"
        print(f"compaction {c['id']}: {before} tokens before, first kept {c['firstKeptEntryId']}"
              + (" (from a hook)" if c["fromHook"] else ""))
    if report["set_aside_lines"]:
        print(f"set aside: {report['set_aside_lines']} line(s) of the Pi file could not be loaded; "
              "an export writes them back in their places")
    if "budget" in report:
        b = report["budget"]
        source = f" ({b['window_source']})" if b["window_source"] else ""
        line = f"budget: {b['percent']}% of {b['context_window']:,}{source}; "
        if b["reserve_from"] == "set" and b["keep_recent_from"] == "set":
            line += f"compacts above {b['threshold']:,} (reserve {b['reserve_tokens']:,})"
        else:
            line += f"compacts above {b['threshold']:,} · {b['budget_text']}"
        if not b["auto_compact"]:
            line += "; automatic compaction is off"
        elif b["would_compact"]:
            line += " — would compact now"
        print(line)
    else:
        print("budget: no context window known (pass --context-window N)")
    if "budget" in report and report["budget"]["problem"]:
        print(report["budget"]["problem"])
    if report["problems"]:
        print(session.load_report.summary(), file=sys.stderr)
