"""``%agent mask ENTRY | --tool-results-before N`` · ``%agent unmask [ENTRY]``: forget old tool
results without a summary.

A mask is a Pi 1.6 ``context_edit`` entry (``ipyagent/session/masking.py``): the tool call stays,
its result is replaced by a placeholder that names the entry, and ``recall(entry_id)`` returns the
result in full. No model is called. The edit is saved with the notebook like every other entry,
and Pi reads the exported session the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ipyagent.kernel.magics.commands import CONTEXT, argument, command, magic_arguments, parse_argstring
from ipyagent.session import masking
from ipyagent.session.tree import SessionError
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

def _report(verb: str, runtime: AgentRuntime, slot: Any, entries: list[Entry], before: int) -> None:
    after = runtime.budget_for(slot).request_tokens()
    hint = "; recall(entry_id) returns a masked one in full" if verb == "masked" else ""
    print(f"{verb} {len(entries)} tool result{'s' if len(entries) != 1 else ''} in session {slot.name!r}: "
          f"context {before:,} → {after:,} tokens (with the system prompt and tools, as the budget counts them)"
          f"{hint}")


@command("mask", group=CONTEXT)
@magic_arguments()
@argument("entry", nargs="?",
          help="the id of a tool-result entry to hide (as %agent context and the explorer show it)")
@argument("--tool-results-before", type=int, default=None, metavar="N",
          help="hide every tool result but those of the last N turns (1: keep the latest turn's; 0: hide them "
               "all); a turn is a prompt and what followed it, and the kept end of a turn whose prompt a "
               "compaction summarised counts as one")
def agent_mask(runtime: AgentRuntime, rest: str) -> None:
    """Hide old tool results behind a placeholder (a context edit; no summary, no model call)."""
    args = parse_argstring(agent_mask, rest)
    slot = runtime.slot()
    session = slot.session
    if args.entry is None and args.tool_results_before is None:
        masked = session.masked_entries()
        if not masked:
            print(f"nothing masked in session {slot.name!r} (%agent mask ENTRY or --tool-results-before N)")
        for entry in masked:
            print(f"{entry['id']}  {masking.placeholder(entry) if masking.is_tool_result(entry) else '(edited)'}")
        return
    if args.entry is not None and args.tool_results_before is not None:
        raise UsageError("%agent mask: give an entry or --tool-results-before N, not both")
    if args.tool_results_before is not None and args.tool_results_before < 0:
        raise UsageError("%agent mask --tool-results-before needs a number of turns, 0 or more")
    before = runtime.budget_for(slot).request_tokens()
    try:
        if args.entry is not None:
            edit = session.mask(args.entry)
            written = [] if edit is None else [edit]
            if edit is None:
                print(f"entry {args.entry} is masked already")
                return
        else:
            written = session.mask_tool_results(args.tool_results_before)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    runtime.persist(slot)
    _report("masked", runtime, slot, written, before)


@command("unmask", group=CONTEXT)
@magic_arguments()
@argument("entry", nargs="?", help="the masked entry to show again (default: every masked entry)")
def agent_unmask(runtime: AgentRuntime, rest: str) -> None:
    """Put masked tool results back into the context (one more context edit each)."""
    args = parse_argstring(agent_unmask, rest)
    slot = runtime.slot()
    before = runtime.budget_for(slot).request_tokens()
    try:
        written = slot.session.unmask(args.entry)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    if written:
        runtime.persist(slot)
    _report("unmasked", runtime, slot, written, before)
