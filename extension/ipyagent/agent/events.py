"""What the agent loop reports while it runs. Provider stream events (text, thinking, tool-call
deltas, retries) are passed through as they are; these are the loop's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AgentStart:
    prompt: str


@dataclass
class RequestStart:
    """A provider call is about to be made."""

    model: str
    context_tokens: int  # what the request holds, as the trigger counts it (Agent.request_tokens)
    messages: int


@dataclass
class EntryAppended:
    entry: dict[str, Any]


@dataclass
class ToolExecutionStart:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolExecutionEnd:
    call_id: str
    name: str
    result: dict[str, Any]  # the Pi toolResult message


@dataclass
class CompactionStart:
    reason: str  # "threshold", "overflow", "manual" or "idle" (in the kernel's idle time)
    tokens_before: int


@dataclass
class CompactionProgress:
    """A summary request's reply as it arrives: tokens so far (chars / 4), of at most ``limit``
    (the summary's output limit; None: the provider's default)."""

    reason: str
    tokens: int
    limit: int | None
    elapsed: float


@dataclass
class CompactionEnd:
    reason: str
    entry: dict[str, Any] | None = None
    error: str | None = None
    aborted: bool = False
    will_retry: bool = False
    duration: float = 0.0
    skipped: bool = False  # nothing to compact: no summary was asked


@dataclass
class WaitStart:
    """The run waits for something outside it (the server's answer about the model's window)."""

    what: str


@dataclass
class WaitEnd:
    what: str
    result: str  # one line: what came of it
    duration: float = 0.0


@dataclass
class Notice:
    """Something the user should know about the run that is no error (an instruction file not read,
    a budget set by hand replaced to fit the window)."""

    message: str


@dataclass
class AgentError:
    message: str
    kind: str = "provider"  # "provider", "overflow", "compaction", "interrupted"


@dataclass
class TurnEnd:
    message: dict[str, Any]
    tool_results: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class AgentEnd:
    new_entries: list[dict[str, Any]]
    error: str | None = None
