"""The teaching notebooks' helpers that need the running kernel, beside the drawings of
:mod:`ipyagent.display.teaching` (re-exported here, so a notebook imports one module)::

    from ipyagent.kernel.teaching import current_session, timeline, usage_table, CompactionSpy

* ``current_session()`` — the live ipyagent ``Session`` of this kernel (the active one).
* ``overhead_tokens()`` / ``context_tokens()`` — the budget widget's "system + tools" and total.
"""

from __future__ import annotations

from typing import Any

from ipyagent.agent.budget import RequestBudget
from ipyagent.display.teaching import CompactionSpy, Drawing, context_preview, timeline, usage_table

__all__ = ["CompactionSpy", "Drawing", "context_preview", "context_tokens", "current_session", "overhead_tokens",
           "timeline", "usage_table"]


def _runtime() -> Any:
    from IPython.core.getipython import get_ipython

    from ipyagent.kernel.extension import get_runtime

    runtime = get_runtime(get_ipython())
    if runtime is None:
        raise RuntimeError("ipyagent is not loaded: run %load_ext ipyagent first")
    return runtime


def current_session(name: str | None = None) -> Any:
    """The ipyagent session this kernel is running (``%load_ext ipyagent`` first)."""
    return _runtime().slot(name).session


def _budget() -> RequestBudget:
    budget: RequestBudget = _runtime().budget_for()
    return budget


def overhead_tokens() -> int:
    """The system prompt and the tool definitions as the budget counts them (sent with every request):
    the widget's "system + tools"."""
    return _budget().fixed_tokens()


def context_tokens() -> int:
    """The context as the budget counts it: the widget's total, and the "after" of a compaction's note."""
    return _budget().request_tokens()
