"""The conversation as the summariser reads it: a tagged transcript, not a chat to continue.

Pi 1.6's ``serializeConversation``: thinking is left out (a provider's summary of its reasoning,
often not part of the live context, and it can make the request larger than what it summarises);
a tool result is cut after 2,000 UTF-16 units without splitting a surrogate pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipyagent.session.messages import Message, call_arguments, convert_to_llm, text_of
from ipyagent.session.tokens import js_json
from ipyagent.text import js_length

TOOL_RESULT_MAX_CHARS = 2000


def head_units(text: str, units: int) -> str:
    """The first ``units`` UTF-16 code units of ``text``, one fewer where the cut would split a
    surrogate pair (Pi's ``sliceHead``)."""
    if text.isascii():
        return text[:units]
    data = text.encode("utf-16-le", "surrogatepass")
    end = 2 * units
    if end >= 2 and len(data) > end:
        high = int.from_bytes(data[end - 2:end], "little")
        low = int.from_bytes(data[end:end + 2], "little")
        if 0xD800 <= high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF:
            end -= 2
    return data[:end].decode("utf-16-le", "surrogatepass")


def cut_tool_result(text: str, limit: int = TOOL_RESULT_MAX_CHARS) -> str:
    """The head of a long tool result, and how many units were left out."""
    length = js_length(text)
    if length <= limit:
        return text
    return f"{head_units(text, limit)}\n\n[... {length - limit} more characters truncated]"


def _tool_call_text(call: Mapping[str, Any]) -> str:
    rendered = ", ".join(f"{key}={js_json(value)}" for key, value in call_arguments(call).items())
    return f"{call.get('name', '')}({rendered})"


def serialize_conversation(messages: Sequence[Message]) -> str:
    parts: list[str] = []
    for message in convert_to_llm(messages):
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = text_of(content)
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            calls = [b for b in blocks if b.get("type") == "toolCall"]
            if any(b.get("type") == "text" for b in blocks):
                parts.append(f"[Assistant]: {text_of(blocks, chr(10))}")
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(_tool_call_text(c) for c in calls))
        elif role == "toolResult":
            text = text_of(content)
            if text:
                parts.append(f"[Tool result]: {cut_tool_result(text)}")
    return "\n\n".join(parts)
