"""The magics: ``%%agent`` (run the agent), ``%agent …`` (commands), ``%compact`` / ``%%compact``.

``%%agent [--session NAME] [--model M] [--no-tools]`` — the cell body is the prompt. The user
message carries the cell id (from the execute request's metadata) and the execution count.
Re-running a cell whose id already has a prompt on the current path forks the session from
before that prompt, so "Restart & Run All" reproduces the session the visible cells describe.

The ``%agent`` commands live in :mod:`ipyagent.notebook.magics_commands` (a dispatch table);
compaction in :mod:`ipyagent.notebook.magics_compact`.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ipyagent.notebook.rendering import RunRenderer, error_bundle, make_approver, note_bundle
from ipyagent.notebook.widget import BudgetWidget, budget_facts, static_bundle

__all__ = ["AgentMagics", "register_magics", "unregister_magics", "run_agent_cell", "cell_identity",
           "fork_point", "RunView"]


def cell_identity(shell: Any) -> tuple[str | None, int | None]:
    """(cell id, execution count) of the cell being run (cell id: JupyterLab/nbformat id, or None)."""
    cell_id = None
    get_parent = getattr(shell, "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent() or {}
            cell_id = (parent.get("metadata") or {}).get("cellId")
        except Exception:
            cell_id = None
    # The running cell's number: IPython 9 has already advanced ``execution_count`` to the next
    # cell while this one runs; the display hook's prompt count is this cell's in 8 and 9.
    count = getattr(getattr(shell, "displayhook", None), "prompt_count", None)
    if not isinstance(count, int):
        count = getattr(shell, "execution_count", None)
    return (cell_id if isinstance(cell_id, str) and cell_id else None), (count if isinstance(count, int) else None)


def fork_point(session: Any, cell_id: str | None) -> tuple[bool, str | None]:
    """Whether a run of ``cell_id`` re-runs a prompt on the current path, and the entry to branch to
    (the parent of that earlier prompt: the latest prompt of this cell on the path)."""
    if not cell_id:
        return False, None
    for entry in reversed(session.path()):
        if (entry.get("type") == "message" and entry["message"].get("role") == "user"
                and entry["message"].get("cellId") == cell_id):
            return True, entry.get("parentId")
    return False, None


class RunView:
    """The outputs of one run: the live budget widget (optional) and the renderer."""

    def __init__(self, runtime: Any, slot: Any, agent: Any, config: Any):
        self.runtime, self.slot, self.agent, self.config = runtime, slot, agent, config
        self.widget = None
        self.handle = None
        if runtime.config.show_widget:
            try:
                self.widget = BudgetWidget(self.facts(""))
                self.handle = display(self.widget.bundle(), raw=True, display_id=True)
            except Exception:  # no ipywidgets: the static view is shown at the end
                self.widget = None
        self.renderer = RunRenderer(widget=self.widget, facts=self.facts,
                                    max_updates_per_second=runtime.config.max_updates_per_second)

    def facts(self, status: str) -> Any:
        try:
            window = self.agent.context_window()
        except Exception:
            window = self.config.context_window
        return budget_facts(self.slot.session, self.config, window=window,
                            tool_specs=[t.spec() for t in self.agent.tools.values()],
                            session_name=self.slot.name, status=status)

    def close(self) -> None:
        """Freeze the final facts into the widget's static views (for viewers without a kernel)."""
        self.renderer.finish()
        facts = self.facts("")
        if self.widget is not None and self.handle is not None:
            self.widget.update(facts)
            self.handle.update(self.widget.bundle(), raw=True)
        elif self.runtime.config.show_widget:
            display(static_bundle(facts), raw=True)


def close_dangling_calls(session: Any) -> int:
    """After an interrupt, give every tool call of the last assistant message that has no result an
    error result, so the stored session is always one a provider accepts. Returns how many."""
    from ipyagent.session.ids import now_ms
    from ipyagent.session.messages import tool_calls_of, tool_result_message

    path = session.path()
    for index in range(len(path) - 1, -1, -1):
        entry = path[index]
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
            break
    else:
        return 0
    answered = {e["message"].get("toolCallId") for e in path[index + 1:]
                if e.get("type") == "message" and e["message"].get("role") == "toolResult"}
    missing = [c for c in tool_calls_of(entry["message"]) if c.get("id") not in answered]
    for call in missing:
        session.append_message(tool_result_message(call.get("id", ""), call.get("name", ""),
                                                   "Not run: the user interrupted the run.", is_error=True,
                                                   timestamp=now_ms()))
    return len(missing)


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to use (created if new; becomes the active one)")
@argument("--model", "-m", default=None, help="the model for this cell only (provider:model)")
@argument("--no-tools", action="store_true", help="run without tools (the model can only answer)")
def _agent_cell_args(line: str, cell: str) -> None:
    """%%agent [--session NAME] [--model M] [--no-tools] — the cell body is the prompt."""


