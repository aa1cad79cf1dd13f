"""The contract for agent tools.

A tool is a plain class registered by name, the same way for built-ins and user tools. ``run``
returns a ``ToolOutput``; the agent loop turns it into a Pi ``toolResult`` message (content text
blocks, ``details`` kept out of the model's context, ``isError``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ipyagent.providers.provider import ToolSpec
from ipyagent.shapes import ContentBlock, Entry, JsonSchema

if TYPE_CHECKING:
    from ipyagent.agent.tools.cell import CellRunner
    from ipyagent.agent.tools.notebook_port import NotebookPort


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    # Pi image blocks ({"type": "image", "data": base64, "mimeType": …}) sent after the text
    images: list[ContentBlock] = field(default_factory=list)


class SessionHistory(Protocol):
    """What a tool may read of the session (``recall``); the agent loop passes its ``Session``."""

    def summarized_entries(self) -> list[Entry]: ...

    def get(self, entry_id: str) -> Entry | None: ...


@dataclass
class ToolContext:
    """What a tool may use: the working directory, the Python namespace for ``python``, ``root``,
    the folder read-only tools read without asking (the notebook's folder; None: ``cwd``), the
    session's history for ``recall``, and the ports the notebook layer provides inside a kernel —
    running code like a cell (``cell_runner``) and the notebook's cells (``notebook``). Without
    them, ``python`` runs plain ``exec`` and ``notebook`` says there is no notebook."""

    cwd: str = "."
    namespace: dict[str, Any] | None = None
    root: str | None = None
    history: SessionHistory | None = None
    cell_runner: CellRunner | None = None
    notebook: NotebookPort | None = None
    # the skills of the run's system prompt (``agent/skills``), and the folders besides ``root`` that
    # read-only tools read without asking (those skills' folders)
    skills: Sequence[Any] = ()
    readable: tuple[str, ...] = ()


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[JsonSchema]
    # Read-only tools run without asking (see approval_reason); the others go through the approval policy.
    read_only: ClassVar[bool] = False

    def approval_reason(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        """Why this call needs the user's approval, or None if it may run without asking.

        The empty string means "always": the tool changes files, runs commands or runs code. The
        file-reading tools return a reason when they would read outside ``context.root``.
        """
        return None if self.read_only else ""

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        raise NotImplementedError

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


# approval(tool_name, arguments) -> True to run, False to refuse
ApprovalCallback = Callable[[str, dict[str, Any]], bool]
