"""``%agent new``, ``sessions``, ``switch``, ``tree``, ``checkout``, ``export``, ``import``, ``load``: the
sessions of this kernel, their trees, and moving them in and out of files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.display import display

from ipyagent.agent.budget import recorded_request_tokens
from ipyagent.agent.redaction import Redactor, Replacements
from ipyagent.agent.run_config import SavedSettings
from ipyagent.core import Session
from ipyagent.display.stream import error_bundle, short_args
from ipyagent.kernel.magics.commands import SESSIONS, argument, command, magic_arguments, parse_argstring
from ipyagent.session.messages import prompt_text, text_of
from ipyagent.shapes import Entry
from ipyagent.text import one_line

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["session_markdown", "tree_lines"]


# ---- sessions ----------------------------------------------------------------------------------


@command("new", group=SESSIONS)
@magic_arguments()
@argument("name", nargs="?", default=None, help="the new session's name (default: session-N)")
def agent_new(runtime: AgentRuntime, rest: str) -> None:
    """Start a new, empty session and make it the active one."""
    args = parse_argstring(agent_new, rest)
    name = args.name or runtime.next_session_name()
    try:
        runtime.new_session(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"new session {name!r} (active)")



@command("sessions", group=SESSIONS)
@magic_arguments()
def agent_sessions(runtime: AgentRuntime, rest: str) -> None:
    """The sessions in this kernel."""
    parse_argstring(agent_sessions, rest)
    if not runtime.slots:
        print("no sessions yet (%%agent starts one)")
        return
    for name, slot in runtime.slots.items():
        mark = "*" if name == runtime.active else " "
        print(f"{mark} {name}: {len(slot.session)} entries, {recorded_request_tokens(slot.session):,} context tokens, "
              f"{len(slot.session.compactions())} compactions ({slot.origin})")



@command("switch", group=SESSIONS)
@magic_arguments()
@argument("name", help="the session to make active")
def agent_switch(runtime: AgentRuntime, rest: str) -> None:
    """Make another session the active one."""
    args = parse_argstring(agent_switch, rest)
    if args.name not in runtime.slots:
        raise UsageError(f"no session {args.name!r}; sessions: {', '.join(runtime.slots) or 'none'} "
                         "(%agent new NAME creates one)")
    runtime.active = args.name
    print(f"active session: {args.name!r}")



# ---- the tree ----------------------------------------------------------------------------------


def _entry_line(entry: Entry) -> str:
    kind = entry.get("type")
    if kind == "message":
        message = entry["message"]
        role = message.get("role", "?")
        if role == "assistant":
            text = text_of(message.get("content"), " ")
            calls = [c for c in message.get("content") or [] if isinstance(c, dict) and c.get("type") == "toolCall"]
            bits = [one_line(text, 50)] if text.strip() else []
            bits += [f"{c.get('name')}({short_args(c.get('arguments') or {}, 30)})" for c in calls]
            return f"assistant: {' + '.join(bits) or '(empty)'}"
        if role == "toolResult":
            return f"result {message.get('toolName', '')}: {one_line(text_of(message.get('content'), ' '), 40)}"
        cell = f" [cell {message['executionCount']}]" if message.get("executionCount") is not None else ""
        return f"{role}{cell}: {one_line(prompt_text(message), 60)}"
    if kind == "compaction":
        return (f"compaction: {entry.get('tokensBefore', 0):,} tokens summarised, "
                f"first kept {entry.get('firstKeptEntryId')}")
    if kind == "branch_summary":
        return f"branch summary: {one_line(entry.get('summary', ''), 50)}"
    if kind == "custom_message":
        return f"note ({entry.get('customType')}): {one_line(str(entry.get('content', '')), 50)}"
    return str(kind)


TREE_LIMIT = 400  # lines %agent tree prints unless asked for more


def tree_lines(session: Session, limit: int | None = None) -> list[str]:
    """The session tree, one entry a line; ``*`` marks the current path, ``←`` the leaf. With
    ``limit``, a longer tree shows its first quarter and its end, the leaf's line always, and a line
    saying how many were left out and how to see them (only the lines shown are formatted)."""
    on_path = {e["id"] for e in session.path()}
    labels = session.labels()
    children: dict[str | None, list[Entry]] = {}
    for entry in session.entries:
        if entry.get("type") == "label":
            continue
        children.setdefault(session.parent_id(entry), []).append(entry)  # a missing parent: a root
    order: list[tuple[Entry, int]] = []
    stack: list[tuple[Entry, int]] = [(e, 0) for e in reversed(children.get(None, []))]
    while stack:
        entry, depth = stack.pop()
        order.append((entry, depth))
        kids = children.get(entry["id"], [])
        step = 1 if len(kids) > 1 else 0
        stack.extend((k, depth + step) for k in reversed(kids))

    def line(entry: Entry, depth: int) -> str:
        mark = "*" if entry["id"] in on_path else " "
        leaf = "  ← leaf" if entry["id"] == session.leaf_id else ""
        label = f" [{labels[entry['id']]}]" if entry["id"] in labels else ""
        return f"{mark} {'  ' * depth}{entry['id']} {_entry_line(entry)}{label}{leaf}"

    if limit is None or len(order) <= limit:
        return [line(e, d) for e, d in order]
    head, tail = limit // 4, limit - limit // 4
    hidden = order[head:len(order) - tail]
    middle = [(f"  … {len(hidden):,} entries not shown (`%agent tree --all` shows all {len(order):,}, "
               "`--limit N` about N lines) …")]
    leaf = next((i for i, (e, _) in enumerate(hidden) if e["id"] == session.leaf_id), None)
    if leaf is not None:
        middle.append(line(*hidden[leaf]))
    return [line(e, d) for e, d in order[:head]] + middle + [line(e, d) for e, d in order[len(order) - tail:]]


@command("tree", group=SESSIONS)
@magic_arguments()
@argument("--all", action="store_true", help="every entry, however many")
@argument("--limit", type=int, default=TREE_LIMIT, metavar="N",
          help=f"at most about N lines: the first quarter and the end (default {TREE_LIMIT})")
def agent_tree(runtime: AgentRuntime, rest: str) -> None:
    """The session's tree of entries (branches indented; * the current path)."""
    args = parse_argstring(agent_tree, rest)
    slot = runtime.slot()
    lines = tree_lines(slot.session, None if args.all else max(4, args.limit))
    print("\n".join(lines) if lines else "(empty session)")



