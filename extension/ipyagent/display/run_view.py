"""What a magic that runs the agent in a cell needs (``%%agent`` and ``%compact`` both): which cell
is running, the run's outputs (:class:`RunView`: the budget widget and the renderer), and replay.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from IPython.display import display

from ipyagent.display.stream import RunRenderer, note_bundle
from ipyagent.kernel.replay_control import ReplayAttachment
from ipyagent.display.untrusted import safe_markdown
from ipyagent.display.budget_widget import BudgetWidget, budget_facts, static_bundle

__all__ = ["RunView", "begin_replay", "cell_identity"]


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


class RunView:
    """The outputs of one run: the live budget widget (optional) and the renderer."""

    def __init__(self, runtime: Any, slot: Any, agent: Any, config: Any):
        self.runtime, self.slot, self.agent, self.config = runtime, slot, agent, config
        try:  # the composed system prompt (environment, instruction files, pins) counts in the budget
            self.budget_config = replace(config, system_prompt=agent.system_prompt())
        except Exception:
            self.budget_config = config
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
            info = self.agent.window_info()
            window, source, factor = info.window, info.describe(), self.agent.token_factor()
        except Exception:
            window, source, factor = self.config.context_window, "", 1.0
        return budget_facts(self.slot.session, self.budget_config, window=window,
                            tool_specs=[t.spec() for t in self.agent.tools.values()],
                            session_name=self.slot.name, status=status, window_source=source, token_factor=factor)

    def close(self) -> None:
        """When the run ends, its output becomes the static view alone and the widget's models are
        closed: the widget is live while the run can change the budget, and a restarted or
        reopened notebook (no kernel behind the model) shows no dead widget."""
        self.renderer.finish()
        facts = self.facts("")
        if self.widget is not None and self.handle is not None:
            widget, self.widget = self.widget, None
            widget.update(facts)
            try:
                self.handle.update(static_bundle(facts), raw=True)
            finally:
                widget.close()
        elif self.runtime.config.show_widget:
            display(static_bundle(facts), raw=True)


def begin_replay(runtime: Any, slot: Any, agent: Any, cell_id: str | None, config: Any,
                 view: "RunView") -> ReplayAttachment | None:
    """Attach this cell's recording to the agent when replay applies (see ``kernel/replay_control.py``);
    return the attachment, or None when the cell runs live."""
    mode = runtime.config.replay
    if not runtime.replay.should_replay(mode, slot.name, cell_id, config.model, config.provider_options):
        return None

    def notice(text: str) -> None:  # names cells, tools and call ids taken from the notebook: untrusted
        view.renderer.show({**note_bundle(text), "text/markdown": f"*{safe_markdown(text)}*"})

    attached = runtime.replay.attach(agent, slot.name, cell_id, rerun_tools=runtime.config.replay_tools,
                                     notice=notice)
    tools = ("recorded tool calls run again and are compared" if runtime.config.replay_tools
             else "recorded tool calls are not run again")
    live = "a live provider takes over if the run departs from it" if attached.live else "no live provider"
    notice(f"Replaying this cell's recorded responses (Agent.replay = {mode!r}); {tools}; {live}.")
    return attached
