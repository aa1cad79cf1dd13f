"""A fake model provider on loopback: real HTTP, real SSE, three wire protocols (OpenAI Chat
Completions, the OpenAI Responses API, Anthropic Messages).

Use it in your own tests to run ipyagent (or any OpenAI/Anthropic client) without a network::

    from ipyagent.providers import ModelRequest, ToolSpec, stream_with_retry
    from ipyagent.testing import FakeProviderServer, collect

    with FakeProviderServer(context_window=8000) as server:
        server.enqueue_tool_call("python", {"code": "1 + 1"})   # the next reply: a tool call
        server.enqueue_text("The answer is 2.")                 # the one after: text
        server.enqueue_summary("## Goal\\nAdd numbers.")        # for the next summariser request
        provider = server.provider("openai")                    # or "responses", "anthropic"
        request = ModelRequest(model="fake-model", messages=[{"role": "user", "content": "1 + 1?"}],
                               tools=[ToolSpec("python", "Run code", {"type": "object"})])
        first = collect(stream_with_retry(provider, request))
        assert first.tool_calls[0].arguments == {"code": "1 + 1"}
        assert first.message["stopReason"] == "toolUse"
        assert server.requests[0].body["messages"][-1]["content"] == "1 + 1?"
        assert server.requests[0].headers["authorization"] == "REDACTED"
        assert server.summary_calls == 0

Or point any client at it: ``OPENAI_BASE_URL=server.openai_base_url`` (ends with ``/v1``; it
serves ``/v1/chat/completions`` and ``/v1/responses``),
``ANTHROPIC_BASE_URL=server.anthropic_base_url``; ``server.register("fake")`` makes the model
string ``fake:any-model`` resolve to it in ``server.providers`` (a provider registry to pass to an
``Agent``; or register it into a kernel's: ``server.register("fake", registry=runtime.providers)``).

Replies come from a queue (``enqueue_*``; several tool calls in one reply with
``enqueue_tool_calls``), else from ``policy(request_json)``. Summariser requests (recognised by
``summary_detector``; by default a ``<conversation>`` block or a system prompt about
summarising) take ``enqueue_summary`` replies first and otherwise get a stock summary, and are
counted in ``summary_calls``. Usage is computed from the request: ``ceil(chars / 4)`` of the
serialised prompt, with the longest prefix shared with an earlier request reported as cached
(``cacheRead``; Anthropic also reports ``cacheWrite`` up to its last cache breakpoint), so prompt
cache reuse can be measured. With ``context_window`` set, a request over the window gets the
provider's real overflow error (``overflow_style``: ``auto``, ``openai``, ``anthropic``,
``llamacpp``, ``cerebras``, ``responses`` (HTTP 400), ``responses_failed`` (a ``response.failed``
event in a 200 stream), ``llama-cpp-python`` (a stream that closes with no event at all, and the
server's 400 when asked without streaming), or ``silent`` for a reply whose usage exceeds the
window). Faults: ``enqueue_rate_limit``, ``enqueue_error``, ``enqueue_cut``, ``enqueue_malformed``,
``enqueue_stream_error``, ``enqueue_auth_error``, ``enqueue_overflow``, ``enqueue_empty_stream``,
``enqueue_hangup``. Every request is recorded in ``requests`` with its path, headers (keys
REDACTED; ``auth_scheme`` tells Bearer from Basic) and JSON body. ``basic_auth=(user, password)``
makes the server demand those Basic credentials. A request with ``"stream": false`` gets the whole
reply as one JSON answer (OpenAI chat).

``server_kind`` makes it answer what that server publishes about its model (the model listing
of ``openrouter``, ``together``, ``groq``, ``vllm``, ``lmstudio``, ``llamacpp``,
``llamacpp-old``, ``ollama``, ``llama-cpp-python``; ``/props``, ``/api/ps``, ``/api/show``,
``/api/v0/models/{id}`` and the tokenizer endpoints where that server has them), with
``served_window`` (default: ``context_window``) as the window it enforces and ``trained_window``
as the model's own; those requests are listed in ``meta_requests``.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ipyagent.testing import server_kinds
from ipyagent.testing.accounting import common_prefix, default_summary_detector, prompt_pieces, tokens
from ipyagent.testing.reply_script import DEFAULT_SUMMARY, Policy, ReplyScript, Spec
from ipyagent.testing.server_kinds import ModelFacts
from ipyagent.testing.specs import (
    Fault,
    RawStream,
    Reply,
    ToolCallSpec,
    anthropic_stream,
    error_body,
    openai_completion,
    openai_stream,
    overflow_response,
    responses_failed_stream,
    responses_stream,
    stream_error_event,
)

if TYPE_CHECKING:  # the providers are imported when a test asks for one
    from ipyagent.providers.registry import ProviderRegistry
    from ipyagent.providers.transport.streaming import HTTPProvider

_META_PREFIXES = ("/v1/models", "/props", "/api/", "/tokenize", "/extras/")  # what server_kinds answers
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-case names; secrets REDACTED
    body: dict[str, Any]
    protocol: str  # "openai", "responses" or "anthropic"
    kind: str  # "chat", "summary" or "count_tokens"
    prompt_tokens: int
    cached_tokens: int = 0
    outcome: str = ""  # "reply", "overflow", "fault:<kind>:<status>", "unscripted"
    auth_scheme: str = ""  # the Authorization header's scheme ("Bearer", "Basic"), "" without one
    sent_bytes: int = 0  # of the streamed reply's events, as far as the client took them


class FakeProviderServer(ReplyScript):
    """The server (see the module docstring): its lifecycle, its URLs and providers, and what it
    recorded; the replies a test scripts are :class:`~ipyagent.testing.reply_script.ReplyScript`'s."""

    def __init__(self, *, context_window: int | None = None, overflow_style: str = "auto", chunk_size: int = 8,
                 chunk_delay: float = 0.0, policy: Policy | None = None, api_key: str | None = None,
                 cache: bool = True, cache_min_tokens: int = 0, model: str | None = None,
                 summary_detector: Callable[[dict[str, Any]], bool] = default_summary_detector,
                 basic_auth: tuple[str, str] | None = None, server_kind: str | None = None,
                 served_window: int | None = None, trained_window: int | None = None):
        self.context_window = context_window
        self.server_kind = server_kind
        self.served_window = served_window
        self.trained_window = trained_window
        self.model_loaded = True  # Ollama / LM Studio: whether the model is in memory
        self.ollama_num_ctx: int | None = None  # Ollama: num_ctx in the model's parameters
        self.chars_per_token = 4.0  # what the tokenizer endpoints count
        self.stream_usage = True  # False: OpenAI streams carry no usage chunk (llama-cpp-python)
        self.meta_gate: threading.Event | None = None  # when set up, metadata requests wait for it
        self.meta_requests: list[tuple[str, str]] = []  # (method, path) of every request that is not a chat
        self.overflow_style = overflow_style
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        ReplyScript.__init__(self, policy)
        self.api_key = api_key  # when set, requests must carry it (else 401)
        self.basic_auth = basic_auth  # when set, requests must carry these Basic credentials (else 401)
        self.cache = cache
        self.cache_min_tokens = cache_min_tokens
        self.model = model
        self.summary_detector = summary_detector
        self.requests: list[RecordedRequest] = []
        self._history: dict[tuple[str, str], deque[str]] = {}  # recent prompts per (protocol, model)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._providers: list[Any] = []
        self._registry: ProviderRegistry | None = None

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeProviderServer:
        """Serve on a free loopback port, in a thread; returns the server (``with`` starts it too)."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        name="ipyagent-fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the providers it made and stop serving."""
        for provider in self._providers:
            provider.close()
        self._providers.clear()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` while it runs."""
        assert self._httpd is not None, "the server is not running: use it as a context manager or call start()"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        """The base URL an OpenAI client takes (``…/v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The base URL an Anthropic client takes."""
        return self.url

    def provider(self, protocol: str = "openai", **kwargs: Any) -> HTTPProvider:
        """A provider wired to this server (key: ``api_key`` or ``"fake-key"``)."""
        from ipyagent.providers.apis.anthropic import AnthropicProvider
        from ipyagent.providers.apis.openai_chat import OpenAIChatProvider
        from ipyagent.providers.apis.openai_responses import OpenAIResponsesProvider

        kwargs.setdefault("api_key", self.api_key or "fake-key")
        provider: HTTPProvider
        if protocol == "anthropic":
            provider = AnthropicProvider(base_url=self.anthropic_base_url, **kwargs)
        elif protocol == "responses":
            provider = OpenAIResponsesProvider(base_url=self.openai_base_url, **kwargs)
        else:
            provider = OpenAIChatProvider(base_url=self.openai_base_url, **kwargs)
        self._providers.append(provider)  # closed with the server
        return provider

    def register(self, name: str = "fake", protocol: str = "openai", registry: ProviderRegistry | None = None
                 ) -> ProviderRegistry:
        """Make ``"<name>:<model>"`` resolve to this server in ``registry`` (default: the server's own,
        :attr:`providers`, which holds the built-ins too); returns the registry. Pass it to what
        resolves the model (``AgentLoop(..., providers=server.providers)``), or a kernel's
        (``runtime.providers``)."""
        registry = registry if registry is not None else self.providers
        registry.register(name, lambda **cfg: self.provider(protocol, name=name, **cfg))
        return registry

    @property
    def providers(self) -> ProviderRegistry:
        """The server's provider registry: the built-ins, and the names :meth:`register` gave it."""
        if self._registry is None:
            from ipyagent.providers.registry import ProviderRegistry

            self._registry = ProviderRegistry.builtin()
        return self._registry

    def model_facts(self, model: str | None = None) -> ModelFacts:
        served = self.served_window or self.context_window
        return ModelFacts(model or self.model or "fake-model", served, self.trained_window or served,
                          loaded=self.model_loaded, num_ctx=self.ollama_num_ctx, chars_per_token=self.chars_per_token)

    @property
    def summary_calls(self) -> int:
        """How many compaction-summary requests it answered."""
        return sum(1 for r in self.requests if r.kind == "summary")

    @property
    def chat_calls(self) -> int:
        """How many chat (not summary) requests it answered."""
        return sum(1 for r in self.requests if r.kind == "chat")

    @property
    def last_request(self) -> RecordedRequest:
        """The latest request it received, as recorded."""
        return self.requests[-1]

    # ---- serving ------------------------------------------------------------------------------

    def _usage(self, record: RecordedRequest, pieces: list[str], marked: int, reply: Reply) -> dict[str, int]:
        prompt = "".join(pieces)
        total = tokens(len(prompt))
        read = write = 0
        if self.cache:
            with self._lock:
                history = self._history.setdefault((record.protocol, str(record.body.get("model"))), deque(maxlen=16))
                shared = max((common_prefix(prompt, old) for old in history), default=0)
                history.append(prompt)
            read = tokens(shared) if shared < len(prompt) else total
            read = 0 if read < self.cache_min_tokens else min(read, total)
            if record.protocol == "anthropic":
                breakpoint_tokens = tokens(len("".join(pieces[:marked]))) if marked else 0
                read = min(read, breakpoint_tokens)
                write = max(0, breakpoint_tokens - read)
        usage = {"input": total - read - write, "output": max(1, tokens(reply.output_chars())),
                 "cacheRead": read, "cacheWrite": write}
        usage.update(reply.usage or {})
        record.cached_tokens = usage["cacheRead"]
        return usage


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a handler sleeping in a slow script

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a client hanging up is normal
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeProviderServer

    def setup(self) -> None:
        super().setup()
        # small writes (headers, then each SSE event) must not wait for Nagle + delayed ACK (40 ms)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        if raw:
            self.send_header("content-type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _meta(self, method: str, path: str, body: Any) -> bool:
        """Answer a metadata or tokenizer request (``server_kind``); False if ``path`` is no such route."""
        if not path.startswith(_META_PREFIXES):
            return False
        fake = self.fake
        with fake._lock:
            fake.meta_requests.append((method, path))
        if fake.meta_gate is not None:
            fake.meta_gate.wait(60)
        answered = server_kinds.answer(fake.server_kind, method, path, body, fake.model_facts())
        if answered is None:
            self._send_json(404, {"error": {"message": f"fake server: no route {method} {path}"}})
        else:
            self._send_json(*answered)
        return True

    def do_GET(self) -> None:
        self._meta("GET", urllib.parse.urlsplit(self.path).path.rstrip("/"), None)

    def do_POST(self) -> None:
        fake = self.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send_json(400, {"error": {"message": "fake server: the body is not JSON"}})
        # an absolute URL means we were reached as an HTTP proxy: answer as the target would
        path = urllib.parse.urlsplit(self.path).path.rstrip("/")
        if self._meta("POST", path, body):
            return
        protocol = {"/v1/chat/completions": "openai", "/v1/responses": "responses", "/v1/messages": "anthropic",
                    "/v1/messages/count_tokens": "anthropic"}.get(path)
        if protocol is None:
            return self._send_json(404, {"error": {"message": f"fake server: no route {path}"}})
        record, pieces, marked = self._record(path, body, protocol)
        if (fake.api_key and not self._authorised(protocol, fake.api_key)) or (
                fake.basic_auth and not self._basic_authorised(*fake.basic_auth)):
            record.outcome = "fault:status:401"
            return self._send_json(401, error_body(protocol, 401))
        if record.kind == "count_tokens":
            record.outcome = "reply"
            return self._send_json(200, {"input_tokens": record.prompt_tokens})
        style = fake.overflow_style if fake.overflow_style != "auto" else protocol
        if fake.context_window and record.prompt_tokens > fake.context_window and style != "silent":
            record.outcome = "overflow"
            if style == "llama-cpp-python" and body.get("stream") is not False:  # it fails silently in a stream
                self._start_sse()
                self._end_chunks()
                return
            return self._overflow(style, record.prompt_tokens, fake.context_window, body)
        spec = fake.next_reply(record.kind, body, fake.summary_calls)
        if spec is None:
            record.outcome = "unscripted"
            return self._send_json(400, error_body(protocol, 400, message=(
                f"FakeProviderServer: no reply queued for this {record.kind} request to {path}; use enqueue_text() "
                f"and friends, or set a policy")))
        self._reply(record, spec, pieces, marked)

    def _record(self, path: str, body: dict[str, Any], protocol: str) -> tuple[RecordedRequest, list[str], int]:
        """The request as the server records it (secret headers redacted), and its prompt's pieces."""
        fake = self.fake
        headers = {k.lower(): ("REDACTED" if k.lower() in _SECRET_HEADERS else v) for k, v in self.headers.items()}
        pieces, marked = prompt_pieces(body, protocol)
        kind = "count_tokens" if path.endswith("count_tokens") else (
            "summary" if fake.summary_detector(body) else "chat")
        record = RecordedRequest(path, headers, body, protocol, kind, tokens(sum(len(p) for p in pieces)),
                                 auth_scheme=(self.headers.get("authorization") or "").partition(" ")[0])
        with fake._lock:
            fake.requests.append(record)
        return record, pieces, marked

    def _reply(self, record: RecordedRequest, spec: Spec, pieces: list[str], marked: int) -> None:
        """Answer with the scripted ``spec``: a fault, a whole reply, or a stream."""
        fake, body, protocol = self.fake, record.body, record.protocol
        if isinstance(spec, Fault) and spec.kind in ("status", "overflow"):
            if spec.kind == "overflow":
                record.outcome = "overflow"
                return self._overflow(spec.error_type or protocol, record.prompt_tokens, spec.window, body)
            record.outcome = f"fault:status:{spec.status}"
            error = spec.body if spec.body is not None else error_body(protocol, spec.status, spec.error_type)
            return self._send_json(spec.status, error, spec.headers)
        model = str(body.get("model") or fake.model or "fake-model")
        if isinstance(spec, Fault) and spec.kind == "empty":
            record.outcome = "fault:empty"
            self._start_sse()
            self._end_chunks()
            return
        if isinstance(spec, Fault) and spec.kind == "hangup":
            record.outcome = "fault:hangup"
            self.close_connection = True
            return
        if body.get("stream") is False and protocol == "openai" and isinstance(spec, Reply):
            record.outcome = "reply"
            return self._send_json(200, openai_completion(spec, model, fake._usage(record, pieces, marked, spec)))
        self._stream(record, spec, pieces, marked, model)

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _authorised(self, protocol: str, key: str) -> bool:
        if protocol == "anthropic":
            return self.headers.get("x-api-key") == key
        return self.headers.get("authorization") == f"Bearer {key}"

    def _basic_authorised(self, user: str, password: str) -> bool:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return self.headers.get("authorization") == f"Basic {token}"

    def _overflow(self, style: str, tokens: int, window: int, body: dict[str, Any]) -> None:
        status, error = overflow_response(style, tokens, window, max_tokens=body.get("max_tokens"))
        if style != "responses_failed":
            return self._send_json(status, error)
        self._start_sse()  # the Responses API can also fail inside a 200 stream
        for event in responses_failed_stream(error["error"], str(body.get("model") or "fake-model")):
            self._chunk(event)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(self, record: RecordedRequest, spec: Spec, pieces: list[str], marked: int, model: str) -> None:
        fake = self.fake
        if isinstance(spec, RawStream):
            record.outcome = "raw"
            self._start_sse()
            for chunk in spec.chunks:
                self._chunk(chunk.encode() if isinstance(chunk, str) else chunk)
                if spec.delay:
                    time.sleep(spec.delay)
            self.wfile.write(b"0\r\n\r\n")
            return
        reply = spec.reply if isinstance(spec, Fault) else spec
        usage = fake._usage(record, pieces, marked, reply)
        size = reply.chunk_size or fake.chunk_size
        if record.protocol == "openai":
            events = openai_stream(reply, model, usage, size, with_usage=fake.stream_usage)
        else:
            writer = {"anthropic": anthropic_stream, "responses": responses_stream}[record.protocol]
            events = writer(reply, model, usage, size)
        delay = reply.delay if reply.delay is not None else fake.chunk_delay
        record.outcome = "reply" if isinstance(spec, Reply) else f"fault:{spec.kind}"
        self._start_sse()
        try:
            for n, event in enumerate(events):
                if isinstance(spec, Fault) and n == spec.after_chunks:
                    if spec.kind == "malformed":
                        self._chunk(b'data: {"choices": [{"delta": {"content": "broken\n\n')
                    elif spec.kind == "stream_error":
                        self._chunk(stream_error_event(record.protocol, spec.error_type))
                    if spec.kind == "cut" and not spec.clean:
                        self.close_connection = True
                        self.wfile.flush()
                        return  # drop the connection: no terminating chunk
                    break
                self._chunk(event)
                record.sent_bytes += len(event)
                if n == 0 and isinstance(spec, Reply) and spec.hold is not None:
                    spec.hold.wait(timeout=300)  # a test watches the run mid-stream, then releases it
                if delay:
                    time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up (cancel, interrupt)
            record.outcome = "client-closed"

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


__all__ = [
    "DEFAULT_SUMMARY",
    "FakeProviderServer",
    "Fault",
    "RawStream",
    "RecordedRequest",
    "Reply",
    "ToolCallSpec",
    "default_summary_detector",
]
