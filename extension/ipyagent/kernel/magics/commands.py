"""``%agent COMMAND …``: a table of small functions, each with its own ``magic_arguments``.

    %agent status | config | model [M] | new [NAME] | sessions | switch NAME | tree
    %agent checkout ID [--summarize] [--focus TEXT] | context | summary
    %agent export [--format pi|markdown] [-o FILE] | import FILE [--name NAME] | load PATH | help
    %agent pin TEXT | pins | unpin N            (kernel/magics/pins.py)
    %agent explore [--session NAME]             (the compaction explorer, explorer/widget.py)
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ipyagent.agent.prompt.notebook_context import prompt_text
from ipyagent.core import Session
from ipyagent.display.stream import error_bundle, short_args
from ipyagent.display.untrusted import escape_html, markdown_html
from ipyagent.display.budget_widget import _chars4, budget_facts, cost_text, static_bundle
from ipyagent.session.messages import text_of

__all__ = ["COMMANDS", "dispatch", "context_report", "tree_lines", "session_markdown"]

Command = Callable[[Any, str], Any]
COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    def register(func: Command) -> Command:
        COMMANDS[name] = func
        return func

    return register


def dispatch(runtime: Any, line: str) -> Any:
    name, _, rest = line.strip().partition(" ")
    name = name or "status"
    func = COMMANDS.get(name)
    if func is None:
        raise UsageError(f"%agent: unknown command {name!r}. Commands: {', '.join(sorted(COMMANDS))} "
                         "(%agent help; %%agent runs the agent on a cell).")
    return func(runtime, rest.strip())


def _show(text: str, html_view: str | None = None) -> None:
    """``text/plain`` and, if given, ``text/html`` — built only with ``ipyagent.display.untrusted``
    (session names, labels, entry text and summaries all come from metadata or a model)."""
    data = {"text/plain": text}
    if html_view is not None:
        data["text/html"] = html_view
    display(data, raw=True)


def _one_line(text: str, limit: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---- status, config, model ---------------------------------------------------------------------


@magic_arguments()
def agent_status(runtime: Any, rest: str) -> None:
    """%agent status — the active session's budget, the model, and how the session is saved."""
    parse_argstring(agent_status, rest)
    slot = runtime.slot()
    config = runtime.agent_config()
    from ipyagent.agent.tools import default_tools

    agent = runtime.agent_for(slot, config, approve=slot.agent.approve if slot.agent else None)
    try:
        info = agent.window_info()
        window, source, factor = info.window, info.describe(), agent.token_factor()
    except Exception:
        window, source, factor = config.context_window, "", 1.0
    facts = budget_facts(slot.session, replace(config, system_prompt=agent.system_prompt()), window=window,
                         tool_specs=[t.spec() for t in default_tools()], session_name=slot.name,
                         window_source=source, token_factor=factor)
    lines = [f"session {slot.name!r}: {len(slot.session)} entries, leaf {slot.session.leaf_id}",
             f"persistence: {runtime.bridge_state()}"]
    result = runtime.load_result
    if result is not None:
        lines.append(f"notebook path: {result.path or 'unknown'} ({result.path_source or 'not searched'})")
    lines.append(cost_text(facts.costs) or "cost: no priced calls yet")
    display(static_bundle(facts), raw=True)  # a snapshot: nothing updates it, so no widget (it would die with the kernel)
    print("\n".join(lines))


COMMANDS["status"] = agent_status


@magic_arguments()
def agent_config(runtime: Any, rest: str) -> None:
    """%agent config — every Agent setting (change one with %config Agent.NAME = VALUE)."""
    parse_argstring(agent_config, rest)
    rows = runtime.config.settings_table()
    width = max(len(r[0]) for r in rows)
    text = "\n".join(f"Agent.{name:<{width}} = {value!r}" for name, value, _ in rows)
    table = "".join(f"<tr><td><code>Agent.{escape_html(n)}</code></td><td><code>{escape_html(repr(v))}</code></td>"
                    f"<td style='text-align:left'>{escape_html(h)}</td></tr>" for n, v, h in rows)
    _show(text, f"<table>{table}</table>")


