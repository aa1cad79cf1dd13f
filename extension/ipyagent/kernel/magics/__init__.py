"""The magics: ``%%agent`` (run the agent), ``%agent COMMAND …`` (one module per group of commands:
``status``, ``sessions``, ``pins``, ``probe``, ``replay``, ``explore``; the registry and the help in
``commands``), ``%compact`` / ``%%compact``; ``cell_run`` is the life of one run in a cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# the command groups register themselves; this order is the help's
from ipyagent.kernel.magics import explore, masks, mcp, pins, probe, replay, sessions, skills, status  # noqa: F401
from ipyagent.kernel.magics.agent_cell import AgentMagics
from ipyagent.kernel.magics.commands import COMMANDS, help_text
from ipyagent.kernel.magics.compact_magic import CompactMagics

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["BUILTIN_COMMANDS", "register_magics", "unregister_magics"]

BUILTIN_COMMANDS = tuple(COMMANDS)  # a plugin's command may not take one of these names


def register_magics(shell: Any, runtime: AgentRuntime) -> None:
    AgentMagics.agent.__doc__ = help_text(runtime, full=True)  # ``%agent?`` shows what ``%agent help all`` shows
    shell.register_magics(AgentMagics(shell, runtime))
    shell.register_magics(CompactMagics(shell, runtime))


def unregister_magics(shell: Any) -> None:
    magics = shell.magics_manager.magics
    for kind, name in (("line", "agent"), ("cell", "agent"), ("line", "compact"), ("cell", "compact")):
        magics[kind].pop(name, None)
