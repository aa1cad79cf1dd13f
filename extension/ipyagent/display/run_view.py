"""The outputs of one run in a cell (``%%agent``, ``%compact``): the live budget widget, which becomes
its static view when the run ends, and the renderer of the run's events.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from IPython.display import display

from ipyagent.agent.budget import RequestBudget
from ipyagent.agent.loop import AgentLoop
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.settings import Budget
from ipyagent.core import Session
from ipyagent.display.budget_widget import BudgetFacts, BudgetWidget, budget_facts, static_bundle
from ipyagent.display.journal_view import JournalOutput
from ipyagent.display.stream import RunRenderer

__all__ = ["RunView", "facts_for"]


def facts_for(budget: RequestBudget, session_name: str, status: str = "", config: RunConfig | None = None
              ) -> BudgetFacts:
    """The budget facts of a session's next request as ``budget`` counts it (``agent/budget.py``):
    its composed system prompt, the tools it offers, its window, token factor and fitted budget.
    The widget, ``%agent status`` and ``%agent context`` all take their figures from here, so they
    agree. ``config``: the run's settings (default the budget's)."""
    config = config if config is not None else budget.config
    try:  # the composed system prompt (environment, instruction files, pins) counts in the budget
        budget_config = replace(config, system_prompt=budget.system_prompt())
    except Exception:  # noqa: BLE001 - a system prompt that cannot be composed: the budget counts the base one
        budget_config = config
    fitted: Budget | None
    try:
        info = budget.window_info()
        window, source, factor = info.window, info.describe(), budget.token_factor()
        fitted = budget.fitted()
    except Exception:  # noqa: BLE001 - no window known: the budget is drawn without one
        window, source, factor, fitted = config.context_window, "", 1.0, None
    return budget_facts(budget.session, budget_config, window=window, tool_specs=budget.tool_specs,
                        session_name=session_name, status=status, window_source=source, token_factor=factor,
                        budget=fitted)


class ViewSettings(Protocol):
    @property
    def show_widget(self) -> bool: ...
    @property
    def max_updates_per_second(self) -> float: ...


class ViewRuntime(Protocol):
    """What a view reads of the kernel's runtime (``kernel/runtime.py``, a later layer): its settings."""

    @property
    def config(self) -> ViewSettings: ...


class ViewSlot(Protocol):
    """The named session a run is in (``kernel/persistence.py``'s ``SessionSlot``)."""

    @property
    def name(self) -> str: ...
    @property
    def session(self) -> Session: ...


class RunView:
    """The outputs of one run: the live budget widget (optional) and the renderer."""

    def __init__(self, runtime: ViewRuntime, slot: ViewSlot, agent: AgentLoop, config: RunConfig):
        self.runtime, self.slot, self.agent, self.config = runtime, slot, agent, config
        self.widget = None
        self.handle = None
        if runtime.config.show_widget:
            try:
                self.widget = BudgetWidget(self.facts(""))
                self.handle = display(self.widget.bundle(), raw=True, display_id=True)
            except Exception:  # noqa: BLE001 - no ipywidgets: the static view is shown at the end
                self.widget = None
        self.renderer = RunRenderer(widget=self.widget, facts=self.facts,
                                    max_updates_per_second=runtime.config.max_updates_per_second,
                                    redact=agent.redactor().text)

    def facts(self, status: str) -> Any:
        return facts_for(self.agent.budget, self.slot.name, status, self.config)

    def close(self, status: str = "", *, journal: JournalOutput | None = None,
              background: bool = False) -> None:
        """When the run ends, its output becomes the static view alone and the widget's models are
        closed: the widget is live while the run can change the budget (also while the kernel
        compacts in its idle time after the run), and a restarted or reopened notebook (no kernel
        behind the model) shows no dead widget. ``status``: a last line the static view keeps.
        ``journal`` (data, metadata): a journal this output carries too (the idle job's, written
        after the run ended). ``background``: closed from the idle job's thread, after the run's
        cell ended: nothing new is shown (it would land in whatever cell runs now)."""
        self.renderer.finish()
        facts = self.facts(status)
        if self.widget is not None and self.handle is not None:
            widget, self.widget = self.widget, None
            widget.update(facts)
            data, metadata = journal if journal is not None else ({}, {})
            try:
                self.handle.update({**data, **static_bundle(facts)}, metadata=metadata, raw=True)
            finally:
                widget.close()
        elif self.runtime.config.show_widget and not background:
            display(static_bundle(facts), raw=True)
