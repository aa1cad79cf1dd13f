"""Old path of :mod:`ipyagent.hooks` (saved notebooks register with ``ipyagent.compaction.hooks.hooks``)."""

from ipyagent.hooks import HookRegistry, hooks

__all__ = ["HookRegistry", "hooks"]
