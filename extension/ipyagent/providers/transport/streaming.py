"""The request/stream lifecycle shared by the HTTP providers: keys and base URLs, sending,
error responses, cancel, kernel interrupts, the stream's deadlines and closing the connection.

A read timeout alone never ends a stream that sends only keep-alive comments (``: ping`` every
few seconds): each read gets its bytes. So a stream also has two deadlines, checked as bytes
arrive and by a watcher that shuts the socket down when nothing arrives: no content (an SSE
event with data) for ``no_content_timeout`` seconds (default :data:`NO_CONTENT_TIMEOUT`), and
``total_timeout`` seconds in all (default :data:`TOTAL_TIMEOUT`); both are provider options
(``%config Agent.provider_options = {"openai": {"no_content_timeout": 300}}``). A complete
(non-streamed) answer, which sends nothing until it is done, has only the total one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ipyagent.providers.errors import (
    AuthenticationError,
    BadRequestError,
    EmptyStreamError,
    MalformedStreamError,
    NetworkError,
    StreamDeadlineError,
    StreamInterrupted,
)
from ipyagent.providers.overflow import max_tokens_that_fit
from ipyagent.providers.pricing import is_local_server
from ipyagent.providers.pricing import warm_up as warm_up_prices
from ipyagent.providers.provider import MessageDone, ModelRequest, ProviderNote, StreamEvent
from ipyagent.providers.transport.http import (
    ErrorContext,
    error_from_response,
    network_error,
    new_client,
    split_url_credentials,
    strip_url_credentials,
)
from ipyagent.providers.transport.message import MessageBuilder
from ipyagent.providers.transport.sse import SSEEvent, iter_sse

# The inner event loop of a protocol: yields events, returns the final stop reason ("aborted" on cancel).
EventLoop = Generator[StreamEvent, None, str]

NO_CONTENT_TIMEOUT = 120.0  # seconds a stream may go without an event that carries data
TOTAL_TIMEOUT = 3600.0  # seconds one reply may take in all (a slow local model writing a long one)


class HTTPProvider:
    """Base of the wire protocols. Explicit arguments win over the environment, which is read at
    request time, so setting ``os.environ["OPENAI_API_KEY"]`` after creating a provider works."""

    name = "provider"
    api = ""
    label = "Provider"
    default_base_url = ""
    key_env: str | None = None
    base_url_env: str | None = None

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None, name: str | None = None,
                 label: str | None = None, key_env: str | None = None, base_url_env: str | None = None,
                 default_base_url: str | None = None, headers: dict[str, str] | None = None,
                 timeout: httpx.Timeout | float | None = None, client: httpx.Client | None = None,
                 require_key: bool | None = None, no_content_timeout: float | None = None,
                 total_timeout: float | None = None):
        self._api_key = api_key
        self._base_url = base_url
        if name:
            self.name = name
        if label:
            self.label = label
        if key_env is not None:
            self.key_env = key_env or None
        if base_url_env is not None:
            self.base_url_env = base_url_env or None
        if default_base_url:
            self.default_base_url = default_base_url
        self.extra_headers = dict(headers or {})
        self.require_key = require_key
        self._client = client
        self._timeout = timeout
        self.no_content_timeout = float(no_content_timeout) if no_content_timeout else NO_CONTENT_TIMEOUT
        self.total_timeout = float(total_timeout) if total_timeout else TOTAL_TIMEOUT
        self._lock = threading.Lock()
        # set when a stream that offered tools came back empty and the same request sent whole was
        # answered (llama-cpp-python cannot stream a tool call): such requests go whole from then on
        self.tools_whole = False

    def __repr__(self) -> str:  # never shows the key, nor the base URL's credentials
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.shown_base_url!r})"

    @property
    def shown_base_url(self) -> str:
        """The base URL without ``user:password@``, for messages."""
        return strip_url_credentials(self.base_url)

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = new_client(self._timeout)
            return self._client

    def close(self) -> None:
        """Close the connections; a later call opens new ones."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    @property
    def base_url(self) -> str:
        env = os.environ.get(self.base_url_env) if self.base_url_env else None
        return (self._base_url or env or self.default_base_url).rstrip("/")

    def api_key(self) -> str | None:
        if self._api_key:
            return self._api_key
        key = os.environ.get(self.key_env) if self.key_env else None
        if key:
            return key
        needs = (self.require_key if self.require_key is not None
                 else self.key_env is not None and self.base_url == self.default_base_url)
        if needs:
            where = f"set the {self.key_env} environment variable" if self.key_env else "configure a key"
            raise AuthenticationError(f"No API key for {self.label} ({self.shown_base_url}): {where}, "
                                      f"or pass api_key= in the provider configuration.")
        return None

    # ---- what a protocol supplies ------------------------------------------------------------

    def endpoint(self) -> str:
        raise NotImplementedError

    def headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        raise NotImplementedError

    # ---- the lifecycle -------------------------------------------------------------------------

    def new_builder(self, request: ModelRequest) -> MessageBuilder:
        return MessageBuilder(self.api, self.name, request.model, local=is_local_server(self.base_url))

    def request_target(self, url: str, key: str | None) -> tuple[str, dict[str, str]]:
        """The URL to send to and the headers to send. A base URL's ``user:password@`` never
        stays in the URL: it becomes ``Authorization: Basic`` when nothing else claims that header
        (no bearer key, no configured header); an API key always wins, and headers that do not use
        ``Authorization`` (Anthropic's ``x-api-key``) go together with the Basic credentials."""
        headers = {**self.headers(key), **self.extra_headers}
        clean, basic = split_url_credentials(url)
        if basic and not any(name.lower() == "authorization" for name in headers):
            headers["authorization"] = basic
        return clean, headers

    def stream(self, request: ModelRequest, cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
        warm_up_prices()
        key = self.api_key()
        url, headers = self.request_target(self.endpoint(), key)
        # the context keeps the URL as configured: its credentials are scrubbed from every message
        ctx = ErrorContext(self.label, self.endpoint(), request.model, self.key_env, key)
        call = _Call(url, self.payload(request), headers, ctx, self.new_builder(request), cancel,
                     _Deadlines(self.no_content_timeout, self.total_timeout))
        try:
            if call.cancelled():
                yield MessageDone(call.builder.build("aborted"))
                return
            try:
                stop = yield from self._send(call)
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:  # configuration, not bad luck
                raise BadRequestError(f"{self.label}: invalid base URL {self.shown_base_url!r} "
                                      f"({ctx.scrub(str(exc))}); it should look like {self.default_base_url!r}"
                                      ) from None
            except (httpx.TransportError, NetworkError) as exc:
                stop = _lost(exc, call)
            yield MessageDone(call.builder.build(stop))
        except StreamInterrupted:
            raise
        except KeyboardInterrupt:
            call.drop_response()
            raise StreamInterrupted(call.builder.build("aborted")) from None
        finally:
            call.close()

    def _send(self, call: _Call) -> EventLoop:
        """Send the request and read the reply; a stream that ends before its first event is asked
        again whole where the protocol has that form (see :meth:`_send_whole`)."""
        streamed = call.body.get("stream") is not False
        call.deadlines.streamed = streamed
        events = _Seen(call.deadlines)
        try:
            call.response = self._open(call.url, call.body, call.headers, call.ctx)
            _watch(call.cancel, call.finished, call.response, call.deadlines)
            source = (events.of(iter_sse(call.deadlines.bytes(call.response.iter_bytes()))) if streamed
                      else self._unstreamed(call.response, call.ctx))
            return (yield from self.events(source, call.builder, call.ctx, call.cancel))
        except (EmptyStreamError, httpx.RemoteProtocolError, httpx.ReadError):
            call.deadlines.raise_if_expired(call.ctx)  # the watcher cut a stream that overran a deadline
            # No event at all: the server closed the stream, or the connection, at once.
            # llama-cpp-python does that on an overflow; asked without streaming, it says so.
            plain = self.unstreamed(call.body) if streamed and not events.seen else None
            if plain is None or call.cancelled():
                raise
            return (yield from self._send_whole(call, plain))

    def _send_whole(self, call: _Call, plain: dict[str, Any]) -> EventLoop:
        """The request again as ``plain`` (one complete answer), on a new connection: the server
        may still be closing the pooled one."""
        call.drop_response()
        call.spare = new_client(self._timeout)
        call.deadlines.streamed = False
        call.response = self._open(call.url, plain, call.headers, call.ctx, client=call.spare)
        _watch(call.cancel, call.finished, call.response, call.deadlines)
        stop = yield from self.events(self._unstreamed(call.response, call.ctx), call.builder, call.ctx, call.cancel)
        if call.body.get("tools") and not self.tools_whole and stop != "aborted":
            self.tools_whole = True
            yield ProviderNote(
                f"{self.label} at {self.shown_base_url} answered a streamed request that offered "
                "tools with an empty stream, and the same request sent whole with a reply: requests "
                "with tools go whole from now on (their text shows when each reply is complete). "
                "llama-cpp-python's server does this whenever the model calls a tool.")
        return stop

    def unstreamed(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """``body`` as a request for one complete answer instead of a stream, or None when the
        protocol has no such form."""
        return None

    def completion_events(self, answer: Any) -> Iterator[SSEEvent]:
        """A complete (non-streamed) answer as the stream events ``events`` reads."""
        raise NotImplementedError

    def _unstreamed(self, response: httpx.Response, ctx: ErrorContext) -> Iterator[SSEEvent]:
        raw = response.read()
        try:
            answer = json.loads(raw) if raw.strip() else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise MalformedStreamError(f"{ctx.label}: the answer from {ctx.url} is not a JSON object: "
                                       f"{ctx.scrub(repr(raw[:200]))}")
        yield from self.completion_events(answer)

    def repair(self, body: dict[str, Any], status: int, text: str) -> dict[str, Any] | None:
        """A body worth one more try after an error response, or None. Here: when the error says
        only the requested output does not fit, the largest ``max_tokens`` that does."""
        smaller = max_tokens_that_fit(text)
        field = next((f for f in ("max_tokens", "max_completion_tokens") if f in body), None)
        if smaller is None or field is None or smaller >= body[field]:
            return None
        body = {**body, field: smaller}
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("budget_tokens", 0) >= smaller:
            body["thinking"] = {**thinking, "budget_tokens": max(1024, smaller // 2)}
        return body

    def _open(self, url: str, body: dict[str, Any], headers: dict[str, str], ctx: ErrorContext,
              client: httpx.Client | None = None) -> httpx.Response:
        """Send the request; on an error status raise its ProviderError, unless ``repair`` offers
        a body worth one more try."""
        client = client or self.client
        repaired = False
        while True:
            response = client.send(client.build_request("POST", url, json=body, headers=headers), stream=True)
            if response.status_code < 400:
                return response
            try:
                text = response.read().decode("utf-8", "replace")
            finally:
                response.close()
            fixed = None if repaired else self.repair(body, response.status_code, text)
            if fixed is None:
                raise error_from_response(ctx, response.status_code, response.headers, text)
            body, repaired = fixed, True


@dataclass
class _Call:
    """One reply's request as it goes: what is sent where, and what is open until it ends."""

    url: str
    body: dict[str, Any]
    headers: dict[str, str]
    ctx: ErrorContext
    builder: MessageBuilder
    cancel: threading.Event | None
    deadlines: _Deadlines
    finished: threading.Event = field(default_factory=threading.Event)  # stops the watcher
    response: httpx.Response | None = None
    spare: httpx.Client | None = None  # the client of a request sent again whole

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def drop_response(self) -> None:
        if self.response is not None:
            self.response.close()
            self.response = None

    def close(self) -> None:
        self.finished.set()
        self.drop_response()
        if self.spare is not None:
            self.spare.close()


def _lost(exc: httpx.TransportError | NetworkError, call: _Call) -> str:
    """The stop reason of a reply whose connection failed ("aborted" when cancel cut it), or the
    error to raise: a deadline passed, else the network error."""
    if call.cancelled():
        return "aborted"  # the watcher cut the connection
    if not isinstance(exc, StreamDeadlineError):
        call.deadlines.raise_if_expired(call.ctx)  # what the cut connection looked like is beside the point
    if isinstance(exc, NetworkError):
        raise exc
    raise network_error(call.ctx, exc) from None


class _Deadlines:
    """The two deadlines of one reply (see the module's docstring). ``check`` names the one
    passed, if any; the stream's bytes, its events and the watcher all consult it."""

    def __init__(self, no_content: float, total: float):
        self.no_content, self.total = no_content, total
        self.streamed = True  # a complete answer has only the total deadline
        self.start = self.last_content = time.monotonic()
        self.expired: StreamDeadlineError | None = None

    def content(self) -> None:
        self.last_content = time.monotonic()

    def check(self) -> StreamDeadlineError | None:
        if self.expired is None:
            now = time.monotonic()
            if now - self.start > self.total:
                self.expired = StreamDeadlineError(
                    f"the reply took longer than {self.total:g} s in all, the provider's total_timeout; the "
                    "stream was closed", retryable=False)
            elif self.streamed and now - self.last_content > self.no_content:
                self.expired = StreamDeadlineError(
                    f"no content for {self.no_content:g} s (only keep-alive comments, or nothing), the provider's "
                    "no_content_timeout; the stream was closed", retryable=True)
        return self.expired

    def raise_if_expired(self, ctx: ErrorContext) -> None:
        if self.expired is not None:
            raise StreamDeadlineError(f"{ctx.label}: {self.expired} ({ctx.scrub(ctx.url)})",
                                      retryable=self.expired.retryable) from None

    def bytes(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if self.check() is not None:
                raise httpx.ReadError("deadline")  # reported by raise_if_expired
            yield chunk


class _Seen:
    """Passes stream events through, remembers whether any came, and counts each as content."""

    seen = False

    def __init__(self, deadlines: _Deadlines):
        self.deadlines = deadlines

    def of(self, events: Iterator[SSEEvent]) -> Iterator[SSEEvent]:
        for event in events:
            self.seen = True
            self.deadlines.content()
            yield event


def _watch(cancel: threading.Event | None, finished: threading.Event, response: httpx.Response,
           deadlines: _Deadlines) -> None:
    """Make ``cancel``, or a deadline passed, stop a read that is waiting for the server (a slow
    first token, a server gone quiet): shutting the socket down wakes the blocked read at once,
    where closing it would not."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return  # cancel and the deadlines are then noticed when the next chunk arrives
    event = cancel if cancel is not None else threading.Event()

    def wait() -> None:
        while not finished.is_set():
            if event.wait(0.05) or deadlines.check() is not None:
                if not finished.is_set():
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return

    threading.Thread(target=wait, name="ipyagent-cancel-watch", daemon=True).start()


def interrupt(stream: Iterator[StreamEvent]) -> StreamInterrupted | None:
    """Deliver a KeyboardInterrupt that landed in the *consumer's* code (between events) to the
    suspended stream: it closes the connection and the returned ``StreamInterrupted`` carries the
    partial message. None if the stream had already finished. Typical use::

        stream = stream_with_retry(provider, request)
        try:
            for event in stream:
                render(event)
        except StreamInterrupted as exc:      # the interrupt arrived while reading
            partial = exc.partial
        except KeyboardInterrupt:             # it arrived in render()
            partial = interrupt(stream).partial
    """
    throw = getattr(stream, "throw", None)
    if throw is None:
        return None
    try:
        throw(KeyboardInterrupt())
    except StreamInterrupted as exc:
        return exc
    except (KeyboardInterrupt, StopIteration):
        return None
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    return None