COMMANDS["config"] = agent_config


@magic_arguments()
@argument("model", nargs="?", default=None, help="provider:model to use from now on")
def agent_model(runtime: Any, rest: str) -> None:
    """%agent model [M] — show or set the model (same as %config Agent.model = "M")."""
    args = parse_argstring(agent_model, rest)
    if args.model:
        from ipyagent.providers.registry import parse_model_string

        try:
            parse_model_string(args.model)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        runtime.config.model = args.model
    print(f"model: {runtime.config.model or '(none: set %config Agent.model)'}"
          + (f"; summaries: {runtime.config.summary_model}" if runtime.config.summary_model else ""))


COMMANDS["model"] = agent_model


# ---- sessions ----------------------------------------------------------------------------------


@magic_arguments()
@argument("name", nargs="?", default=None, help="the new session's name (default: session-N)")
def agent_new(runtime: Any, rest: str) -> None:
    """%agent new [NAME] — start a new, empty session and make it the active one."""
    args = parse_argstring(agent_new, rest)
    name = args.name or runtime.next_session_name()
    try:
        runtime.new_session(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"new session {name!r} (active)")


COMMANDS["new"] = agent_new


@magic_arguments()
def agent_sessions(runtime: Any, rest: str) -> None:
    """%agent sessions — the sessions in this kernel."""
    parse_argstring(agent_sessions, rest)
    if not runtime.slots:
        print("no sessions yet (%%agent starts one)")
        return
    for name, slot in runtime.slots.items():
        mark = "*" if name == runtime.active else " "
        print(f"{mark} {name}: {len(slot.session)} entries, {slot.session.context_tokens():,} context tokens, "
              f"{len(slot.session.compactions())} compactions ({slot.origin})")


COMMANDS["sessions"] = agent_sessions


@magic_arguments()
@argument("name", help="the session to make active")
def agent_switch(runtime: Any, rest: str) -> None:
    """%agent switch NAME — make another session the active one."""
    args = parse_argstring(agent_switch, rest)
    if args.name not in runtime.slots:
        raise UsageError(f"no session {args.name!r}; sessions: {', '.join(runtime.slots) or 'none'} "
                         "(%agent new NAME creates one)")
    runtime.active = args.name
    print(f"active session: {args.name!r}")


COMMANDS["switch"] = agent_switch


# ---- the tree ----------------------------------------------------------------------------------


def _entry_line(entry: dict[str, Any]) -> str:
    kind = entry.get("type")
    if kind == "message":
        message = entry["message"]
        role = message.get("role", "?")
        if role == "assistant":
            text = text_of(message.get("content"), " ")
            calls = [c for c in message.get("content") or [] if isinstance(c, dict) and c.get("type") == "toolCall"]
            bits = [_one_line(text, 50)] if text.strip() else []
            bits += [f"{c.get('name')}({short_args(c.get('arguments') or {}, 30)})" for c in calls]
            return f"assistant: {' + '.join(bits) or '(empty)'}"
        if role == "toolResult":
            return f"result {message.get('toolName', '')}: {_one_line(text_of(message.get('content'), ' '), 40)}"
        cell = f" [cell {message['executionCount']}]" if message.get("executionCount") is not None else ""
        return f"{role}{cell}: {_one_line(prompt_text(message), 60)}"
    if kind == "compaction":
        return (f"compaction: {entry.get('tokensBefore', 0):,} tokens summarised, "
                f"first kept {entry.get('firstKeptEntryId')}")
    if kind == "branch_summary":
        return f"branch summary: {_one_line(entry.get('summary', ''), 50)}"
    if kind == "custom_message":
        return f"note ({entry.get('customType')}): {_one_line(str(entry.get('content', '')), 50)}"
    return str(kind)


