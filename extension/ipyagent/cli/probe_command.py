"""``ipyagent probe FILE --model M [--judge M2]``: how much did the latest compaction lose?

Questions of four kinds (recall, artifact, continuation, decision) are made from the part of the
session that was summarised away; the model answers each from the full history, from the
compacted context, and from the compacted context with ``recall``; the judge grades the answers
0–5. Prints a table per kind and the tokens each way cost (``--json``: the whole report). With
``--recompact`` (or a session without a compaction) the probe is of a fresh compaction of the
same history, made in memory with ``--summary-model``, ``--focus`` and the budget options, so
summary models, focus texts and settings can be compared. The file is never changed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ipyagent.agent.probe.runner import RecordedResponse
from ipyagent.cli.common import CliError, budget_args, budget_of, command, file_args, load_session_file


def _configure_probe(parser: argparse.ArgumentParser) -> None:
    file_args(parser)
    budget_args(parser)
    parser.add_argument("--model", help="provider:model that answers (default: $IPYAGENT_MODEL)")
    parser.add_argument("--judge", help="provider:model that writes the questions and grades (default: --model)")
    parser.add_argument("--questions", type=int, default=2, metavar="N", help="questions of each kind (default 2)")
    parser.add_argument("--recompact", action="store_true",
                        help="probe a fresh compaction of the same history instead of the latest one")
    parser.add_argument("--summary-model", help="provider:model for --recompact's summary (default: --model)")
    parser.add_argument("--focus", help="additional focus for --recompact's summary")
    parser.add_argument("--json", action="store_true", help="print the whole report as one JSON object")
    parser.add_argument("-o", "--output", help="also write the report (JSON) to this file")


@command("probe", _configure_probe)
def run_probe(args: argparse.Namespace) -> int:
    """Probe what the latest compaction lost (graded by a judge)."""
    from ipyagent.agent.probe.runner import ProbeError, ProbeRunner, Progress, RecordingSummarizer, recompact
    from ipyagent.agent.provider_summarizer import summarizer_for, summary_input_budget
    from ipyagent.agent.run_config import RunConfig
    from ipyagent.compaction.compact import NothingToCompact
    from ipyagent.compaction.summarizer import SummarizerError
    from ipyagent.core import CompactionCancelled
    from ipyagent.providers.errors import ProviderError

    model = args.model or os.environ.get("IPYAGENT_MODEL")
    if not model:
        raise CliError("no model: pass --model provider:model or set IPYAGENT_MODEL")
    if args.questions < 1:
        raise CliError("--questions must be 1 or more")
    loaded = load_session_file(args)
    session = loaded.session
    recording: list[RecordedResponse] = []
    recompacted = args.recompact or not session.compactions()
    progress: Progress = (lambda text: None) if args.json else (lambda text: print(f"probe: {text}", file=sys.stderr))
    try:
        if recompacted:
            progress("compacting the history afresh")
            summary_model = args.summary_model or model
            budget = budget_of(args, loaded.settings)
            # the summariser's input fits the window (--context-window, else the stored one), as in a session
            config = RunConfig(model=model, summary_model=summary_model, context_window=budget.context_window,
                                 compaction=budget.settings)
            summarizer = RecordingSummarizer(summarizer_for(config), recording)
            session = recompact(session, summarizer, budget.settings, focus=args.focus,
                                summary_input_tokens=summary_input_budget(config, budget.context_window))
        runner = ProbeRunner(session, model=model, judge=args.judge, per_kind=args.questions, progress=progress,
                             recording=recording)
        report = runner.run()
    except (ProbeError, ProviderError, SummarizerError, NothingToCompact, CompactionCancelled, ValueError) as exc:
        raise CliError(str(exc)) from exc
    report.recompacted, report.focus = recompacted, args.focus if recompacted else None
    data = report.to_dict()
    if args.output:
        Path(args.output).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    print(json.dumps(data, ensure_ascii=False) if args.json else report.text())
    return 0
