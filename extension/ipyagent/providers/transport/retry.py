"""Retrying a provider call on 429, 5xx, network errors and streams cut short.

Events of an attempt are passed through live, so text streams to the screen as it arrives. When an
attempt fails, a ``Retrying`` event is emitted before the next one: it means **reset**: whatever
the failed attempt streamed (text, thinking, tool-call pieces) is void and must be discarded by
the consumer. A failed attempt never emits ``MessageDone``, so a successful call yields exactly
one ``MessageDone``, and the agent loop appends exactly one entry.

Delays: the server's ``Retry-After`` / ``retry-after-ms`` when given, else
``base_delay * 2**(attempt-1)`` capped at ``max_delay`` (Pi: 2 s, 4 s, 8 s). A server asking for
more than ``max_delay`` fails the call at once rather than leaving the notebook hanging.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ipyagent.providers.errors import ProviderError, RateLimitError, StreamInterrupted
from ipyagent.providers.provider import MessageDone, ModelRequest, Provider, Retrying, StreamEvent
from ipyagent.providers.transport.message import MessageBuilder
from ipyagent.shapes import Message


def retry_delay(error: ProviderError, attempt: int, base_delay: float = 2.0, max_delay: float = 60.0) -> float | None:
    """Seconds to wait before retry number ``attempt`` (1-based), or None when not to retry."""
    if not error.retryable:
        return None
    if isinstance(error, RateLimitError) and error.retry_after is not None:
        return error.retry_after if error.retry_after <= max_delay else None
    return min(base_delay * 2.0 ** (attempt - 1), max_delay)


def _aborted(provider: Provider, request: ModelRequest) -> Message:
    return MessageBuilder(getattr(provider, "api", ""), provider.name, request.model).build("aborted")


SAME_ERROR_LIMIT = 3
# provider -> {model: the signature of the error that stopped the last call after SAME_ERROR_LIMIT tries}
_stuck: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_stuck_lock = threading.Lock()


def error_signature(error: BaseException) -> str:
    """The same type, HTTP status and text but for numbers (ports, token counts, request ids)."""
    text = re.sub(r"[0-9]+", "#", str(error))[:400]
    return f"{type(error).__name__}:{getattr(error, 'status', None)}:{text}"


def _stuck_on(provider: Provider, model: str) -> str | None:
    with _stuck_lock:
        try:
            return (_stuck.get(provider) or {}).get(model)
        except TypeError:  # a provider that cannot be weakly referenced: no memory
            return None


def _set_stuck(provider: Provider, model: str, signature: str | None) -> None:
    with _stuck_lock:
        try:
            models = _stuck.setdefault(provider, {})
        except TypeError:
            return
        if signature is None:
            models.pop(model, None)
        else:
            models[model] = signature


def stream_with_retry(provider: Provider, request: ModelRequest, *, max_retries: int = 3, base_delay: float = 2.0,
                      max_delay: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                      cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
    """Retries stop early when the same error comes ``SAME_ERROR_LIMIT`` times in a row; the
    next call to the same model then tries once, and stops at once if that error comes again."""
    attempt = 0
    stuck = _stuck_on(provider, request.model)
    last, same = "", 0
    while True:
        try:
            yield from provider.stream(request, cancel)
            if stuck is not None:
                _set_stuck(provider, request.model, None)
            return
        except ProviderError as error:
            signature = error_signature(error)
            same = same + 1 if signature == last else 1
            last = signature
            if error.retryable and signature == stuck:
                note = f"the same error stopped the previous call after {SAME_ERROR_LIMIT} attempts"
                error.args = (f"{error.args[0]} ({note}; not retrying it again)",)
                raise
            if error.retryable and same >= SAME_ERROR_LIMIT:
                _set_stuck(provider, request.model, signature)
                error.args = (f"{error.args[0]} (the same error {same} times in a row: stopped retrying)",)
                raise
            delay = retry_delay(error, attempt + 1, base_delay, max_delay) if attempt < max_retries else None
            if delay is None:
                if attempt and error.retryable:
                    error.args = (f"{error.args[0]} (gave up after {attempt + 1} attempts)",)
                raise
            attempt += 1
            yield Retrying(attempt=attempt, delay=delay, reason=str(error))
        try:
            if cancel is not None and sleep is time.sleep:
                cancel.wait(delay)  # same wait, but a cancel ends it at once
            else:
                sleep(delay)
        except KeyboardInterrupt:
            raise StreamInterrupted(_aborted(provider, request)) from None
        if cancel is not None and cancel.is_set():
            yield MessageDone(_aborted(provider, request))
            return


def complete(provider: Provider, request: ModelRequest, **retry: Any) -> Message:
    """Run a call to the end (with retries) and return the final Pi assistant message; for callers
    that do not stream, such as a summariser. Raises the ProviderError of the last attempt."""
    message: Message | None = None
    for event in stream_with_retry(provider, request, **retry):
        if isinstance(event, MessageDone):
            message = event.message
    assert message is not None, "a provider stream ended without MessageDone"
    return message


def error_message(provider: Provider, request: ModelRequest, error: BaseException) -> Message:
    """The Pi assistant message that records a failed call (``stopReason: "error"``), in the form
    Pi's ``isContextOverflow`` and retry rules read."""
    return MessageBuilder(getattr(provider, "api", ""), provider.name, request.model).build(
        "error", error_message=str(error) or type(error).__name__)