def tree_lines(session: Session) -> list[str]:
    """The session tree, one entry a line; ``*`` marks the current path, ``←`` the leaf."""
    on_path = {e["id"] for e in session.path()}
    labels = session.labels()
    children: dict[str | None, list[dict[str, Any]]] = {}
    for entry in session.entries:
        if entry.get("type") == "label":
            continue
        children.setdefault(session.parent_id(entry), []).append(entry)  # a missing parent: a root
    lines: list[str] = []
    stack: list[tuple[dict[str, Any], int]] = [(e, 0) for e in reversed(children.get(None, []))]
    while stack:
        entry, depth = stack.pop()
        kids = children.get(entry["id"], [])
        mark = "*" if entry["id"] in on_path else " "
        leaf = "  ← leaf" if entry["id"] == session.leaf_id else ""
        label = f" [{labels[entry['id']]}]" if entry["id"] in labels else ""
        lines.append(f"{mark} {'  ' * depth}{entry['id']} {_entry_line(entry)}{label}{leaf}")
        step = 1 if len(kids) > 1 else 0
        stack.extend((k, depth + step) for k in reversed(kids))
    return lines


@magic_arguments()
def agent_tree(runtime: Any, rest: str) -> None:
    """%agent tree — the session's tree of entries (branches indented; * the current path)."""
    parse_argstring(agent_tree, rest)
    slot = runtime.slot()
    lines = tree_lines(slot.session)
    print("\n".join(lines) if lines else "(empty session)")


COMMANDS["tree"] = agent_tree


@magic_arguments()
@argument("id", help="the entry to move to (a prompt: the leaf goes before it, so it can be asked again)")
@argument("--summarize", action="store_true", help="summarise the branch being left, as a branch summary")
@argument("--focus", default=None, help="what the branch summary should focus on")
def agent_checkout(runtime: Any, rest: str) -> None:
    """%agent checkout ID [--summarize] — move the session to another point of its tree."""
    args = parse_argstring(agent_checkout, rest)
    slot = runtime.slot()
    config = runtime.agent_config()
    summarizer = None
    if args.summarize:
        agent = runtime.agent_for(slot, config)
        try:
            summarizer = agent.summarizer()
        except ValueError as exc:
            raise UsageError(f"--summarize needs a model: {exc}") from None
    from ipyagent.session.tree import SessionError

    try:
        entry = slot.session.navigate(args.id, summarize=args.summarize, summarizer=summarizer, focus=args.focus)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:
        display(error_bundle(str(exc), title="Checkout failed"), raw=True)
        return
    print(f"leaf: {slot.session.leaf_id}" + (f" (branch summary {entry['id']})" if entry else ""))
    runtime.persist(slot, config)


COMMANDS["checkout"] = agent_checkout


# ---- context, summary --------------------------------------------------------------------------


NEXT_ACTIVITY_LABEL = "notebook activity (goes before the next %%agent prompt)"


def context_report(runtime: Any, slot: Any) -> tuple[list[tuple[str, int, str]], int]:
    """Each part of the next request (the system prompt's parts, tools, each message, and the
    notebook-activity block the next prompt would carry): (label, tokens, text)."""
    from ipyagent.agent.loop import Agent

    from ipyagent.agent.tools import default_tools
    from ipyagent.kernel.context import KernelNotebookContext
    from ipyagent.providers.registry import parse_model_string

    config = runtime.agent_config()
    probe = Agent(slot.session, config=config, namespace={}, tools=default_tools(),
                  notebook=KernelNotebookContext(runtime, slot.name))
    model_id = parse_model_string(config.model)[1] if config.model else "(no model)"
    request = probe._request(model_id)
    estimator = slot.session.estimator
    specs = [t.to_dict() for t in request.tools]
    parts = [(f"system prompt: {p.label}", _chars4(p.text), p.text) for p in probe.system_prompt_parts()]
    parts.append((f"tools ({len(specs)})", _chars4(specs) if specs else 0, json.dumps(specs, indent=1)))
    messages = request.messages
    for i, message in enumerate(messages):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, indent=1, ensure_ascii=False)
        parts.append((f"{i + 1}. {message.get('role')}", estimator.estimate(message), text))
    block = probe.notebook_activity_block()
    if block:
        parts.append((NEXT_ACTIVITY_LABEL, _chars4(block), block))
    return parts, sum(p[1] for p in parts)


