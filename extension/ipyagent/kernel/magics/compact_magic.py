"""``%compact [focus]`` and ``%%compact`` (the cell body is the focus): compact now.

Progress while it runs (the budget widget: "Compacting 84,312 tokens… 3.2 s"), then the tokens
before → after and the summary. Compaction changes only the session (a new entry in the
metadata); it never touches a visible cell.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from ipyagent.agent.budget import RequestBudget
from ipyagent.compaction.settings import unknown_window_note
from ipyagent.compaction.summarizer import SummarizerError
from ipyagent.core import CompactionCancelled, NothingToCompact
from ipyagent.display.stream import error_bundle
from ipyagent.display.summary_view import readable_summary
from ipyagent.display.untrusted import escape_html, markdown_html
from ipyagent.kernel.cell_run import CellRun
from ipyagent.kernel.magics.commands import (
    argument,
    cell_magic_parser,
    line_cell_magic,
    magic_arguments,
    parse_argstring,
)
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["CompactMagics", "run_compact"]


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to compact (default: the active one)")
@argument("focus", nargs="*", help="what the summary should pay special attention to")
def _compact_args(line: str) -> None:
    """Summarise older history now; %%compact takes the focus from the cell body."""


cell_magic_parser("%compact", _compact_args)


def _summary_bundle(entry: Entry, before: int, after: int, duration: float) -> dict[str, str]:
    head = (f"Compacted: {before:,} → {after:,} tokens in {duration:.1f} s "
            f"(first kept entry {entry.get('firstKeptEntryId')}).")
    summary = str(entry.get("summary", ""))  # a model's (or a hook's) text: rendered by the untrusted gate
    return {
        "text/plain": f"{head}\n\n{summary}",
        "text/html": (f"<div><b>{escape_html(head)}</b></div><details><summary>Summary</summary>"
                      f"{markdown_html(readable_summary(summary))}</details>"),
    }


def _nothing_to_compact(request_budget: RequestBudget, reason: str, tokens: int) -> str:
    """Why nothing was compacted; with the window unknown, what the kept part is and how to set it."""
    try:
        known = request_budget.window()
    except ValueError:
        known = None
    if known:
        return reason
    budget = request_budget.fitted()
    return (f"{reason.rstrip('.')} (the conversation holds about {tokens:,} tokens): "
            f"{unknown_window_note(budget.reserve_tokens, budget.keep_recent_tokens)}.")


def run_compact(runtime: AgentRuntime, line: str, cell: str | None = None) -> None:
    args = parse_argstring(_compact_args, line)
    if runtime.idle.join() is not None:  # it joined a compaction in the kernel's idle time: that is this one
        if not (cell or "".join(args.focus)).strip():
            print("ipyagent: the background compaction that was running compacted the session; "
                  "%compact again to compact further.")
            return
    runtime.absorb_push()
    focus = " ".join(args.focus).strip()
    if cell is not None and cell.strip():
        focus = (focus + "\n" + cell.strip()).strip()
    if args.session and args.session not in runtime.slots:
        raise UsageError(f"no session {args.session!r}; sessions: {', '.join(runtime.slots) or 'none'}")
    slot = runtime.slot(args.session)
    config = runtime.run_config(slot=slot)
    if not (config.summary_model or config.model):
        raise UsageError('No model configured for the summary. Set %config Agent.model (or Agent.summary_model).')
    note = runtime.settings_policy.model_note(slot)
    if note:  # before the summary request
        print(note)
    with CellRun(runtime, slot, config, interrupted_note="Compaction interrupted; the session is unchanged.") as run:
        run.replay()
        before = run.agent.budget.request_tokens()  # the budget's count, as the widget shows it
        started = time.monotonic()
        try:
            entry = run.agent.compact(focus or None, extra={"cellId": run.cell_id} if run.cell_id else None)
        except NothingToCompact as exc:
            run.note(_nothing_to_compact(run.agent.budget, str(exc), before))
        except CompactionCancelled as exc:
            run.note(str(exc))
        except (SummarizerError, ValueError) as exc:
            if run.view is not None:
                run.view.renderer.show(error_bundle(str(exc), title="Compaction failed"))
        else:
            after = run.agent.budget.request_tokens()
            if entry is not None and run.view is not None:  # (a manual compaction raises rather than None)
                run.view.renderer.show(_summary_bundle(entry, before, after, time.monotonic() - started))


@magics_class
class CompactMagics(Magics):
    def __init__(self, shell: Any, runtime: AgentRuntime):
        super().__init__(shell)  # type: ignore[no-untyped-call]  # IPython's (untyped_calls_exclude misses super())
        self.runtime = runtime

    @line_cell_magic
    def compact(self, line: str = "", cell: str | None = None) -> None:
        """%compact [--session NAME] [focus]: summarise older history now. %%compact: the cell is the focus."""
        run_compact(self.runtime, line, cell)
