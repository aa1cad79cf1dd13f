"""A ``Summarizer`` backed by a provider: compaction through a (possibly cheaper) model.

:func:`summarizer_for` is the one way to build it from the agent's settings, so every caller
(the loop, replay's live fallback, probes, the command line) gets the same model choice, retries
and cancel. The providers come from a :class:`~ipyagent.providers.registry.ProviderRegistry` the
caller passes (the kernel's, or :func:`~ipyagent.providers.registry.default_registry`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.compact import summary_output_limit
from ipyagent.compaction.settings import FULL_BUDGET_WINDOW, fit_budget
from ipyagent.compaction.summarizer import (
    SummarizerError,
    SummaryCutOff,
    SummaryInputTooLarge,
    SummaryRequest,
    SummaryResponse,
)
from ipyagent.providers.errors import ContextOverflowError, ProviderError
from ipyagent.providers.provider import MessageDone, ModelRequest, TextDelta, ThinkingDelta
from ipyagent.providers.registry import ProviderRegistry, default_registry
from ipyagent.providers.transport.retry import stream_with_retry
from ipyagent.session.ids import now_ms
from ipyagent.session.messages import text_of, tool_calls_of


def summary_input_budget(config: RunConfig, session_window: int | None,
                         providers: ProviderRegistry | None = None) -> int | None:
    """The summary model's input budget in tokens (its window less the summary's output and a
    margin), or None when its window is unknown. ``session_window`` is the session model's window,
    which counts when the summary model is the session model; another's comes from ``providers``
    (default: :func:`~ipyagent.providers.registry.default_registry`)."""
    model = config.summary_model or config.model
    if not model:
        return None
    if model == config.model:
        window = session_window
    else:
        info = (providers or default_registry()).info(model)
        window = info.context_window if info and info.context_window else None
    if not window:
        return None
    budget = max(1024, window - int(0.8 * fit_budget(config.compaction, window).reserve_tokens) - 512)
    if window < FULL_BUDGET_WINDOW:
        # a small window: leave more than half of it to the summary itself (and to the summariser's
        # own prompt, which this count does not hold), or a long-winded model hits the window's end
        budget = min(budget, max(256, window * 45 // 100))
    return budget


OVERRUN_FACTOR = 4  # a summary read up to this many times its token limit (chars / 4), then refused
UNKNOWN_LIMIT_TOKENS = 32_768  # the limit counted against when the request sets none (no summary is longer)


def _overrun(limit: int | None, received: int) -> str:
    asked = f"a limit of {limit:,} tokens" if limit else "no limit (the model's output limit is unknown)"
    return (f"Summarization failed: the server went on past what was asked ({asked}); reading stopped after "
            f"{received:,} characters (about {received // 4:,} tokens). A server that ignores max_tokens "
            "cannot make summaries: try another summary model (%config Agent.summary_model).")


class ProviderSummarizer:
    """Summary requests as Pi 1.6 sends them: no tools, no prompt-cache writes, a fresh routing id
    each, the model's output limit clamped to its window; a summary cut off by that limit
    ("length") or one that calls a tool is an error, never a checkpoint. ``progress(tokens,
    limit)`` hears the reply as it arrives (tokens as chars / 4, of the output limit)."""

    def __init__(self, model: str, *, provider_options: dict[str, Any] | None = None, max_retries: int = 3,
                 base_delay: float = 2.0, max_delay: float = 60.0, cancel: threading.Event | None = None,
                 context_window: int | None = None, progress: Callable[[int, int | None], None] | None = None,
                 providers: ProviderRegistry | None = None):
        providers = providers or default_registry()
        self.model = model
        self.progress = progress
        self.provider, self.model_id = providers.resolve(model, provider_options)
        self.max_retries, self.base_delay, self.max_delay = max_retries, base_delay, max_delay
        self.cancel = cancel
        self.model_info = providers.info(model)
        self.context_window = context_window or (self.model_info.context_window if self.model_info else None) or None
        self.max_output = (self.model_info.max_output if self.model_info else None) or None
        self.calls = 0

    def max_tokens(self, request: SummaryRequest) -> int | None:
        """The request's own limit (the room a compaction leaves the summary), never above the
        model's output limit; else that limit clamped to its window (None: unknown, the provider's
        default)."""
        if request.max_tokens is not None:
            return min(request.max_tokens, self.max_output) if self.max_output else request.max_tokens
        if self.max_output is None:
            return None
        return summary_output_limit(self.max_output, self.context_window,
                                    len(request.system_prompt) + len(request.prompt))

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        model_request = ModelRequest(
            model=self.model_id,
            system_prompt=request.system_prompt,
            messages=[{"role": "user", "content": [{"type": "text", "text": request.prompt}], "timestamp": now_ms()}],
            max_tokens=self.max_tokens(request),
            reasoning=request.reasoning,
            # a one-off request: nothing worth caching, and its own routing id (not the session's)
            options={"request_kind": f"compaction:{request.kind}", "cache_retention": "none",
                     "session_id": str(uuid.uuid4())},
            model_info=self.model_info,
        )
        message = None
        received = 0
        # the client enforces the limit: a server that ignores it (or never stops) is left at a
        # small multiple of it, and the summary counts as failed (asking again would go the same way)
        ceiling = OVERRUN_FACTOR * (model_request.max_tokens or UNKNOWN_LIMIT_TOKENS)
        events = stream_with_retry(self.provider, model_request, max_retries=self.max_retries,
                                   base_delay=self.base_delay, max_delay=self.max_delay, cancel=self.cancel)
        try:
            for event in events:
                if isinstance(event, MessageDone):
                    message = event.message
                elif isinstance(event, (TextDelta, ThinkingDelta)):
                    received += len(event.text)
                    if received // 4 > ceiling:
                        raise SummarizerError(_overrun(model_request.max_tokens, received))
                    if self.progress is not None:
                        self.progress(received // 4, model_request.max_tokens)
        except ContextOverflowError as exc:
            raise SummaryInputTooLarge(str(exc)) from exc
        except ProviderError as exc:
            raise SummarizerError(f"Summarization failed: {exc}") from exc
        finally:  # leaving early closes the stream (and its connection) now, not when collected
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if message is None or message.get("stopReason") in ("error", "aborted"):
            reason = (message or {}).get("errorMessage") or (message or {}).get("stopReason") or "no response"
            raise SummarizerError(f"Summarization failed: {reason}")
        if message.get("stopReason") == "length":
            raise SummaryCutOff("Summarization failed: generation hit the token cap and the summary is incomplete",
                                text=text_of(message.get("content"), "\n"))
        if tool_calls_of(message):
            raise SummarizerError("Summarization failed: the model tried to call a tool")
        return SummaryResponse(text=text_of(message.get("content"), "\n"), usage=message.get("usage") or {})


def summarizer_for(config: RunConfig, *, model: str | None = None, cancel: threading.Event | None = None,
                   session_window: int | None = None, progress: Callable[[int, int | None], None] | None = None,
                   providers: ProviderRegistry | None = None) -> ProviderSummarizer:
    """The summariser the settings name: ``model``, else ``Agent.summary_model``, else the session's
    model, with the settings' retries (and ``cancel``, the run's interrupt), its provider from
    ``providers``. ``session_window`` is the session model's window as the agent knows it (a server
    may have said it)."""
    chosen = model or config.summary_model or config.model
    return ProviderSummarizer(chosen, provider_options=config.provider_options, providers=providers,
                              max_retries=config.max_retries, base_delay=config.retry_base_delay,
                              max_delay=config.retry_max_delay, cancel=cancel,
                              context_window=(session_window or config.context_window) if chosen == config.model
                              else None, progress=progress)
