"""``%%agent`` (run the agent on the cell body) and ``%agent …`` (the commands).

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

``%agent COMMAND`` dispatches to the registry of :mod:`ipyagent.kernel.magics.commands`; a run's
life in the cell is :class:`~ipyagent.kernel.cell_run.CellRun`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from ipyagent.agent.prompt.interpolate import interpolate
from ipyagent.agent.run_config import recorded_model
from ipyagent.display.untrusted import escape_html
from ipyagent.kernel.cell_context import KernelLookup, cell_identity
from ipyagent.kernel.cell_run import CellRun
from ipyagent.kernel.code_cells import begin_code_cells
from ipyagent.kernel.magics.commands import (
    argument,
    cell_magic_parser,
    dispatch,
    line_cell_magic,
    magic_arguments,
    parse_argstring,
)
from ipyagent.kernel.persistence import add_reset_notice
from ipyagent.session.messages import CELL_PROMPT_FIELD

if TYPE_CHECKING:
    from ipyagent.core import Session
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["AgentMagics", "fork_point", "run_agent_cell"]


def fork_point(session: Session, cell_id: str | None) -> tuple[bool, str | None]:
    """Whether a run of ``cell_id`` re-runs a prompt on the current path, and the entry to branch to
    (the parent of that earlier prompt: the latest prompt of this cell on the path)."""
    if not cell_id:
        return False, None
    for entry in reversed(session.path()):
        if (entry.get("type") == "message" and entry["message"].get("role") == "user"
                and entry["message"].get("cellId") == cell_id):
            return True, session.parent_id(entry)
    return False, None


@magic_arguments()
@argument("--session", "-s", default=None, help="the session to use (created if new; becomes the active one)")
@argument("--model", "-m", default=None, help="the model for this cell only (provider:model)")
@argument("--no-tools", action="store_true", help="run without tools (the model can only answer)")
@argument("--no-context", action="store_true",
          help="do not send what happened in the notebook since the previous prompt (this cell only)")
@argument("--cells", action="store_true",
          help="insert each successful python call as a code cell below (Agent.code_cells = 'insert')")
def _agent_cell_args(line: str, cell: str) -> None:
    """Run the agent: the cell body is the prompt ({In[n]}, {Out[n]}, {Err[n]} and {name} are filled in)."""


cell_magic_parser("%%agent", _agent_cell_args)


def interpolation_bundle(note: str) -> dict[str, str]:
    return {"text/plain": note,
            "text/html": f"<div style='color:#666;font-size:90%;font-style:italic'>{escape_html(note)}</div>"}


def run_agent_cell(runtime: AgentRuntime, line: str, cell: str) -> Any:
    args = parse_argstring(_agent_cell_args, line)
    job = runtime.idle.running()
    if job is not None and fork_point(job.slot.session, cell_identity(runtime.shell)[0])[0] \
            and job.slot.name == (args.session or runtime.active):
        # a re-run of an earlier cell forks the session: a summary of the branch it leaves is not wanted
        runtime.idle.cancel("a re-run of an earlier %%agent cell forked the session")
    runtime.idle.join()  # a background compaction ends first (this cell then uses its result)
    runtime.absorb_push()
    prompt = cell.strip("\n")
    if not prompt.strip():
        raise UsageError("%%agent needs a prompt: write it in the cell body, below the %%agent line.")
    if args.session:
        runtime.active = args.session
    slot = runtime.slot(args.session)
    config = runtime.run_config(slot=slot, model=args.model, notebook_context=False if args.no_context else None)
    if not config.model:
        recorded = recorded_model(slot.settings)
        raise UsageError('No model configured. Set one with %config Agent.model = "openai:gpt-4.1-mini" '
                         "(or the IPYAGENT_MODEL environment variable), or pass --model."
                         + (f" This notebook was recorded with {recorded}: `%agent use-recorded-model` uses it "
                            "(your key pays)." if recorded else ""))
    note = runtime.settings_policy.model_note(slot) if not args.model else ""
    if note:  # before the first request of this session
        print(note)
    shell = runtime.shell
    cell_id, _ = cell_identity(shell)
    rerun, branch_to = fork_point(slot.session, cell_id)
    if rerun:
        slot.session.branch(branch_to)
    with CellRun(runtime, slot, config, tools=[] if args.no_tools else None, ask=config.tool_approval == "ask",
                 show_failures=True) as run:
        extra = {k: v for k, v in (("cellId", run.cell_id), ("executionCount", run.execution_count)) if v is not None}
        text = prompt
        if "{" in prompt:
            filled = interpolate(prompt, KernelLookup(shell, runtime.activity))
            if filled.text != prompt:
                text = filled.text
                extra[CELL_PROMPT_FIELD] = prompt
            if filled.note() and run.view is not None:
                run.view.renderer.show(interpolation_bundle(filled.note()))
        replaying = run.replay()
        run.offer_tools(args.no_tools)
        slot.tools_offered = not args.no_tools
        reproducing = replaying is not None and replaying.cell.prompt.strip() == prompt.strip()
        if rerun and not reproducing:
            run.note("Re-run of an earlier cell: the session forks from before its previous prompt.")
        if not reproducing:
            add_reset_notice(slot)  # a model reads this prompt: tell it about the new namespace first
        run.at_exit(begin_code_cells(runtime, run.agent, args.cells, run.note))
        compact_after = not run.idle_after()
        with runtime.activity.paused():
            run.agent.prompt(text, compact_after=compact_after, **extra)
    return None


# %agent commands that move to another branch or session or change the model: a compaction in the
# kernel's idle time is cancelled (no entry); every other command but help waits for a running one
# to end and leaves one still waiting for the kernel to be idle armed
_CANCELLING = {"new", "switch", "checkout", "load", "import"}


def settle_background_compaction(runtime: AgentRuntime, line: str) -> None:
    name, _, rest = line.strip().partition(" ")
    name = name or "status"
    if name in _CANCELLING or (name == "model" and rest.strip()):
        runtime.idle.cancel(f"%agent {name}")
    elif name != "help":
        runtime.idle.join(drop_waiting=False)  # one still waiting starts once the kernel is idle


@magics_class
class AgentMagics(Magics):
    def __init__(self, shell: Any, runtime: AgentRuntime):
        super().__init__(shell)  # type: ignore[no-untyped-call]  # IPython's (untyped_calls_exclude misses super())
        self.runtime = runtime

    @line_cell_magic
    def agent(self, line: str = "", cell: str | None = None) -> Any:
        # the docstring (``%agent?``) is written from the parsers when the magics are registered
        if cell is not None:
            return run_agent_cell(self.runtime, line, cell)
        settle_background_compaction(self.runtime, line)
        self.runtime.absorb_push()
        with self.runtime.replay.following(self.runtime):  # a replayed %agent pin is the recorded pin
            return dispatch(self.runtime, line)
