"""One magic's run in a cell, from start to end (``%%agent``, ``%compact``, ``%agent probe``).

    with CellRun(runtime, slot, config, ask=True) as run:
        run.note("…")                 # a note in the cell's output
        run.replay()                  # this cell's recording, when it replays (None: live)
        run.agent.prompt(text)

On the way in: the slot's agent set up for this run, the cell's id and execution count, the
run's outputs (:class:`~ipyagent.display.run_view.RunView`) and the entry stream (each new entry
sent to the notebook as it is made, ``kernel/entry_stream.py``) subscribed to the agent's events,
and the run's ports (the approver asks in this cell; a replay answers from the recording). On the way
out, whatever ended the run: an interrupt leaves no tool call without its result and is noted and
re-raised, the recording is let go, the view becomes its static snapshot, and the session is
persisted with every entry it holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ipyagent.agent.mcp.server_definitions import ServerConfig
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.skills.skill_tool import SkillTool
from ipyagent.agent.tools import Tool
from ipyagent.display.approval_question import make_approver
from ipyagent.display.run_view import RunView
from ipyagent.display.stream import error_bundle, note_bundle
from ipyagent.display.untrusted import safe_markdown
from ipyagent.kernel.cell_context import cell_identity
from ipyagent.kernel.entry_stream import EntryStream
from ipyagent.kernel.mcp_servers import replayed_tools
from ipyagent.kernel.replay_control import ReplayAttachment
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.kernel.persistence import SessionSlot
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["CellRun", "start_approver"]

INTERRUPTED = "Interrupted. The session keeps everything that arrived."


class RunInterrupted(KeyboardInterrupt):
    """An interrupted run, raised on from the cell: the cell still ends interrupted (Run All stops
    there), shown as one line instead of a traceback through the agent's internals (IPython shows
    an exception's ``_render_traceback_``); the cell's note has already said what was kept."""

    def _render_traceback_(self) -> list[str]:
        return ["KeyboardInterrupt"]


# the error a frontend shows names the exception a user knows (``ename`` of the execute reply)
RunInterrupted.__name__ = RunInterrupted.__qualname__ = "KeyboardInterrupt"


# what starts a project file's server where nobody can approve it (tool_approval does not)
PROJECT_SERVER_ADVICE = ("a project file's MCP server starts only once approved in a live kernel, or when "
                         "Agent.mcp_servers names it (copy its definition there)")


def start_approver(note: Callable[[str], None], redact: Callable[[str], str]) -> Callable[[ServerConfig], bool]:
    """Asks the user whether a project file's MCP server may start, showing what the repository
    chose: its whole command, and the values of the variables and headers it sets (they come from
    the repository's file, not from the user's secrets; ``redact`` scrubs any that equal a
    configured secret); raises where nobody can answer (headless)."""
    ask = make_approver(on_refusal=lambda line: note(redact(line)), show_func=lambda text: print(redact(text)),
                        advice=PROJECT_SERVER_ADVICE)

    def approve_start(server: ServerConfig) -> bool:
        arguments = {"server": server.name, "defined in": server.origin, "command": server.command_line()}
        arguments.update((f"env {name}", value) for name, value in sorted(server.env.items()))
        arguments.update((f"header {name}", value) for name, value in sorted(server.headers.items()))
        if server.cwd:
            arguments["cwd"] = server.cwd
        return ask("start MCP server", arguments)

    return approve_start


class CellRun:
    """The life of one run in a cell; see the module's docstring.

    ``ask``: the run's approver asks in this cell (``Agent.tool_approval = "ask"``); ``view``: the
    budget widget and the rendered events (off for the probe, which draws its own report);
    ``interrupted_note``: what the cell says after an interrupt; ``show_failures``: an unexpected
    exception is shown readably in the cell and the run ends normally (the session is kept).
    """

    def __init__(self, runtime: AgentRuntime, slot: SessionSlot, config: RunConfig, *,
                 tools: Iterable[Tool] | None = None, ask: bool = False, view: bool = True,
                 interrupted_note: str | None = INTERRUPTED, show_failures: bool = False):
        self.runtime, self.slot, self.config = runtime, slot, config
        runtime.idle.join()  # a compaction in the kernel's idle time ends before anything else touches the agent
        self.arm_idle = False  # whether the kernel compacts in its idle time after this run (idle_after)
        self.agent = runtime.agent_for(slot, config, tools=tools)
        self.cell_id, self.execution_count = cell_identity(runtime.shell)
        self.view = RunView(runtime, slot, self.agent, config) if view else None
        self.interrupted_note = interrupted_note
        self.show_failures = show_failures
        self.replaying: ReplayAttachment | None = None
        renderer = self.view.renderer if self.view is not None else None
        redact = self.agent.redactor().text  # the question stays in the saved output: no key in it
        show = renderer.show_question if renderer is not None else print
        approve = make_approver(
            on_refusal=self.note, show_func=lambda text: show(redact(text)),
            on_decision=(lambda line, question: renderer.record_decision(line, redact(question)))
            if renderer is not None else None, tools=self.agent.tools.get) if ask else None
        self.approve_start = start_approver(self.note, redact)  # project MCP servers, whatever tool_approval is
        self._ports = runtime.ports_for(approve=approve)
        self._stack = contextlib.ExitStack()
        self.stream = EntryStream(lambda: slot.session.entries, self._stream_entries,
                                  already=lambda entry: entry["id"] in slot.persisted)

    def _stream_entries(self, entries: list[Entry]) -> None:
        self.runtime.stream(self.slot, entries, self.config)

    def __enter__(self) -> CellRun:
        self._stack.enter_context(self.runtime.idle.lock)  # the one lock around appending (kernel/idle.py)
        self._stack.callback(self.agent.subscribe(self.stream))
        if self.view is not None:
            self._stack.callback(self.agent.subscribe(self.view.renderer))
        self._stack.enter_context(self.agent.using(self._ports))
        return self

    def at_exit(self, callback: Any) -> None:
        """Call ``callback()`` when the run ends (before the view closes)."""
        self._stack.callback(callback)

    def note(self, text: str) -> None:
        """A note in the cell's output (nothing without a view)."""
        if self.view is not None:
            self.view.renderer.show(note_bundle(text))

    def offer_tools(self, no_tools: bool) -> None:
        """The run's tools: the built-ins and the MCP servers' (started now, waited for a few
        seconds at most); a replay offers the recorded MCP tools and never reaches a server."""
        if no_tools:
            return
        builtins = list(self.agent.tools.values())
        if "skill" not in self.agent.tools and self.runtime.wants_skill_tool():
            builtins.append(SkillTool())
        if self.replaying is not None:
            extra: list[Tool] = list(replayed_tools(self.slot.session.entries))
        else:
            extra = list(self.runtime.mcp.prompt_tools(self.note, approve_start=self.approve_start,
                                                       window=self.agent.budget.window(),
                                                       taken=[t.name for t in builtins]))
        if extra or len(builtins) != len(self.agent.tools):
            self.agent.configure(tools=[*builtins, *extra])

    def idle_after(self) -> bool:
        """Whether the kernel may compact in its idle time once this run has ended (then the run
        itself does not compact after its last reply: ``AgentLoop.prompt(compact_after=False)``).
        Call it after :meth:`replay`."""
        self.arm_idle = self.runtime.idle.why_not(self) is None
        return self.arm_idle

    def replay(self) -> ReplayAttachment | None:
        """Attach this cell's recording when replay applies (``Agent.replay``; see
        ``kernel/replay_control.py``): the rest of the run answers from it. None: the cell runs live."""
        runtime, config = self.runtime, self.config
        mode = runtime.config.replay
        if not runtime.replay.should_replay(mode, self.slot.name, self.cell_id, config.model,
                                            config.provider_options):
            return None
        assert self.cell_id is not None

        def notice(text: str) -> None:  # names cells, tools and call ids taken from the notebook: untrusted
            if self.view is not None:
                self.view.renderer.show({**note_bundle(text), "text/markdown": f"*{safe_markdown(text)}*"})

        attached = self._stack.enter_context(runtime.replay.attached(
            self.slot.session, self.slot.name, self.cell_id, config, self._ports,
            rerun_tools=runtime.config.replay_tools, notice=notice))
        self._stack.enter_context(self.agent.using(attached.ports))
        tools = ("recorded tool calls run again and are compared" if runtime.config.replay_tools
                 else "recorded tool calls are not run again")
        live = "a live provider takes over if the run departs from it" if attached.live else "no live provider"
        notice(f"Replaying this cell's recorded responses (Agent.replay = {mode!r}); {tools}; {live}.")
        self.replaying = attached
        return attached

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        shown = False
        try:
            if interrupted:
                self.agent.close_dangling_calls()
            elif isinstance(exc, Exception) and self.show_failures and self.view is not None:
                # a bug or an unexpected failure: readable, and the session is kept
                self.view.renderer.show(error_bundle(f"{type(exc).__name__}: {exc}", title="ipyagent failed"))
                shown = True
        finally:
            arm = self.arm_idle and exc_type is None
            try:
                self._stack.close()  # the ports, the recording, the subscription: in reverse order
                if self.view is not None and not arm:
                    self.view.close()
                if interrupted and self.interrupted_note:
                    self.note(self.interrupted_note)
            finally:
                try:
                    self.runtime.persist(self.slot, self.config)
                finally:
                    # the budget widget stays live while the kernel compacts in its idle time
                    if arm and not self.runtime.idle.arm(self) and self.view is not None:
                        self.view.close()
        if interrupted and not isinstance(exc, RunInterrupted):
            raise RunInterrupted from None  # an interrupt always goes on up, without the loop's frames
        return shown
