"""Model providers over httpx: OpenAI Chat Completions (and compatible servers) and Anthropic
Messages, streamed, with normalised usage, overflow detection and retries.

    from ipyagent.providers import resolve_provider, stream_with_retry, ModelRequest
    provider, model = resolve_provider("openai:gpt-4.1-mini")
    for event in stream_with_retry(provider, ModelRequest(model=model, messages=[...])):
        ...  # TextDelta, ToolCallStart/Delta/End, UsageUpdate, Retrying (= discard partial), MessageDone
"""

from ipyagent.providers.anthropic import AnthropicProvider
from ipyagent.providers.base import (
    MessageDone,
    ModelRequest,
    Provider,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageUpdate,
)
from ipyagent.providers.errors import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    MalformedStreamError,
    ModelNotFoundError,
    NetworkError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterrupted,
)
from ipyagent.providers.models import context_window, learn_from_error, learn_window, model_info, set_override
from ipyagent.providers.openai_chat import OpenAIChatProvider
from ipyagent.providers.overflow import is_context_overflow, is_overflow_error, is_silent_overflow
from ipyagent.providers.registry import parse_model_string, register_provider, resolve_provider
from ipyagent.providers.streaming import interrupt
from ipyagent.providers.retry import complete, error_message, stream_with_retry

__all__ = [
    "AnthropicProvider", "OpenAIChatProvider", "Provider", "ModelRequest", "ToolSpec", "StreamEvent",
    "TextDelta", "ThinkingDelta", "ToolCallStart", "ToolCallDelta", "ToolCallEnd", "UsageUpdate", "Retrying",
    "MessageDone", "ProviderError", "ContextOverflowError", "RateLimitError", "ServerError", "NetworkError",
    "AuthenticationError", "ModelNotFoundError", "BadRequestError", "MalformedStreamError", "StreamInterrupted",
    "context_window", "learn_window", "learn_from_error", "complete", "error_message", "interrupt", "model_info", "set_override", "is_context_overflow", "is_overflow_error",
    "is_silent_overflow", "parse_model_string", "register_provider", "resolve_provider", "stream_with_retry",
]
