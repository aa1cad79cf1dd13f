"""Code as visible cells (``Agent.code_cells = "insert"``, ``%%agent --cells``).

Each successful ``python`` call of a run is also inserted as a code cell below the ``%%agent``
cell (in order, through the notebook port), its first line ``# from ipyagent <entry id>`` naming
the tool result entry it reproduces. *Restart & Run All* then rebuilds the namespace: replay
answers the ``%%agent`` cell without re-running its tools, and the inserted cells run the code.
A replayed call is never inserted again (its cell is in the notebook already).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ipyagent.agent import run_events as ev
from ipyagent.agent.replayer import ReplayToolResults
from ipyagent.agent.tools.notebook_port import NotebookUnavailable

if TYPE_CHECKING:
    from ipyagent.agent.loop import AgentLoop
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["CODE_CELLS", "CodeCells", "begin_code_cells", "marked_source", "MARKER_PREFIX"]

CODE_CELLS = ("off", "insert")
MARKER_PREFIX = "# from ipyagent "


def marked_source(entry_id: str, code: str) -> str:
    """The inserted cell's source: the marker first, or second after a cell magic's ``%%`` line
    (a cell magic must stay on the first line)."""
    marker = MARKER_PREFIX + entry_id
    body = code.rstrip("\n")
    if body.startswith("%%"):
        first, _, rest = body.partition("\n")
        return f"{first}\n{marker}\n{rest}" if rest else f"{first}\n{marker}"
    return f"{marker}\n{body}"


class CodeCells:
    """A listener for one run's agent events."""

    def __init__(self, agent: AgentLoop, port: Any, notice: Callable[[str], None]):
        self.agent = agent
        self.port = port
        self.notice = notice
        self._code: dict[str, str] = {}  # call id -> code, for python calls of this run
        self.inserted: list[str] = []  # entry ids inserted as cells
        self._failed = False

    def _replayed(self, call_id: str) -> bool:
        source = self.agent.ports.tool_results
        return isinstance(source, ReplayToolResults) and source.recorded({"id": call_id}) is not None

    def __call__(self, event: Any) -> None:
        if isinstance(event, ev.ToolExecutionStart) and event.name == "python":
            code = event.arguments.get("code")
            if isinstance(code, str) and code.strip():
                self._code[event.call_id] = code
            return
        if not isinstance(event, ev.EntryAppended) or self._failed:
            return
        message = event.entry.get("message") if event.entry.get("type") == "message" else None
        if not message or message.get("role") != "toolResult" or message.get("isError"):
            return
        code = self._code.pop(str(message.get("toolCallId")), None)
        if code is None or self._replayed(str(message.get("toolCallId"))):
            return
        try:
            self.port.insert_cell("code", marked_source(event.entry["id"], code))
        except NotebookUnavailable as exc:
            self._failed = True  # said once; the run goes on
            self.notice(f"Agent.code_cells: the code could not be inserted as cells ({exc}).")
            return
        self.inserted.append(event.entry["id"])


def begin_code_cells(runtime: AgentRuntime, agent: AgentLoop, requested: bool,
                     notice: Callable[[str], None]) -> Callable[[], None]:
    """Subscribe the inserter when ``--cells`` or ``Agent.code_cells == "insert"``; returns the
    unsubscribe function (a no-op when off)."""
    if not (requested or runtime.config.code_cells == "insert"):
        return lambda: None
    port = agent.tool_context.notebook
    if port is None:
        return lambda: None
    return agent.subscribe(CodeCells(agent, port, notice))