@magic_arguments()
def agent_context(runtime: Any, rest: str) -> None:
    """%agent context — exactly what the next request would send, with token counts per part."""
    parse_argstring(agent_context, rest)
    slot = runtime.slot()
    parts, total = context_report(runtime, slot)
    messages = sum(1 for label, _, _ in parts if label[:1].isdigit())
    plain = [f"next request: {messages} messages, ≈{total:,} tokens (estimated)"]
    rows = []
    for label, tokens, text in parts:
        plain.append(f"--- {label} ({tokens:,} tokens)\n{text}")
        rows.append(f"<details><summary><code>{escape_html(label)}</code> — {tokens:,} tokens: "
                    f"{escape_html(_one_line(text, 80))}</summary><pre style='white-space:pre-wrap'>"
                    f"{escape_html(text)}</pre></details>")
    _show("\n".join(plain), f"<div><b>Next request</b>: ≈{total:,} tokens</div>{''.join(rows)}")


COMMANDS["context"] = agent_context


@magic_arguments()
def agent_summary(runtime: Any, rest: str) -> None:
    """%agent summary — the latest compaction summary of the active session."""
    parse_argstring(agent_summary, rest)
    summary = runtime.slot().session.latest_summary()
    if summary is None:
        print("no compaction yet (%compact makes one)")
        return
    _show(summary, f"<div class='ipyagent-summary'>{markdown_html(summary)}</div>")


COMMANDS["summary"] = agent_summary


# ---- export, import, load ----------------------------------------------------------------------


def session_markdown(name: str, session: Session, settings: dict[str, Any] | None = None) -> str:
    """The session as a Markdown transcript: the same as ``ipyagent export --format markdown``."""
    from ipyagent.store.journal import transcript_markdown

    return transcript_markdown(session, name, settings)


@magic_arguments()
@argument("--format", "-f", choices=["pi", "markdown"], default="pi", help="Pi JSONL (default) or Markdown")
@argument("-o", "--output", default=None, help="file to write (default: show it)")
def agent_export(runtime: Any, rest: str) -> None:
    """%agent export [--format pi|markdown] [-o FILE] — the active session as a Pi session file or Markdown."""
    args = parse_argstring(agent_export, rest)
    slot = runtime.slot()
    text = (slot.session.to_pi_jsonl() if args.format == "pi"
            else session_markdown(slot.name, slot.session, slot.settings))
    if args.output:
        if args.format == "pi":  # bytes: a set-aside line that is not UTF-8 goes back as it was
            Path(args.output).write_bytes(slot.session.to_pi_jsonl_bytes())
        else:
            Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(slot.session)} entries, {args.format})")
    else:
        print(text)


COMMANDS["export"] = agent_export


@magic_arguments()
@argument("file", help="a Pi session file (.jsonl)")
@argument("--name", default=None, help="the session's name (default: the file's name)")
def agent_import(runtime: Any, rest: str) -> None:
    """%agent import FILE [--name NAME] — a Pi session file as a new session (made active)."""
    args = parse_argstring(agent_import, rest)
    try:
        session = Session.from_file(args.file)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot import {args.file}: {exc}") from None
    name = args.name or Path(args.file).stem
    if name in runtime.slots:
        raise UsageError(f"a session named {name!r} exists; pass --name")
    from ipyagent.store.persistence import SessionSlot

    runtime.slots[name] = SessionSlot(name, session, origin="load")
    runtime.active = name
    print(f"imported {len(session)} entries as session {name!r} (active)"
          + (f"\n{session.load_report.summary()}" if session.load_report.problems else ""))
    runtime.persist(runtime.slots[name])


