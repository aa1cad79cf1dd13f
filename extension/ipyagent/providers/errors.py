"""Provider errors. Every message names the cause in words a notebook user can act on."""

from __future__ import annotations

from ipyagent.shapes import Message


class ProviderError(RuntimeError):
    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = body


class ContextOverflowError(ProviderError):
    """The request did not fit the model's context window."""

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None,
                 context_window: int | None = None):
        super().__init__(message, status=status, body=body)
        self.context_window = context_window  # the real window, when the error reveals it


class RateLimitError(ProviderError):
    retryable = True

    def __init__(self, message: str, *, status: int | None = 429, body: str | None = None,
                 retry_after: float | None = None):
        super().__init__(message, status=status, body=body)
        self.retry_after = retry_after


class ServerError(ProviderError):
    retryable = True


class NetworkError(ProviderError):
    """Connection refused/reset, or the stream ended before the message was complete."""

    retryable = True


class StreamDeadlineError(NetworkError):
    """A stream that went on too long: nothing but keep-alive comments (or nothing at all) for
    the provider's ``no_content_timeout`` (retried, like a dropped connection), or longer than
    its ``total_timeout`` in all (not retried). The message names which."""

    def __init__(self, message: str, *, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


class EmptyStreamError(NetworkError):
    """A ``200`` whose stream closed before its first event. Some servers overflow that way
    (llama-cpp-python): the provider asks again without streaming, so the real error shows."""


class AuthenticationError(ProviderError):
    """401/403, or no API key configured."""


class ModelNotFoundError(ProviderError):
    pass


class BadRequestError(ProviderError):
    pass


class MalformedStreamError(ProviderError):
    """The server sent something that is not valid SSE/JSON for this protocol."""


class StreamInterrupted(KeyboardInterrupt):
    """A KeyboardInterrupt during streaming; ``partial`` is the aborted Pi assistant message."""

    def __init__(self, partial: Message):
        super().__init__("interrupted")
        self.partial = partial
