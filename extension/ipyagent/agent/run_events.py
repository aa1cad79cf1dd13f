"""What the agent loop reports while it runs. Provider stream events (text, thinking, tool-call
deltas, retries) are passed through as they are; these are the loop's own. :class:`RunOutput`
carries them to the listeners, and stores the entries a run appends (keys scrubbed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ipyagent.shapes import Entry, Message

if TYPE_CHECKING:
    from ipyagent.agent.redaction import Redactor
    from ipyagent.core import Session

Listener = Callable[[Any], None]


@dataclass
class AgentStart:
    prompt: str


@dataclass
class RequestStart:
    """A provider call is about to be made."""

    model: str
    context_tokens: int  # what the request holds, as the trigger counts it (RequestBudget.request_tokens)
    messages: int


@dataclass
class EntryAppended:
    entry: Entry


@dataclass
class ToolExecutionStart:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolExecutionEnd:
    call_id: str
    name: str
    result: Message  # the Pi toolResult message


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
    entry: Entry | None = None
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
    message: Message
    tool_results: list[Message] = field(default_factory=list)


@dataclass
class AgentEnd:
    new_entries: list[Entry]
    error: str | None = None


class RunOutput:
    """Where a run's events go (the subscribed listeners) and what it appended: the entries of the
    run under way, and the notices already given (once a kernel, or once a run)."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self.entries: list[Entry] | None = None  # the run's new entries (None between runs)
        self._given: set[str] = set()  # notices given once (budgets that do not fit the window…)
        self._this_run: set[str] = set()  # what this run said already (a compaction skipped, and why)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, event: Any) -> None:
        for listener in list(self._listeners):
            listener(event)

    def begin_run(self) -> list[Entry]:
        """Start collecting a run's entries (returned: the list they go into)."""
        self._this_run = set()
        self.entries = []
        return self.entries

    def end_run(self) -> None:
        self.entries = None

    def notice_once(self, key: str, message: str) -> None:
        """A :class:`Notice`, given once in the kernel's life for ``key``."""
        if key not in self._given:
            self._given.add(key)
            self.emit(Notice(message))

    def said_this_run(self, what: str) -> bool:
        """Whether ``what`` was said already in this run (and remember it now)."""
        said = what in self._this_run
        self._this_run.add(what)
        return said

    def append(self, session: Session, entry: Message | Entry, redactor: Redactor, *,
               message: bool = True) -> Entry:
        """Store ``entry`` (a message, or a whole entry), the configured keys scrubbed from it."""
        scrubbed = redactor.data(entry)
        stored = session.append_message(cast(Message, scrubbed)) if message else session.append(cast(Entry, scrubbed))
        self.appended(stored)
        return stored

    def appended(self, entry: Entry) -> None:
        """An entry the run appended (itself, or the session for it): counted and told."""
        if self.entries is not None:
            self.entries.append(entry)
        self.emit(EntryAppended(entry))
