"""Every API's stop reasons in one table, mapped to Pi's (``stop``, ``length``, ``toolUse``,
``error``).

Sources: Anthropic's ``stop_reason`` (anthropic-sdk-python ``types/stop_reason.py``), Chat
Completions' ``finish_reason`` (openai-python ``chat_completion_chunk.py``, plus what compatible
servers send: vLLM's ``abort``, Gemini's upper-case ``STOP``/``MAX_TOKENS``, z.ai's
``sensitive``/``network_error``…), and the Responses API's ``status`` with
``incomplete_details.reason``. A reason missing from the table is never taken for a normal end:
the reply is kept with ``stopReason: "error"``, the server's word in ``providerStopReason``, and a
note saying so once.
"""

from __future__ import annotations

from dataclasses import dataclass

# (api, the server's word) -> Pi's stop reason; "" is what a reply that names no reason means
STOP_REASONS: dict[tuple[str, str], str] = {
    **{("anthropic-messages", k): v for k, v in {
        "end_turn": "stop", "stop_sequence": "stop", "": "stop", "max_tokens": "length", "tool_use": "toolUse",
        "refusal": "error", "model_context_window_exceeded": "length",
        "pause_turn": "pause"}.items()},  # "pause": the server paused its own tool loop, the provider continues
    **{("openai-completions", k): v for k, v in {
        "stop": "stop", "": "stop", "eos": "stop", "end_turn": "stop", "STOP": "stop",
        "length": "length", "max_tokens": "length", "MAX_TOKENS": "length", "model_length": "length",
        "tool_calls": "toolUse", "function_call": "toolUse", "tool_use": "toolUse",
        "content_filter": "error", "sensitive": "error", "SAFETY": "error", "RECITATION": "error",
        "abort": "error", "network_error": "error", "error": "error"}.items()},
    **{("openai-responses", k): v for k, v in {
        "completed": "stop", "": "stop", "incomplete:max_output_tokens": "length",
        "incomplete:content_filter": "error", "incomplete:": "length", "failed": "error",
        "cancelled": "error"}.items()},
}

_WHY = {"refusal": "refused to answer", "content_filter": "stopped the reply: content filter",
        "sensitive": "stopped the reply: content filter", "SAFETY": "stopped the reply: safety filter",
        "RECITATION": "stopped the reply: recitation filter", "incomplete:content_filter":
        "stopped the reply: content filter", "abort": "aborted the reply", "network_error": "lost the reply",
        "error": "ended the reply with an error", "failed": "failed the reply", "cancelled": "cancelled the reply"}


@dataclass
class Outcome:
    """How a reply ended, in Pi's terms."""

    stop: str  # "stop", "length", "toolUse", "error", or "pause" (Anthropic: continue the turn)
    error: str | None = None  # the errorMessage, when stop is "error"
    unknown: str | None = None  # the server's word when the table does not know it


def outcome(api: str, label: str, raw: str | None, has_calls: bool) -> Outcome:
    """The Pi stop reason of a reply that ended with ``raw`` (None: the server named none)."""
    word = raw or ""
    stop = STOP_REASONS.get((api, word))
    if stop is None:
        return Outcome("error", f"{label} ended the reply with a stop reason ipyagent does not know: {word!r} "
                                f"(the reply is kept as it came)", unknown=word)
    if stop == "error":
        return Outcome("error", f"{label} {_WHY.get(word, 'ended the reply')} (stop reason {word!r})")
    if stop == "stop" and has_calls:
        return Outcome("toolUse")  # servers that say "stop" after tool calls still asked for them
    return Outcome(stop)


def unknown_note(label: str, what: str, name: str) -> str:
    """The one-time notice for something the wire protocol sent that ipyagent does not know."""
    return f"{label} sent an unknown {what} {name!r}: kept in the session as it came (ipyagent does not read it)."
