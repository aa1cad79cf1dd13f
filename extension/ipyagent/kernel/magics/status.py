"""``%agent status``, ``config``, ``model``, ``context``, ``summary``: what the session and the next
request hold, and the settings."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ipyagent.agent.budget import RequestBudget
from ipyagent.agent.prompt.pinned import active_pins, pins_note
from ipyagent.display.budget_widget import cost_text, static_bundle
from ipyagent.display.run_view import facts_for
from ipyagent.display.summary_view import readable_summary
from ipyagent.display.untrusted import escape_html, markdown_html
from ipyagent.kernel.magics.commands import (
    COMPACTION,
    CONTEXT,
    STATUS_AND_SETTINGS,
    argument,
    command,
    magic_arguments,
    parse_argstring,
    show,
)
from ipyagent.session import masking
from ipyagent.session.entries import last_compaction_note
from ipyagent.text import chars4, one_line

if TYPE_CHECKING:
    from ipyagent.kernel.persistence import SessionSlot
    from ipyagent.kernel.runtime import AgentRuntime
    from ipyagent.providers.registry import ProviderRegistry

__all__ = ["NEXT_ACTIVITY_LABEL", "context_report"]


def budget_words(budget: RequestBudget) -> str:
    """The budget's count of the context (the widget's and the trigger's figure), and what it is."""
    tokens = budget.request_tokens()
    counted = budget.session.context_state().last_usage_index >= 0
    basis = ("the server's count of the last request plus estimates since" if counted
             else "estimated: no usage since the last compaction")
    parts = ("the system prompt and tools" if budget.tool_specs
             else "the system prompt (no tools: the last cell ran with --no-tools)")
    return f"the budget counts {tokens:,} tokens with {parts} ({basis})"


# ---- status, config, model ---------------------------------------------------------------------


def _local_model(config: Any, providers: ProviderRegistry) -> bool:
    """Whether the session model is served from this machine or a private network (free)."""
    from ipyagent.providers.pricing import is_local_server

    if not config.model:
        return False
    try:
        provider = providers.resolve(config.model, config.provider_options)[0]
    except ValueError:
        return False
    base_url = getattr(provider, "base_url", None)
    return isinstance(base_url, str) and is_local_server(base_url)


@command("status", group=STATUS_AND_SETTINGS)
@magic_arguments()
def agent_status(runtime: AgentRuntime, rest: str) -> None:
    """The active session's budget, the model, and how the session is saved."""
    parse_argstring(agent_status, rest)
    slot = runtime.slot()
    facts = facts_for(runtime.budget_for(slot), slot.name)
    lines = [f"session {slot.name!r}: {len(slot.session)} entries, leaf {slot.session.leaf_id}",
             f"persistence: {runtime.bridge_state()}"]
    result = runtime.load_result
    shown = runtime.bridge.path if runtime.bridge is not None else None
    if shown:  # the frontend's path follows a rename; the kernel's (found at load) does not
        lines.append(f"notebook path: {shown} (the frontend's, relative to the server's root)")
    elif result is not None:
        lines.append(f"notebook path: {result.path or 'unknown'} ({result.path_source or 'not searched'})")
    # the widget's words (both count the session's recorded calls); before any call, the server's kind
    lines.append(cost_text(facts.costs) or ("cost: free (local server)"
                                            if _local_model(runtime.run_config(), runtime.providers)
                                            else "cost: no priced calls yet"))
    lines.append("pins: " + pins_note(active_pins(slot.session.entries)))
    lines.append(last_compaction_note(slot.session.compactions()) or "last compaction: none yet")
    lines.append(runtime.idle.status())
    if facts.budget is not None and facts.budget.problem:
        lines.append(facts.budget.problem)
    # a snapshot: nothing updates it, so no widget (it would die with the kernel)
    display(static_bundle(facts), raw=True)
    print("\n".join(lines))



@command("config", group=STATUS_AND_SETTINGS)
@magic_arguments()
def agent_config(runtime: AgentRuntime, rest: str) -> None:
    """Every Agent setting (change one with %config Agent.NAME = VALUE)."""
    parse_argstring(agent_config, rest)
    rows = runtime.config.settings_table()
    width = max(len(r[0]) for r in rows)
    text = "\n".join(f"Agent.{name:<{width}} = {value!r}" for name, value, _ in rows)
    table = "".join(f"<tr><td><code>Agent.{escape_html(n)}</code></td><td><code>{escape_html(repr(v))}</code></td>"
                    f"<td style='text-align:left'>{escape_html(h)}</td></tr>" for n, v, h in rows)
    show(text, f"<table>{table}</table>")



@command("model", group=STATUS_AND_SETTINGS)
@magic_arguments()
@argument("model", nargs="?", default=None, help="provider:model to use from now on")
def agent_model(runtime: AgentRuntime, rest: str) -> None:
    """Show or set the model (same as %config Agent.model = "M")."""
    args = parse_argstring(agent_model, rest)
    if args.model:
        try:
            runtime.providers.parse(args.model)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        runtime.config.model = args.model
    print(f"model: {runtime.config.model or '(none: set %config Agent.model)'}"
          + (f"; summaries: {runtime.config.summary_model}" if runtime.config.summary_model else ""))



