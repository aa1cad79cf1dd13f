"""The conversation as the summariser reads it: a tagged transcript, not a chat to continue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipyagent.session.messages import Message, call_arguments, convert_to_llm, text_of
from ipyagent.session.tokens import js_json

TOOL_RESULT_HEAD = 1500
TOOL_RESULT_TAIL = 500


def cut_tool_result(text: str, head: int = TOOL_RESULT_HEAD, tail: int = TOOL_RESULT_TAIL) -> str:
    """Keep the head and the tail (where errors and final lines are), say how much was cut.

    Pi keeps only the first 2000 characters; the tail often holds the error that matters.
    """
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n\n[... {cut} characters truncated ...]\n\n{text[-tail:]}"


def _tool_call_text(call: dict[str, Any]) -> str:
    rendered = ", ".join(f"{key}={js_json(value)}" for key, value in call_arguments(call).items())
    return f"{call.get('name', '')}({rendered})"


def serialize_conversation(messages: Sequence[Message], *, tool_result_head: int = TOOL_RESULT_HEAD,
                           tool_result_tail: int = TOOL_RESULT_TAIL) -> str:
    parts: list[str] = []
    for message in convert_to_llm(messages):
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = text_of(content)
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            blocks = content if isinstance(content, list) else []
            thinking = "\n".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
            text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [b for b in blocks if b.get("type") == "toolCall"]
            if thinking:
                parts.append(f"[Assistant thinking]: {thinking}")
            if text:
                parts.append(f"[Assistant]: {text}")
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(_tool_call_text(c) for c in calls))
        elif role == "toolResult":
            text = text_of(content)
            if text:
                parts.append(f"[Tool result]: {cut_tool_result(text, tool_result_head, tool_result_tail)}")
    return "\n\n".join(parts)