@command("checkout", group=SESSIONS)
@magic_arguments()
@argument("id", help="the entry to move to (a prompt: the leaf goes before it, so it can be asked again)")
@argument("--summarize", action="store_true", help="summarise the branch being left, as a branch summary")
@argument("--focus", default=None, help="what the branch summary should focus on")
def agent_checkout(runtime: AgentRuntime, rest: str) -> None:
    """Move the session to another point of its tree."""
    args = parse_argstring(agent_checkout, rest)
    slot = runtime.slot()
    config = runtime.run_config()
    summarizer = None
    if args.summarize:
        agent = runtime.agent_for(slot, config)
        try:
            summarizer = agent.compactor.summarizer()
        except ValueError as exc:
            raise UsageError(f"--summarize needs a model: {exc}") from None
    from ipyagent.session.tree import SessionError

    try:
        entry = slot.session.navigate(args.id, summarize=args.summarize, summarizer=summarizer, focus=args.focus)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a failed branch summary is shown; the session is unchanged
        display(error_bundle(str(exc), title="Checkout failed"), raw=True)
        return
    print(f"leaf: {slot.session.leaf_id}" + (f" (branch summary {entry['id']})" if entry else ""))
    runtime.persist(slot, config)



# ---- export, import, load ----------------------------------------------------------------------


