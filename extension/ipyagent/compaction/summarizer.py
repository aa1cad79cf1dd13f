"""The one interface compaction needs from a model: turn a prompt into summary text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ipyagent.session.messages import Usage


@dataclass
class SummaryRequest:
    system_prompt: str
    prompt: str  # the single user message: <conversation>…</conversation> + instructions
    max_tokens: int | None = None  # None: the model's output limit, clamped to its window (Pi 1.6)
    reasoning: str | None = None
    kind: str = "history"  # "history", "turn_prefix" or "branch"


@dataclass
class SummaryResponse:
    text: str
    usage: Usage = field(default_factory=lambda: Usage())


class Summarizer(Protocol):
    def summarize(self, request: SummaryRequest) -> SummaryResponse: ...


class SummarizerError(RuntimeError):
    """The summariser failed; the message says why (provider error, empty output…)."""


class SummaryInputTooLarge(SummarizerError):
    """The summariser's model rejected the request as too long; the caller trims and retries."""


class SummaryCutOff(SummarizerError):
    """The summary hit the output cap (stop reason "length"): incomplete, so never a checkpoint as
    it is. The caller asks once more (a small model that rambled on one sample rarely does on the
    next); ``text`` is what came before the cap (compaction keeps its head when the cap was the
    room the compaction leaves the summary: compaction/compact.py)."""

    def __init__(self, message: str, text: str = ""):
        super().__init__(message)
        self.text = text


class ScriptedSummarizer:
    """A summariser that returns queued texts (or calls a function); for tests and replay."""

    def __init__(self, responses: list[str] | None = None,
                 fn: Callable[[SummaryRequest], SummaryResponse | str | BaseException] | None = None):
        self.responses = list(responses or [])
        self.fn = fn
        self.requests: list[SummaryRequest] = []

    def enqueue(self, text: str) -> None:
        self.responses.append(text)

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        if self.fn is not None:
            result = self.fn(request)
            if isinstance(result, BaseException):
                raise result
            return result if isinstance(result, SummaryResponse) else SummaryResponse(text=str(result))
        if not self.responses:
            raise SummarizerError("ScriptedSummarizer has no queued response")
        return SummaryResponse(text=self.responses.pop(0))
