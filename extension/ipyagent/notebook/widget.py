"""Old path of :mod:`ipyagent.display.budget_widget` (older ``tour_helpers.py`` copies import it)."""

from ipyagent.display.budget_widget import BudgetWidget, budget_facts, static_bundle, system_tools_tokens

__all__ = ["BudgetWidget", "budget_facts", "static_bundle", "system_tools_tokens"]
