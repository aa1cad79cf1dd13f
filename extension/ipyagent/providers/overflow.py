"""Recognising context overflow: error codes, the message patterns providers use, silent overflow.

The pattern list is Pi's ``isContextOverflow`` set plus opencode's additions (reference/pi.md §1.6,
reference/peers.md 2d). A 429 is never an overflow, whatever its text says.
"""

from __future__ import annotations

import re
from typing import Any

from ipyagent.shapes import Message

OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",  # Anthropic
        r"request_too_large",  # Anthropic 413
        r"input is too long for requested model",  # Bedrock
        r"exceeds the context window",  # OpenAI
        r"input token count.*exceeds the maximum",  # Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq / OpenAI
        r"maximum context length is \d+ tokens",  # OpenRouter, DeepSeek, vLLM
        r"exceeds the limit of \d+",  # Copilot
        r"exceeds the available context size",  # llama.cpp server
        r"exceed context window of \d+",  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
        r"longer than the maximum model length",  # vLLM: "The decoder prompt (length N) is longer than …"
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi
        r"too large for model with \d+ maximum context length",  # Mistral
        r"model_context_window_exceeded",  # z.ai finish reason surfacing as text
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"input length and .max_tokens. exceed context limit",  # Anthropic, older models
    )
)

OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "request_too_large"})

# Cerebras answers an overflow with a bare 400/413 and no body.
_NO_BODY = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)

# Patterns that reveal the real window: (regex, group holding the window).
_WINDOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length is (\d[\d,]*) tokens",
        r"tokens? > (\d[\d,]*) maximum",
        r"available context size \((\d[\d,]*) tokens\)",
        r"context window of (\d[\d,]*)",
        r"exceed context limit: \d[\d,]* \+ \d[\d,]* > (\d[\d,]*)",
        r"maximum number of tokens allowed \((\d[\d,]*)\)",
        r"maximum prompt length is (\d[\d,]*)",
        r"exceeds the limit of (\d[\d,]*)",
        r"too large for model with (\d[\d,]*) maximum context length",
        r"greater than the context length of (\d[\d,]*)",
        r"longer than the maximum model length of (\d[\d,]*)",
    )
)


def matches_overflow_text(text: str) -> bool:
    return bool(text) and (any(p.search(text) for p in OVERFLOW_PATTERNS) or bool(_NO_BODY.search(text.strip())))


def is_overflow_error(status: int | None, message: str = "", code: str | None = None,
                      body: str | None = None) -> bool:
    """True when an HTTP error (or an error event, status None) means "the prompt did not fit".
    ``body`` is the raw response body when known: an empty one on a 400/413 is Cerebras' overflow."""
    if status == 429:
        return False
    if code and code in OVERFLOW_CODES:
        return True
    if status in (400, 413) and body is not None and not body.strip():
        return True
    return matches_overflow_text(message) or matches_overflow_text(body or "")


def window_from_error(text: str, parsed: dict[str, Any] | None = None) -> int | None:
    """The real context window an overflow error reveals (llama.cpp ``n_ctx``, or the message)."""
    if parsed:
        for holder in (parsed, parsed.get("error") if isinstance(parsed.get("error"), dict) else None):
            n_ctx = holder.get("n_ctx") if holder else None
            if isinstance(n_ctx, int):
                return n_ctx
    for pattern in _WINDOW_PATTERNS:
        found = pattern.search(text or "")
        if found:
            return int(found.group(1).replace(",", ""))
    return None


# Errors saying that the *input* fits but input + max_tokens does not: (regex, input group, window group).
_OUTPUT_TOO_LARGE: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"input length and .max_tokens. exceed context limit: (\d+) \+ \d+ > (\d+)", re.IGNORECASE), 1, 2),
    (re.compile(r"is too large: \d+\. This model's maximum context length is (\d+) tokens and your request has "
                r"(\d+) input tokens", re.IGNORECASE), 2, 1),
)
MIN_USEFUL_OUTPUT = 1024


def max_tokens_that_fit(text: str) -> int | None:
    """When an error says only the requested output is too large (Anthropic's "input length and
    `max_tokens` exceed context limit", vLLM's "'max_tokens' … is too large"), the largest
    ``max_tokens`` that fits; None when the error is not of that kind or too little room is left."""
    for pattern, input_group, window_group in _OUTPUT_TOO_LARGE:
        found = pattern.search(text or "")
        if found:
            room = int(found.group(window_group)) - int(found.group(input_group))
            return room if room >= MIN_USEFUL_OUTPUT else None
    return None


def is_silent_overflow(message: Message, context_window: int | None) -> bool:
    """A reply that "succeeded" while its reported input exceeded the window (z.ai style)."""
    if not context_window or message.get("stopReason") != "stop":
        return False
    usage = message.get("usage") or {}
    if usage.get("serverToolUse"):  # Anthropic adds up its own tool iterations' input: not the context
        return False
    return (usage.get("input", 0) or 0) + (usage.get("cacheRead", 0) or 0) > context_window


def is_context_overflow(message: Message, context_window: int | None = None) -> bool:
    """Pi's ``isContextOverflow`` on a finished assistant message: an error whose text says so,
    or a silent overflow."""
    if message.get("stopReason") == "error":
        text = message.get("errorMessage") or ""
        return not re.search(r"\b429\b", text) and matches_overflow_text(text)
    return is_silent_overflow(message, context_window)