@command("use-recorded-model", group=STATUS_AND_SETTINGS)
@magic_arguments()
def agent_use_recorded_model(runtime: AgentRuntime, rest: str) -> None:
    """Use the model this session was recorded with (a notebook never chooses it: the load names it
    when your settings differ); same as %config Agent.model = "that model"."""
    parse_argstring(agent_use_recorded_model, rest)
    from ipyagent.agent.run_config import recorded_model

    slot = runtime.slots.get(runtime.active)
    recorded = recorded_model(slot.settings) if slot is not None else ""
    if not recorded:
        raise UsageError(f"session {runtime.active!r} records no model; %agent model shows the one in use")
    runtime.config.model = recorded
    print(f"model: {recorded} (recorded in this notebook; from now on it is your setting, and your key for it pays)")



NEXT_ACTIVITY_LABEL = "notebook activity (goes before the next %%agent prompt)"


def context_report(runtime: AgentRuntime, slot: SessionSlot) -> tuple[list[tuple[str, int, str]], int]:
    """Each part of the next request (the system prompt's parts, tools, each message, and the
    notebook-activity block the next prompt would carry): (label, tokens, text)."""
    from ipyagent.agent.loop import AgentLoop
    from ipyagent.kernel.cell_context import KernelNotebookContext

    config = runtime.run_config()
    probe = AgentLoop(slot.session, config=config, namespace={}, tools=runtime.tools_for(slot),
                      notebook=KernelNotebookContext(runtime, slot.name), providers=runtime.providers)
    model_id = runtime.providers.parse(config.model)[1] if config.model else "(no model)"
    request = probe.request(model_id)
    estimator = slot.session.estimator
    specs = [t.to_dict() for t in request.tools]
    prompt_parts = probe.system.parts(slot.session, probe.tools)
    parts = [(f"system prompt: {p.label}", chars4(p.text), p.text) for p in prompt_parts]
    skipped = probe.system.context.skipped if probe.system.context is not None else ()
    if skipped:
        parts.append((f"instruction files not read ({len(skipped)}; not sent)", 0,
                      "\n".join(f"{s.path}: {s.reason}" for s in skipped)))
    parts.append((f"tools ({len(specs)})", chars4(specs) if specs else 0, json.dumps(specs, indent=1)))
    messages = request.messages
    # each message's entry id, for %agent mask, checkout and recall (unless a context hook rewrote them)
    ids = slot.session.context_state().llm_entry_ids
    ids = ids if len(ids) == len(messages) else []
    for i, message in enumerate(messages):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, indent=1, ensure_ascii=False)
        entry = f" (id {ids[i]})" if ids else ""
        parts.append((f"{i + 1}. {message.get('role')}{entry}", estimator.estimate(message), text))
    block = probe.notebook_activity_block()
    if block:
        parts.append((NEXT_ACTIVITY_LABEL, chars4(block), block))
    masked = slot.session.masked_entries()
    if masked:
        listed = "\n".join(f"{e['id']}: {masking.placeholder(e)}" for e in masked if masking.is_tool_result(e))
        results = f"{len(masked)} tool result{'s' * (len(masked) != 1)}"
        label = (f"masked: {results} sent as placeholders ({masking.masked_chars(masked):,} "
                 "chars left out; recall returns them)")
        parts.append((label, 0, listed))
    redact = probe.redactor().text  # instruction files, pins, old entries: no key is shown
    return [(redact(label), tokens, redact(text)) for label, tokens, text in parts], sum(p[1] for p in parts)


@command("context", group=CONTEXT)
@magic_arguments()
def agent_context(runtime: AgentRuntime, rest: str) -> None:
    """Exactly what the next request would send, with token counts per part."""
    parse_argstring(agent_context, rest)
    slot = runtime.slot()
    parts, total = context_report(runtime, slot)
    messages = sum(1 for label, _, _ in parts if label[:1].isdigit())
    headline = (f"next request: {messages} messages, ≈{total:,} tokens by the chars/4 estimates below; "
                f"{budget_words(runtime.budget_for(slot))}")
    plain = [headline]
    rows = []
    for label, tokens, text in parts:
        plain.append(f"--- {label} ({tokens:,} tokens)\n{text}")
        rows.append(f"<details><summary><code>{escape_html(label)}</code> — {tokens:,} tokens: "
                    f"{escape_html(one_line(text, 80))}</summary><pre style='white-space:pre-wrap'>"
                    f"{escape_html(text)}</pre></details>")
    show("\n".join(plain), f"<div><b>Next request</b>: {escape_html(headline[len('next request: '):])}</div>"
                            f"{''.join(rows)}")



@command("summary", group=COMPACTION)
@magic_arguments()
def agent_summary(runtime: AgentRuntime, rest: str) -> None:
    """The latest compaction summary of the active session."""
    parse_argstring(agent_summary, rest)
    summary = runtime.slot().session.latest_summary()
    if summary is None:
        print("no compaction yet (%compact makes one)")
        return
    show(summary, f"<div class='ipyagent-summary'>{markdown_html(readable_summary(summary))}</div>")
