"""Assembling the Pi assistant message from stream pieces, and the normalised usage dict."""

from __future__ import annotations

import json
import time
from typing import Any

from ipyagent.providers.pricing import price_usage
from ipyagent.shapes import ContentBlock, Message, Usage


def empty_usage() -> Usage:
    return {
        "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0},
    }


def parse_arguments(raw: str) -> tuple[dict[str, Any], bool]:
    """(arguments, ok). Tool arguments must be an object; anything else is kept as invalid."""
    if not raw.strip():
        return {}, True
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, False
    return (value, True) if isinstance(value, dict) else ({}, False)


class MessageBuilder:
    """Collects content blocks in arrival order; text is joined only when the message is built."""

    def __init__(self, api: str, provider: str, model: str, *, local: bool = False):
        self.api = api
        self.provider = provider
        self.model = model
        self.local = local  # from a server on this machine: an unpriced model is free
        self.timestamp = int(time.time() * 1000)
        self.content: list[ContentBlock] = []
        self.pieces: list[list[str]] = []  # parallel to content: text/thinking pieces or argument JSON
        self.usage = empty_usage()
        self.response_id: str | None = None
        self.error_message: str | None = None
        self.extra: dict[str, Any] = {}  # message fields beyond Pi's own (providerStopReason, providerContent)
        self._open_text = -1  # position of the block the next text delta extends (OpenAI)
        self._open_thinking = -1

    def add_block(self, block: ContentBlock) -> int:
        self.content.append(block)
        self.pieces.append([])
        return len(self.content) - 1

    def text(self, piece: str) -> None:
        if self._open_text < 0:
            self._open_text = self.add_block({"type": "text", "text": ""})
            self._open_thinking = -1
        self.pieces[self._open_text].append(piece)

    def thinking(self, piece: str, source: str | None = None) -> ContentBlock:
        """Add reasoning text to the open thinking block (a new one after text or a tool call);
        ``source`` is the wire field it came in (Pi keeps it as the block's ``thinkingSignature``
        for OpenAI-compatible servers, so it goes back in the same field). Returns the block."""
        if self._open_thinking < 0:
            block: ContentBlock = {"type": "thinking", "thinking": ""}
            if source:
                block["thinkingSignature"] = source
            self._open_thinking = self.add_block(block)
            self._open_text = -1
        self.pieces[self._open_thinking].append(piece)
        return self.content[self._open_thinking]

    def tool_call(self, call_id: str, name: str) -> int:
        self._open_text = self._open_thinking = -1
        return self.add_block({"type": "toolCall", "id": call_id, "name": name, "arguments": {}})

    def finish_block(self, position: int) -> ContentBlock:
        block = self.content[position]
        joined = "".join(self.pieces[position])
        kind = block["type"]
        if kind == "text":
            block["text"] = joined
        elif kind == "thinking":
            block["thinking"] = joined
        elif kind == "toolCall":
            arguments, ok = parse_arguments(joined)
            block["arguments"] = arguments
            if not ok:
                block["rawArguments"] = joined  # kept so the tool error can quote what the model sent
        return block

    def partial_text(self) -> str:
        return "".join("".join(p) for b, p in zip(self.content, self.pieces) if b["type"] == "text")

    def build(self, stop_reason: str, error_message: str | None = None) -> Message:
        for position in range(len(self.content)):
            self.finish_block(position)
        content = [b for b in self.content
                   if not (b["type"] == "text" and not b["text"])
                   and not (b["type"] == "thinking" and not b["thinking"] and not b.get("thinkingSignature"))]
        price_usage(self.provider, self.model, self.usage, local=self.local)
        message: Message = {
            "role": "assistant", "content": content, "api": self.api, "provider": self.provider,
            "model": self.model, "usage": self.usage, "stopReason": stop_reason, "timestamp": self.timestamp,
        }
        if self.response_id:
            message["responseId"] = self.response_id
        message.update(self.extra)  # type: ignore[typeddict-item]  # the provider's own fields
        error_message = error_message or self.error_message
        if error_message:
            message["errorMessage"] = error_message
        return message
