"""``%compact [focus]`` and ``%%compact`` (the cell body is the focus): compact now.

Progress while it runs (the budget widget: "Compacting 84,312 tokens… 3.2 s"), then the tokens
before → after and the summary. Compaction changes only the session (a new entry in the
metadata); it never touches a visible cell.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ipyagent.compaction.summarizer import SummarizerError
from ipyagent.core import CompactionCancelled, NothingToCompact
from ipyagent.display.stream import error_bundle, note_bundle
from ipyagent.display.run_view import RunView, begin_replay, cell_identity
from ipyagent.display.untrusted import escape_html, markdown_html

__all__ = ["CompactMagics", "run_compact"]


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to compact (default: the active one)")
@argument("focus", nargs="*", help="what the summary should pay special attention to")
def _compact_args(line: str) -> None:
    """%compact [--session NAME] [focus …] — summarise older history now; %%compact takes the focus from the cell."""


def _summary_bundle(entry: dict[str, Any], before: int, after: int, duration: float) -> dict[str, str]:
    head = (f"Compacted: {before:,} → {after:,} tokens in {duration:.1f} s "
            f"(first kept entry {entry.get('firstKeptEntryId')}).")
    summary = str(entry.get("summary", ""))  # a model's (or a hook's) text: rendered by the untrusted gate
    return {
        "text/plain": f"{head}\n\n{summary}",
        "text/html": (f"<div><b>{escape_html(head)}</b></div><details><summary>Summary</summary>"
                      f"{markdown_html(summary)}</details>"),
    }


def run_compact(runtime: Any, line: str, cell: str | None = None) -> None:
    args = parse_argstring(_compact_args, line)
    runtime.absorb_push()
    focus = " ".join(args.focus).strip()
    if cell is not None and cell.strip():
        focus = (focus + "\n" + cell.strip()).strip()
    if args.session and args.session not in runtime.slots:
        raise UsageError(f"no session {args.session!r}; sessions: {', '.join(runtime.slots) or 'none'}")
    config = runtime.agent_config()
    if not (config.summary_model or config.model):
        raise UsageError('No model configured for the summary. Set %config Agent.model (or Agent.summary_model).')
    slot = runtime.slot(args.session)
    agent = runtime.agent_for(slot, config)
    view = RunView(runtime, slot, agent, config)
    cell_id, _ = cell_identity(runtime.shell)
    replaying = begin_replay(runtime, slot, agent, cell_id, config, view)
    unsubscribe = agent.subscribe(view.renderer)
    before = slot.session.context_tokens()
    interrupted = False
    import time

    started = time.monotonic()
    try:
        entry = agent.compact(focus or None, extra={"cellId": cell_id} if cell_id else None)
    except KeyboardInterrupt:
        interrupted = True
        entry = None
    except NothingToCompact as exc:
        entry = None
        view.renderer.show(note_bundle(str(exc)))
    except CompactionCancelled as exc:
        entry = None
        view.renderer.show(note_bundle(str(exc)))
    except (SummarizerError, ValueError) as exc:
        entry = None
        view.renderer.show(error_bundle(str(exc), title="Compaction failed"))
    finally:
        unsubscribe()
        if replaying is not None:
            runtime.replay.detach(agent)
    if entry is not None:
        after = slot.session.context_tokens()
        view.renderer.show(_summary_bundle(entry, before, after, time.monotonic() - started))
    view.close()
    if interrupted:
        view.renderer.show(note_bundle("Compaction interrupted; the session is unchanged."))
    runtime.persist(slot, config)
    if interrupted:
        raise KeyboardInterrupt


@magics_class
class CompactMagics(Magics):
    def __init__(self, shell: Any, runtime: Any):
        super().__init__(shell)
        self.runtime = runtime

    @line_cell_magic
    def compact(self, line: str = "", cell: str | None = None) -> None:
        """%compact [--session NAME] [focus]: summarise older history now. %%compact: the cell is the focus."""
        run_compact(self.runtime, line, cell)
