"""The contract between the agent loop and a model provider.

Messages in and out are Pi's message shapes as plain dicts (see ``ipyagent.session.messages``):
the request carries ``user`` / ``assistant`` / ``toolResult`` messages (already passed through
``convert_to_llm``), and the stream ends with one Pi ``assistant`` message.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ipyagent.providers.models import ModelInfo, table_info
from ipyagent.shapes import JsonSchema, Message, Usage


@dataclass
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: JsonSchema

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass
class ModelRequest:
    model: str  # the model id without the provider prefix, e.g. "gpt-4.1-mini"
    messages: list[Message]
    system_prompt: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    reasoning: str | None = None  # None, or "low" / "medium" / "high"
    temperature: float | None = None
    # Free-form extras a hook (before_provider_request) may use; never secrets.
    options: dict[str, Any] = field(default_factory=dict)
    # What the caller's registry knows of the model (the table with its overrides and learned
    # windows: providers/registry.py); None: the bundled table alone.
    model_info: ModelInfo | None = None

    def info(self) -> ModelInfo | None:
        """What is known of the model: :attr:`model_info`, else the bundled table's entry."""
        return self.model_info or table_info(self.model)

    def with_extra_body(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A provider's request ``body`` with the fields of the ``extra_body`` option (a hook's)
        added over it: extra_body's fields win."""
        return {**body, **(self.options.get("extra_body") or {})}


# ---- stream events -------------------------------------------------------------------------


@dataclass
class TextDelta:
    text: str


@dataclass
class ThinkingDelta:
    text: str


@dataclass
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass
class ToolCallDelta:
    index: int
    arguments_delta: str


@dataclass
class ToolCallEnd:
    index: int
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class UsageUpdate:
    usage: Usage  # normalised: input, output, cacheRead, cacheWrite, totalTokens


@dataclass
class Retrying:
    """Emitted by ``stream_with_retry`` between attempts. It means *reset*: everything the failed
    attempt streamed (text, thinking, tool-call pieces) is void; the next attempt starts over."""

    attempt: int
    delay: float
    reason: str


@dataclass
class ProviderNote:
    """Something the provider changed about how it talks to this server, said once (a server whose
    streams with tools come back empty gets such requests whole from then on)."""

    text: str


@dataclass
class MessageDone:
    """Always the last event: the complete Pi assistant message (stopReason stop/length/toolUse,
    or aborted when the stream was interrupted)."""

    message: Message


StreamEvent = (
    TextDelta | ThinkingDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | UsageUpdate | Retrying | ProviderNote
    | MessageDone
)


class Provider(Protocol):
    """One wire protocol bound to one base URL and key.

    ``stream`` yields events and finishes with exactly one ``MessageDone``. Failures raise
    ``ipyagent.providers.errors.ProviderError`` subclasses. If ``cancel`` is set the stream stops
    and ``MessageDone`` carries what arrived with ``stopReason == "aborted"``. If a
    ``KeyboardInterrupt`` (the kernel's interrupt) arrives while streaming, the connection is
    closed at once and ``ipyagent.providers.errors.StreamInterrupted`` (a KeyboardInterrupt
    subclass) is raised, carrying the partial aborted message in ``.partial``.
    """

    name: str  # "openai" or "anthropic"

    def stream(self, request: ModelRequest, cancel: threading.Event | None = None) -> Iterator[StreamEvent]: ...