def begin_replay(runtime: Any, slot: Any, agent: Any, cell_id: str | None, config: Any, view: "RunView") -> bool:
    """Attach this cell's recording to the agent when replay applies (see ``notebook/replaying.py``)."""
    mode = runtime.config.replay
    if not runtime.replay.should_replay(mode, slot.name, cell_id, config.model, config.provider_options):
        return False

    def notice(text: str) -> None:
        view.renderer.show(note_bundle(text))

    attached = runtime.replay.attach(agent, slot.name, cell_id, rerun_tools=runtime.config.replay_tools,
                                     notice=notice)
    tools = ("recorded tool calls run again and are compared" if runtime.config.replay_tools
             else "recorded tool calls are not run again")
    live = "a live provider takes over if the run departs from it" if attached.live else "no live provider"
    notice(f"Replaying this cell's recorded responses (Agent.replay = {mode!r}); {tools}; {live}.")
    return True


def run_agent_cell(runtime: Any, line: str, cell: str) -> Any:
    args = parse_argstring(_agent_cell_args, line)
    runtime.absorb_push()
    prompt = cell.strip("\n")
    if not prompt.strip():
        raise UsageError("%%agent needs a prompt: write it in the cell body, below the %%agent line.")
    if args.session:
        runtime.active = args.session
    slot = runtime.slot(args.session)
    config = runtime.agent_config(model=args.model)
    if not config.model:
        raise UsageError('No model configured. Set one with %config Agent.model = "openai:gpt-4.1-mini" '
                         "(or the IPYAGENT_MODEL environment variable), or pass --model.")
    shell = runtime.shell
    cell_id, execution_count = cell_identity(shell)
    rerun, branch_to = fork_point(slot.session, cell_id)
    if rerun:
        slot.session.branch(branch_to)
    view_holder: dict[str, RunView] = {}

    def on_refusal(text: str) -> None:
        view = view_holder.get("view")
        if view is not None:
            view.renderer.show(note_bundle(text))

    approve = make_approver(on_refusal=on_refusal) if config.tool_approval == "ask" else None
    agent = runtime.agent_for(slot, config, tools=[] if args.no_tools else None, approve=approve)
    view = view_holder["view"] = RunView(runtime, slot, agent, config)
    if rerun:
        view.renderer.show(note_bundle("Re-run of an earlier cell: the session forks from before its previous prompt."))
    extra = {k: v for k, v in (("cellId", cell_id), ("executionCount", execution_count)) if v is not None}
    replaying = begin_replay(runtime, slot, agent, cell_id, config, view)
    unsubscribe = agent.subscribe(view.renderer)
    interrupted = False
    try:
        agent.prompt(prompt, **extra)
    except KeyboardInterrupt:
        interrupted = True
        close_dangling_calls(slot.session)
    except Exception as exc:  # a bug or an unexpected failure: readable, and the session is kept
        view.renderer.show(error_bundle(f"{type(exc).__name__}: {exc}", title="ipyagent failed"))
    finally:
        unsubscribe()
        if replaying:
            runtime.replay.detach(agent)
        view.close()
        if interrupted:
            view.renderer.show(note_bundle("Interrupted. The session keeps everything that arrived."))
        runtime.persist(slot, config)
    if interrupted:
        raise KeyboardInterrupt
    return None


@magics_class
class AgentMagics(Magics):
    def __init__(self, shell: Any, runtime: Any):
        super().__init__(shell)
        self.runtime = runtime

    @line_cell_magic
    def agent(self, line: str = "", cell: str | None = None) -> Any:
        """%%agent [--session NAME] [--model M] [--no-tools]: run the agent on the cell body.

        %agent COMMAND …: status, config, model, new, sessions, switch, tree, checkout, context,
        summary, export, import, load, help (``%agent help`` explains each).
        """
        if cell is not None:
            return run_agent_cell(self.runtime, line, cell)
        from ipyagent.notebook.magics_commands import dispatch

        self.runtime.absorb_push()
        return dispatch(self.runtime, line)


def register_magics(shell: Any, runtime: Any) -> None:
    from ipyagent.notebook.magics_compact import CompactMagics

    import ipyagent.notebook.magics_replay  # noqa: F401  (registers %agent replay)

    shell.register_magics(AgentMagics(shell, runtime))
    shell.register_magics(CompactMagics(shell, runtime))


def unregister_magics(shell: Any) -> None:
    magics = shell.magics_manager.magics
    for kind, name in (("line", "agent"), ("cell", "agent"), ("line", "compact"), ("cell", "compact")):
        magics[kind].pop(name, None)
