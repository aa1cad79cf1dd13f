"""The magics: ``%%agent`` (run the agent), ``%agent …`` (commands), ``%compact`` / ``%%compact``.

``%%agent [--session NAME] [--model M] [--no-tools] [--no-context] [--cells]`` — the cell body is
the prompt. The user message carries the cell id (from the execute request's metadata) and the
execution count; before the prompt it carries what happened in the notebook since the session's
previous prompt (``--no-context`` leaves that out once). ``{In[n]}``, ``{Out[n]}``, ``{Err[n]}`` and
``{name}`` in the prompt are filled in (``ipyagent.agent.prompt.interpolate``). ``--cells``: the run's
python code also goes into code cells below (``code_cells.py``).
Re-running a cell whose id already has a prompt on the current path forks the session from
before that prompt, so "Restart & Run All" reproduces the session the visible cells describe. A
replayed cell that reproduces its recording moves along the recorded entries instead of copying
them (``kernel/replay_control.py``), so re-running a recorded notebook leaves its session unchanged.

The ``%agent`` commands live in :mod:`ipyagent.kernel.magics.commands` (a dispatch table);
compaction in :mod:`ipyagent.kernel.magics.compact`; what both need to run in a cell in
:mod:`ipyagent.display.run_view`.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ipyagent.agent.prompt.interpolate import interpolate
from ipyagent.agent.prompt.notebook_context import CELL_PROMPT_FIELD
from ipyagent.kernel.code_cells import begin_code_cells
from ipyagent.kernel.context import KernelLookup
from ipyagent.kernel.magics.compact import CompactMagics
from ipyagent.store.persistence import add_reset_notice
from ipyagent.display.stream import error_bundle, make_approver, note_bundle
from ipyagent.display.run_view import RunView, begin_replay, cell_identity
from ipyagent.display.untrusted import escape_html

__all__ = ["AgentMagics", "register_magics", "unregister_magics", "run_agent_cell", "cell_identity",
           "fork_point", "RunView"]


def fork_point(session: Any, cell_id: str | None) -> tuple[bool, str | None]:
    """Whether a run of ``cell_id`` re-runs a prompt on the current path, and the entry to branch to
    (the parent of that earlier prompt: the latest prompt of this cell on the path)."""
    if not cell_id:
        return False, None
    for entry in reversed(session.path()):
        if (entry.get("type") == "message" and entry["message"].get("role") == "user"
                and entry["message"].get("cellId") == cell_id):
            return True, session.parent_id(entry)
    return False, None


def close_dangling_calls(session: Any) -> int:
    """After an interrupt, give every tool call of the last assistant message that has no result an
    error result, so the stored session is always one a provider accepts. Returns how many."""
    from ipyagent.session.ids import now_ms
    from ipyagent.session.messages import NOT_RUN_INTERRUPTED, tool_calls_of, tool_result_message

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
                                                   NOT_RUN_INTERRUPTED, is_error=True,
                                                   timestamp=now_ms()))
    return len(missing)


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to use (created if new; becomes the active one)")
@argument("--model", "-m", default=None, help="the model for this cell only (provider:model)")
@argument("--no-tools", action="store_true", help="run without tools (the model can only answer)")
@argument("--no-context", action="store_true",
          help="do not send what happened in the notebook since the previous prompt (this cell only)")
@argument("--cells", action="store_true",
          help="insert each successful python call as a code cell below (Agent.code_cells = 'insert')")
def _agent_cell_args(line: str, cell: str) -> None:
    """%%agent [--session NAME] [--model M] [--no-tools] [--no-context] [--cells] — the cell body is the prompt."""


def interpolation_bundle(note: str) -> dict[str, str]:
    return {"text/plain": note,
            "text/html": f"<div style='color:#666;font-size:90%;font-style:italic'>{escape_html(note)}</div>"}


def run_agent_cell(runtime: Any, line: str, cell: str) -> Any:
    args = parse_argstring(_agent_cell_args, line)
    runtime.absorb_push()
    prompt = cell.strip("\n")
    if not prompt.strip():
        raise UsageError("%%agent needs a prompt: write it in the cell body, below the %%agent line.")
    if args.session:
        runtime.active = args.session
    slot = runtime.slot(args.session)
    config = runtime.agent_config(model=args.model, notebook_context=False if args.no_context else None)
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
    extra = {k: v for k, v in (("cellId", cell_id), ("executionCount", execution_count)) if v is not None}
    text = prompt
    if "{" in prompt:
        filled = interpolate(prompt, KernelLookup(shell, runtime.activity))
        if filled.text != prompt:
            text = filled.text
            extra[CELL_PROMPT_FIELD] = prompt
        if filled.note():
            view.renderer.show(interpolation_bundle(filled.note()))
    replaying = begin_replay(runtime, slot, agent, cell_id, config, view)
    reproducing = replaying is not None and replaying.cell.prompt.strip() == prompt.strip()
    if rerun and not reproducing:
        view.renderer.show(note_bundle("Re-run of an earlier cell: the session forks from before its previous prompt."))
    if not reproducing:
        add_reset_notice(slot)  # a model reads this prompt: tell it about the new namespace first
    unsubscribe = agent.subscribe(view.renderer)
    stop_cells = begin_code_cells(runtime, agent, args.cells, lambda text: view.renderer.show(note_bundle(text)))
    interrupted = False
    try:
        with runtime.activity.paused():
            agent.prompt(text, **extra)
    except KeyboardInterrupt:
        interrupted = True
        close_dangling_calls(slot.session)
    except Exception as exc:  # a bug or an unexpected failure: readable, and the session is kept
        view.renderer.show(error_bundle(f"{type(exc).__name__}: {exc}", title="ipyagent failed"))
    finally:
        unsubscribe()
        stop_cells()
        if replaying is not None:
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
        """%%agent [--session NAME] [--model M] [--no-tools] [--no-context] [--cells]: run the agent on the cell body.

        %agent COMMAND …: status, config, model, new, sessions, switch, tree, checkout, context,
        summary, export, import, load, pin, pins, unpin, help (``%agent help`` explains each).
        """
        if cell is not None:
            return run_agent_cell(self.runtime, line, cell)
        from ipyagent.kernel.magics.commands import dispatch

        self.runtime.absorb_push()
        with self.runtime.replay.following(self.runtime):  # a replayed %agent pin is the recorded pin
            return dispatch(self.runtime, line)


def register_magics(shell: Any, runtime: Any) -> None:
    import ipyagent.kernel.magics.pins  # noqa: F401  (registers %agent pin, pins, unpin)
    import ipyagent.kernel.magics.probe  # noqa: F401  (registers %agent probe)
    import ipyagent.kernel.magics.replay  # noqa: F401  (registers %agent replay)

    shell.register_magics(AgentMagics(shell, runtime))
    shell.register_magics(CompactMagics(shell, runtime))


def unregister_magics(shell: Any) -> None:
    magics = shell.magics_manager.magics
    for kind, name in (("line", "agent"), ("cell", "agent"), ("line", "compact"), ("cell", "compact")):
        magics[kind].pop(name, None)
