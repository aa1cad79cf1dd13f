"""What the notebook tells the agent loop, as plain data, and the port it comes through.

The loop defines :class:`NotebookContext` (like ``Summarizer`` for compaction); the notebook layer
implements it from IPython's events and the kernel's namespace. Nothing here imports IPython.

* :class:`NotebookActivity` — the cells run since the session's previous prompt (newest first),
  their values, output and errors, and the namespace's changes. The loop formats it
  (:func:`ipyagent.agent.prompt.activity_block.format_activity`) into the user message, before the prompt.
* :class:`SystemContext` — the environment (notebook path, working directory, Python version)
  and the project's instruction files, for the system prompt (and the ones found but not read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ipyagent.agent.prompt.instructions import InstructionFile, SkippedFile
from ipyagent.agent.skills.discovery import Skill
from ipyagent.agent.tools.tool import ApprovalCallback


@dataclass(frozen=True)
class CellError:
    type: str  # "ZeroDivisionError"; module-qualified outside the builtins
    message: str = ""
    frames: tuple[str, ...] = ()  # the last frames of the traceback, innermost last, formatted

    @property
    def line(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class CellRecord:
    """One executed cell, as recorded when it finished (texts already bounded by the recorder)."""

    execution_count: int | None
    source: str
    value: str | None = None  # the result's text repr, as the notebook showed it
    output: str = ""  # stdout, stderr and displayed text
    error: CellError | None = None
    cell_id: str | None = None


@dataclass(frozen=True)
class NamespaceChange:
    name: str
    change: str  # "added", "rebound" or "removed"
    type_name: str = ""
    size: str = ""  # "shape (3, 2)", "len 4", or ""


@dataclass(frozen=True)
class NotebookActivity:
    cells: Sequence[CellRecord] = ()  # newest first
    earlier: int = 0  # cells that ran before these but are no longer recorded
    namespace: Sequence[NamespaceChange] = ()

    def __bool__(self) -> bool:
        return bool(self.cells or self.earlier or self.namespace)


@dataclass(frozen=True)
class SystemContext:
    notebook_path: str | None = None
    cwd: str = ""
    python_version: str = ""
    files: Sequence[InstructionFile] = field(default_factory=tuple)
    skipped: Sequence[SkippedFile] = field(default_factory=tuple)  # found, not read (never sent)
    skills: Sequence[Skill] = field(default_factory=tuple)  # Agent Skills: name and description are sent
    skipped_skills: Sequence[SkippedFile] = field(default_factory=tuple)  # found, not used (the run says so)


class NotebookContext(Protocol):
    def system_context(self, approve: ApprovalCallback | None = None) -> SystemContext:
        """The environment and the instruction files, read now; ``approve`` (the run's approver)
        is asked before a file outside the project is read (None: it is not read)."""

    def activity(self) -> NotebookActivity:
        """What happened in the notebook since this session's previous prompt."""

    def prompt_sent(self) -> None:
        """The prompt went out (its run is over): the next activity starts from here."""


