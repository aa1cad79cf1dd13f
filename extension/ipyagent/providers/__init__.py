"""Model providers over httpx: OpenAI Chat Completions (and compatible servers), the OpenAI
Responses API and Anthropic Messages, streamed, with normalised and priced usage, overflow
detection and retries.

    from ipyagent.providers import resolve_provider, stream_with_retry, ModelRequest
    provider, model = resolve_provider("openai:gpt-4.1-mini")
    for event in stream_with_retry(provider, ModelRequest(model=model, messages=[...])):
        ...  # TextDelta, ToolCallStart/Delta/End, UsageUpdate, Retrying (= discard partial), MessageDone
"""

from ipyagent.providers.apis.anthropic import AnthropicProvider
from ipyagent.providers.apis.openai_chat import OpenAIChatProvider
from ipyagent.providers.apis.openai_responses import OpenAIResponsesProvider
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
from ipyagent.providers.overflow import is_context_overflow, is_overflow_error, is_silent_overflow
from ipyagent.providers.provider import (
    MessageDone,
    ModelRequest,
    Provider,
    ProviderNote,
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
from ipyagent.providers.registry import (
    USER_PROVIDERS,
    ProviderRegistry,
    context_window,
    default_registry,
    learn_from_error,
    learn_window,
    model_info,
    parse_model_string,
    register_provider,
    resolve_provider,
    set_override,
)
from ipyagent.providers.transport.retry import complete, error_message, stream_with_retry
from ipyagent.providers.transport.streaming import interrupt

__all__ = [
    "USER_PROVIDERS",
    "AnthropicProvider",
    "AuthenticationError",
    "BadRequestError",
    "ContextOverflowError",
    "MalformedStreamError",
    "MessageDone",
    "ModelNotFoundError",
    "ModelRequest",
    "NetworkError",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderError",
    "ProviderNote",
    "ProviderRegistry",
    "RateLimitError",
    "Retrying",
    "ServerError",
    "StreamEvent",
    "StreamInterrupted",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "UsageUpdate",
    "complete",
    "context_window",
    "default_registry",
    "error_message",
    "interrupt",
    "is_context_overflow",
    "is_overflow_error",
    "is_silent_overflow",
    "learn_from_error",
    "learn_window",
    "model_info",
    "parse_model_string",
    "register_provider",
    "resolve_provider",
    "set_override",
    "stream_with_retry",
]
