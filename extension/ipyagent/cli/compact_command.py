"""``ipyagent compact FILE``: plan a compaction (``--dry-run``) or run it through the configured
summary model and write the compacted session back."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ipyagent.cli.common import CliError, budget_args, budget_of, command, file_args, load_session_file
from ipyagent.compaction.settings import CompactionSettings

if TYPE_CHECKING:
    from ipyagent.compaction.prepare import CompactionPlan
    from ipyagent.core import Session


def _configure_compact(parser: argparse.ArgumentParser) -> None:
    file_args(parser)
    budget_args(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--focus", help="additional focus for the summary")
    parser.add_argument("--summary-model", help="provider:model for the summary (default: $IPYAGENT_MODEL)")
    parser.add_argument("-o", "--output", help="where to write the compacted session (default: in place)")


@command("compact", _configure_compact)
def run_compact(args: argparse.Namespace) -> int:
    """Plan (--dry-run) or run a compaction of a session."""
    loaded = load_session_file(args)
    session = loaded.session
    if session.load_report.problems:  # what could not be loaded is said, never silently skipped
        print(session.load_report.summary(), file=sys.stderr)
    budget = budget_of(args, loaded.settings)  # the options, else the notebook's stored settings
    # what the session did not set is derived from its window (Pi's values when none is known)
    settings = CompactionSettings(budget.settings.reserve_tokens, budget.settings.keep_recent_tokens).fitted(
        budget.context_window)
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
    return compact_file(session, plan, settings, args)


def compact_file(session: Session, plan: CompactionPlan | None, settings: CompactionSettings,
                 args: argparse.Namespace) -> int:
    """Compact ``session`` by ``plan`` with the summary model and write it (not a dry run)."""
    from ipyagent.agent.provider_summarizer import summarizer_for  # the provider-backed path
    from ipyagent.agent.run_config import RunConfig
    from ipyagent.compaction.summarizer import SummarizerError
    from ipyagent.core import CompactionCancelled

    if plan is None:
        print(json.dumps({"nothing_to_compact": True}) if args.json else "nothing to compact")
        return 0
    model = args.summary_model or os.environ.get("IPYAGENT_MODEL")
    if not model:
        raise CliError("no summary model: pass --summary-model provider:model or set IPYAGENT_MODEL")
    try:
        entry = session.compact(summarizer_for(RunConfig(model=model)), settings, focus=args.focus, plan=plan)
    except (SummarizerError, CompactionCancelled, ValueError) as exc:
        raise CliError(str(exc)) from None
    target = Path(args.output or args.file)
    if target.suffix == ".ipynb" or Path(args.file).suffix == ".ipynb":
        from ipyagent.store.ipynb import save_session_to_notebook_file

        save_session_to_notebook_file(session, Path(args.file), target, name=getattr(args, "session", None))
    else:
        session.to_pi_jsonl(target)
    after = session.context_tokens()
    if args.json:
        print(json.dumps({"compaction_id": entry["id"], "tokens_before": entry["tokensBefore"],
                          "tokens_after": after, "first_kept_entry_id": entry["firstKeptEntryId"],
                          "written": str(target)}))
    else:
        print(f"compacted {entry['tokensBefore']:,} → {after:,} tokens; wrote {target}")
        print(entry["summary"])
    return 0
