"""Small helpers for tests that consume provider streams."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ipyagent.providers.provider import (
    MessageDone,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
)
from ipyagent.shapes import Message


@dataclass
class StreamResult:
    events: list[StreamEvent] = field(default_factory=list)
    text: str = ""  # streamed text since the last Retrying (a retry voids the partial attempt)
    thinking: str = ""
    tool_calls: list[ToolCallEnd] = field(default_factory=list)
    retries: list[Retrying] = field(default_factory=list)
    done: list[MessageDone] = field(default_factory=list)

    @property
    def message(self) -> Message:
        assert len(self.done) == 1, f"expected exactly one MessageDone, got {len(self.done)}"
        return self.done[0].message


def collect(stream: Iterable[StreamEvent]) -> StreamResult:
    result = StreamResult()
    for event in stream:
        result.events.append(event)
        if isinstance(event, TextDelta):
            result.text += event.text
        elif isinstance(event, ThinkingDelta):
            result.thinking += event.text
        elif isinstance(event, ToolCallEnd):
            result.tool_calls.append(event)
        elif isinstance(event, Retrying):
            result.retries.append(event)
            result.text, result.thinking, result.tool_calls = "", "", []
        elif isinstance(event, MessageDone):
            result.done.append(event)
    return result
