"""``ipyagent compact FILE`` (not a dry run): compact through the configured summary model."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import SummarizerError
from ipyagent.core import CompactionCancelled, Session


def compact_file(session: Session, plan: CompactionPlan | None, settings: CompactionSettings,
                 args: argparse.Namespace) -> int:
    from ipyagent.agent.summarizer import ProviderSummarizer
    from ipyagent.cli import CliError

    if plan is None:
        print(json.dumps({"nothing_to_compact": True}) if args.json else "nothing to compact")
        return 0
    model = args.summary_model or os.environ.get("IPYAGENT_MODEL")
    if not model:
        raise CliError("no summary model: pass --summary-model provider:model or set IPYAGENT_MODEL")
    try:
        entry = session.compact(ProviderSummarizer(model), settings, focus=args.focus, plan=plan)
    except (SummarizerError, CompactionCancelled, ValueError) as exc:
        raise CliError(str(exc))
    target = Path(args.output or args.file)
    if target.suffix == ".ipynb" or Path(args.file).suffix == ".ipynb":
        from ipyagent.notebook.ipynb import save_session_to_notebook_file

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