COMMANDS["import"] = agent_import


@magic_arguments()
@argument("path", help="a notebook (.ipynb: metadata and journal outputs) or a Pi session file (.jsonl)")
def agent_load(runtime: Any, rest: str) -> None:
    """%agent load PATH — merge the sessions stored in another file into this kernel, by entry id."""
    args = parse_argstring(agent_load, rest)
    from ipyagent.agent.config import upgrade_saved_settings
    from ipyagent.store.persistence import SessionSlot, load_path, merge_into

    try:
        found, report = load_path(args.path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load {args.path}: {exc}") from None
    summary = []
    for name, stored in found.sessions.items():
        session = found.to_session(name)
        if name in runtime.slots:
            added = merge_into(runtime.slots[name], session)
            summary.append(f"{name}: {added} new entries merged")
        else:
            runtime.slots[name] = SessionSlot(name, session, upgrade_saved_settings(stored.settings), origin="load")
            summary.append(f"{name}: {len(session)} entries")
    if found.active in runtime.slots:
        runtime.active = found.active
    print("loaded " + ("; ".join(summary) if summary else "no sessions") + f" from {args.path}"
          + (f"\n{report.summary()}" if getattr(report, "problems", None) else ""))
    for name in found.sessions:
        runtime.persist(runtime.slots[name])


COMMANDS["load"] = agent_load


# ---- the compaction explorer ---------------------------------------------------------------------


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to explore (default: the active one)")
@argument("--window", type=int, default=None, help="the window to start with (default: the model's)")
@argument("--reserve", type=int, default=None, help="the reserve to start with (default: Agent.reserve_tokens)")
@argument("--keep-recent", type=int, default=None, dest="keep_recent",
          help="keep-recent to start with (default: Agent.keep_recent_tokens)")
@argument("--estimator", default=None, help="chars4, tiktoken, chars4x1.2 or tiktokenx1.1 (default: the session's)")
def agent_explore(runtime: Any, rest: str) -> None:
    """%agent explore [--session NAME] — the compaction explorer: move the sliders, watch the cut point move."""
    args = parse_argstring(agent_explore, rest)
    if args.session and args.session not in runtime.slots:
        raise UsageError(f"no session {args.session!r}; sessions: {', '.join(runtime.slots) or 'none'}")
    from ipyagent.explorer.widget import explorer_for_slot

    try:
        explorer = explorer_for_slot(runtime, args.session, window=args.window, reserve=args.reserve,
                                     keep_recent=args.keep_recent, estimator=args.estimator)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    display(explorer)


COMMANDS["explore"] = agent_explore


@magic_arguments()
def agent_help(runtime: Any, rest: str) -> None:
    """%agent help — this list."""
    lines = ["%%agent [--session NAME] [--model M] [--no-tools] [--no-context]   run the agent; the cell body is "
             "the prompt ({In[n]}, {Out[n]}, {Err[n]}, {name} are filled in)",
             "%compact [focus] / %%compact                         summarise older history now", ""]
    for name, func in COMMANDS.items():
        parser = getattr(func, "parser", None)
        doc = ((parser.description if parser is not None else func.__doc__) or "").strip()
        lines.append(doc.splitlines()[0] if doc else f"%agent {name}")
    lines += ["", "Settings: %agent config; change with %config Agent.NAME = VALUE "
              "(or c.Agent.NAME in ipython_config.py)."]
    print("\n".join(lines))


COMMANDS["help"] = agent_help

for _name in ("status", "config", "model", "new", "sessions", "switch", "tree", "checkout", "context", "summary",
              "export", "import", "load", "explore", "help"):
    assert _name in COMMANDS, _name
del _name
