"""``%agent probe``: how much did the latest compaction lose, and does ``recall`` win it back?

Runs :class:`ipyagent.agent.probe.runner.ProbeRunner` on the active session and shows a score table per
kind and the tokens each way cost; the report, with every model response, is stored in the
session as a ``custom`` entry (Pi keeps such entries out of the context), so the notebook
records the probe and replays it offline like a ``%%agent`` cell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ipyagent.agent.probe.runner import RecordedResponse
from ipyagent.display.stream import error_bundle
from ipyagent.display.untrusted import escape_html
from ipyagent.kernel.cell_context import cell_identity
from ipyagent.kernel.cell_run import CellRun
from ipyagent.kernel.magics.commands import COMPACTION, argument, command, magic_arguments, parse_argstring
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.agent.probe.runner import ProbeReport
    from ipyagent.agent.run_config import RunConfig
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["agent_probe", "probe_bundle"]


@command("probe", group=COMPACTION)
@magic_arguments()
@argument("--model", "-m", default=None, help="provider:model that answers (default: Agent.model)")
@argument("--judge", default=None, help="provider:model that writes the questions and grades (default: --model)")
@argument("--questions", type=int, default=2, help="questions of each kind (default 2)")
@argument("--recompact", action="store_true", help="probe a fresh compaction of the same history")
@argument("--focus", default=None, help="additional focus for --recompact's summary")
def agent_probe(runtime: AgentRuntime, rest: str) -> None:
    """What the latest compaction lost: questions about what it summarised away, answered from the full
    history, the compacted context and the compacted context with recall, graded 0–5 by the judge."""
    args = parse_argstring(agent_probe, rest)
    from ipyagent.agent.probe.runner import PROBE_CUSTOM_TYPE, ProbeError
    from ipyagent.compaction.compact import NothingToCompact
    from ipyagent.compaction.summarizer import SummarizerError
    from ipyagent.core import CompactionCancelled
    from ipyagent.providers.errors import ProviderError

    if args.questions < 1:
        raise UsageError("--questions must be 1 or more")
    slot = runtime.slot()
    config = runtime.run_config()
    answering = _who_answers(runtime, slot.name, args, config)
    handle = display({"text/plain": "Probing…"}, raw=True, display_id=True)

    def progress(text: str) -> None:
        handle.update({"text/plain": f"Probing: {text}…"}, raw=True)

    with CellRun(runtime, slot, config, view=False, interrupted_note=None) as run:
        try:
            report = _probe(runtime, run, args, config, answering, progress)
        except (ProbeError, ProviderError, SummarizerError, NothingToCompact, CompactionCancelled, ValueError) as exc:
            handle.update(error_bundle(str(exc), title="Probe failed"), raw=True)
            return
        except KeyboardInterrupt:
            handle.update({"text/plain": "Probe interrupted; nothing was stored."}, raw=True)
            raise
        handle.update(probe_bundle(report), raw=True)
        entry: Entry = {"type": "custom", "customType": PROBE_CUSTOM_TYPE, "data": report.to_dict()}
        if run.cell_id:
            entry["cellId"] = run.cell_id
        slot.session.append(entry)


def _who_answers(runtime: AgentRuntime, name: str, args: Any, config: RunConfig) -> tuple[str, str, Any]:
    """(the answering model, the judge, the recorded responses when this cell replays its probe)."""
    from ipyagent.agent.probe.runner import RecordedResponses

    cell_id, _ = cell_identity(runtime.shell)
    recorded = _recorded(runtime, name, cell_id, args.model or config.model, config.provider_options)
    if recorded is not None:
        model, judge = str(recorded.get("model") or "replay:model"), str(recorded.get("judge") or "replay:model")
        return model, judge, RecordedResponses(recorded.get("recording") or [])
    model = args.model or config.model
    if not model:
        raise UsageError('No model for the probe: pass --model or set %config Agent.model = "…".')
    return model, args.judge or model, None


def _probe(runtime: AgentRuntime, run: CellRun, args: Any, config: RunConfig, answering: tuple[str, str, Any],
           progress: Callable[[str], None]) -> ProbeReport:
    """The probe of the slot's latest compaction (of a fresh one with ``--recompact``, or when
    there is none), its responses recorded in the report."""
    from ipyagent.agent.probe.runner import ProbeRunner, RecordingSummarizer, recompact
    from ipyagent.agent.provider_summarizer import summarizer_for

    model, judge, responses = answering
    recording: list[RecordedResponse] = []
    session = run.slot.session
    recompacted = args.recompact or not session.compactions()
    if recompacted:
        progress("compacting the history afresh")
        summarizer = responses if responses is not None else summarizer_for(
            config, model=config.summary_model or model, providers=runtime.providers)
        session = recompact(session, RecordingSummarizer(summarizer, recording), config.compaction,
                            focus=args.focus, describe=run.agent.ports.describe_namespace)
    report = ProbeRunner(session, model=model, judge=judge, per_kind=args.questions,
                         answer_provider=responses, judge_provider=responses,
                         provider_options=config.provider_options, max_retries=config.max_retries,
                         progress=progress, recording=recording, providers=runtime.providers,
                         tools=runtime.plugins.tools.tools()).run()
    report.recompacted, report.focus = recompacted, args.focus if recompacted else None
    return report


def _recorded(runtime: AgentRuntime, name: str, cell_id: str | None, model: str,
              provider_options: dict[str, dict[str, Any]] | None) -> dict[str, Any] | None:
    """The probe this cell recorded, when replay applies to it (``Agent.replay``, as for ``%%agent``)."""
    mode = runtime.config.replay
    recording = runtime.replay.recordings.get(name)
    if mode == "off" or not cell_id or recording is None:
        return None
    if mode != "on" and runtime.providers.configured(model, provider_options):
        return None
    from ipyagent.agent.probe.runner import PROBE_CUSTOM_TYPE

    runs = [e for e in recording.custom.get(cell_id, []) if e.get("customType") == PROBE_CUSTOM_TYPE
            and isinstance(e.get("data"), dict)]
    if not runs:
        return None
    key = (name, f"probe:{cell_id}")
    run = runtime.replay.runs[key]
    runtime.replay.runs[key] += 1
    data: dict[str, Any] = runs[min(run, len(runs) - 1)]["data"]  # a dict: checked above
    return data


def probe_bundle(report: Any) -> dict[str, str]:
    """The report as plain text and HTML (every text from a model or the session escaped)."""
    from ipyagent.agent.probe.runner import WAY_LABELS, WAYS

    def table(header: list[str], rows: list[list[str]]) -> str:
        head = "".join(f"<th>{escape_html(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{escape_html(c)}</td>" for c in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    details = []
    for item in report.items:
        answers = "".join(
            f"<li><b>{escape_html(WAY_LABELS[way])}</b> — score {escape_html(_score(item.answers[way]))}"
            f"{escape_html(_recalls(item.answers[way]))}: "
            f"{escape_html(item.answers[way].error or item.answers[way].text)}"
            f" <i>({escape_html(item.answers[way].reason)})</i></li>"
            for way in WAYS if way in item.answers)
        details.append(f"<li><b>{escape_html(item.kind)}</b>: {escape_html(item.question)}<br>"
                       f"reference: {escape_html(item.reference)}<ul>{answers}</ul></li>")
    html_view = (f"<div><b>{escape_html(report.heading())}</b></div>"
                 f"<div>Mean score (0–5)</div>"
                 f"{table(['kind', 'questions', *(WAY_LABELS[w] for w in WAYS)], report.rows())}"
                 f"{table(['tokens', 'input', 'output', 'calls'], report.token_rows())}"
                 f"<details><summary>Questions and answers</summary><ol>{''.join(details)}</ol></details>")
    return {"text/plain": report.text(), "text/html": html_view}


def _score(answer: Any) -> str:
    return "–" if answer.score is None else str(answer.score)


def _recalls(answer: Any) -> str:
    return f", {answer.recalls} recall call{'s' if answer.recalls != 1 else ''}" if answer.recalls else ""