def session_markdown(name: str, session: Session, settings: SavedSettings | None = None) -> str:
    """The session as a Markdown transcript: the same as ``ipyagent export --format markdown``."""
    from ipyagent.display.journal_view import transcript_markdown

    return transcript_markdown(session, name, settings)


@command("export", group=SESSIONS)
@magic_arguments()
@argument("--format", "-f", choices=["pi", "markdown"], default="pi", help="Pi JSONL (default) or Markdown")
@argument("-o", "--output", default=None, help="file to write (default: show it)")
def agent_export(runtime: AgentRuntime, rest: str) -> None:
    """The active session as a Pi session file or Markdown."""
    args = parse_argstring(agent_export, rest)
    slot = runtime.slot()
    redactor = Redactor.configured(runtime.run_config().provider_options)  # no key leaves in an export
    text = redactor.text(slot.session.to_pi_jsonl() if args.format == "pi"
                         else session_markdown(slot.name, slot.session, slot.settings))
    if args.output:
        if args.format == "pi":  # bytes: a set-aside line that is not UTF-8 goes back as it was
            Path(args.output).write_bytes(redactor.bytes(slot.session.to_pi_jsonl_bytes()))
        else:
            Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(slot.session)} entries, {args.format})")
    else:
        print(text)



@command("import", group=SESSIONS)
@magic_arguments()
@argument("file", help="a Pi session file (.jsonl)")
@argument("--name", default=None, help="the session's name (default: the file's name)")
def agent_import(runtime: AgentRuntime, rest: str) -> None:
    """A Pi session file as a new session (made active)."""
    args = parse_argstring(agent_import, rest)
    try:
        session = Session.from_file(args.file)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot import {args.file}: {exc}") from None
    name = args.name or Path(args.file).stem
    if name in runtime.slots:
        raise UsageError(f"a session named {name!r} exists; pass --name")
    from ipyagent.kernel.persistence import SessionSlot

    runtime.slots[name] = SessionSlot(name, session, origin="load")
    runtime.active = name
    found = Replacements()
    redactor = Redactor.configured(runtime.run_config().provider_options)  # as persist stores them
    for entry in session.entries:
        found.add(redactor.data_counted(entry)[1], f"entry {entry['id']}")
    print(f"imported {len(session)} entries as session {name!r} (active)"
          + (f"\n{session.load_report.summary()}" if session.load_report.problems else "")
          + (f"\n{found.count} value(s) that look like credentials (a URL's user:password@, a key configured "
             f"here) are stored as *** in the notebook: {found.places()}" if found.count else ""))
    runtime.persist(runtime.slots[name])



@command("load", group=SESSIONS)
@magic_arguments()
@argument("path", help="a notebook (.ipynb: metadata and journal outputs) or a Pi session file (.jsonl)")
def agent_load(runtime: AgentRuntime, rest: str) -> None:
    """Merge the sessions stored in another file into this kernel, by entry id."""
    args = parse_argstring(agent_load, rest)
    from ipyagent.agent.run_config import upgrade_saved_settings
    from ipyagent.kernel.persistence import SessionSlot, merge_into
    from ipyagent.store.hydration import load_path

    try:
        found, report = load_path(args.path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load {args.path}: {exc}") from None
    summary, new = [], []
    for name, stored in found.sessions.items():
        session = found.to_session(name)
        if name in runtime.slots:
            added = merge_into(runtime.slots[name], session)
            summary.append(f"{name}: {added} new entries merged")
        else:
            runtime.slots[name] = SessionSlot(name, session, upgrade_saved_settings(stored.settings), origin="load")
            new.append(name)
            summary.append(f"{name}: {len(session)} entries")
    if found.active in runtime.slots:
        runtime.active = found.active
    print("loaded " + ("; ".join(summary) if summary else "no sessions") + f" from {args.path}"
          + (f"\n{report.summary()}" if getattr(report, "problems", None) else ""))
    for line in runtime.settings_policy.load_notes(runtime.slots, new):
        print(line)
    for name in found.sessions:
        runtime.persist(runtime.slots[name])
