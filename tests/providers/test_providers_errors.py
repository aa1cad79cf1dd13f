"""Errors, overflow detection and retries, over real loopback HTTP."""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time

import pytest

from ipyagent.providers import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    MalformedStreamError,
    ModelNotFoundError,
    ModelRequest,
    NetworkError,
    OpenAIChatProvider,
    RateLimitError,
    Retrying,
    ServerError,
    is_context_overflow,
    is_overflow_error,
    is_silent_overflow,
    stream_with_retry,
)
from ipyagent.providers.models import ModelTable
from ipyagent.providers.overflow import window_from_error
from ipyagent.providers.transport.http import parse_retry_after
from ipyagent.testing import FakeProviderServer, collect

KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def request(text: str = "hello", model: str = "gpt-4.1-mini") -> ModelRequest:
    return ModelRequest(model=model, messages=[{"role": "user", "content": text}])


def run(provider, req=None, **kw):
    return collect(stream_with_retry(provider, req or request(), sleep=kw.pop("sleep", lambda s: None), **kw))


# ---- overflow ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol,style,window", [
    ("openai", "openai", 1000), ("anthropic", "anthropic", 1000), ("openai", "llamacpp", 1000)])
def test_over_window_request_raises_overflow_and_reveals_the_window(server, protocol, style, window):
    server.context_window = window
    server.overflow_style = style
    server.enqueue_text("never sent")
    with pytest.raises(ContextOverflowError) as info:
        run(server.provider(protocol), request("word " * 2000, model="m"))
    err = info.value
    assert err.status == 400 and err.context_window == window and not err.retryable
    assert server.requests[-1].outcome == "overflow" and server.pending() == 1  # not consumed, not retried
    assert len(server.requests) == 1
    models = ModelTable()
    assert models.learn_from_error(protocol, "m", err) == window
    assert models.context_window(protocol, "m") == window


def test_cerebras_style_400_without_body_is_overflow(server):
    server.enqueue_error(400, body="")
    with pytest.raises(ContextOverflowError) as info:
        run(server.provider("openai"))
    assert info.value.context_window is None and "(no body)" in str(info.value)


def test_newer_openai_overflow_message_and_413(server):
    server.enqueue_error(400, body={"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}})
    with pytest.raises(ContextOverflowError):
        run(server.provider("openai"))
    server.enqueue_error(413, body={"type": "error", "error": {"type": "request_too_large",
                                                               "message": "Request exceeds the maximum size"}})
    with pytest.raises(ContextOverflowError):
        run(server.provider("anthropic"))


@pytest.mark.parametrize("message,window", [
    ("prompt is too long: 213462 tokens > 200000 maximum", 200000),
    ("input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, decrease input length", 200000),
    ("This model's maximum context length is 32768 tokens. However, you requested 33000 tokens", 32768),
    ("request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it", 8192),
    ("The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).", 1048575),
    ("This model's maximum prompt length is 131072 but the request contains 140000 tokens.", 131072),
    ("Please reduce the length of the messages or completion.", None),
    ("prompt token count of 140000 exceeds the limit of 128000", 128000),
    (("Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with "
      "context length of only 4096 tokens, which is not enough. greater than the context length"), None),
    ("invalid params, context window exceeds limit (2013)", None),
    ("Your request exceeded model token limit: 262144", None),
    ("Prompt contains 140000 tokens, too large for model with 131072 maximum context length", 131072),
    ("Input is too long for requested model.", None),
    ("model_context_window_exceeded", None),
    ("context_length_exceeded", None),
    ("Too many tokens in the request", None),
    ("token limit exceeded", None),
    ("413 status code (no body)", None),
])
def test_overflow_patterns(message, window):
    assert is_overflow_error(400, message)
    assert window_from_error(message) == window
    assert is_context_overflow({"role": "assistant", "stopReason": "error", "errorMessage": message})


def test_output_too_large_is_resent_with_a_max_tokens_that_fits(server):
    server.enqueue_error(400, body={"type": "error", "error": {"type": "invalid_request_error", "message": (
        "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, decrease input length or "
        "`max_tokens` and try again")}})
    server.enqueue_text("fits now")
    req = ModelRequest(model="claude-3-5-sonnet", messages=[{"role": "user", "content": "q"}], max_tokens=20000)
    assert run(server.provider("anthropic"), req).text == "fits now"
    assert [r.body["max_tokens"] for r in server.requests] == [20000, 200000 - 188059]
    vllm = ("'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum context length is "
            "32768 tokens and your request has 32000 input tokens (4000 > 32768 - 32000).")
    server.enqueue_error(400, body={"error": {"message": vllm, "type": "BadRequestError"}})
    with pytest.raises(ContextOverflowError) as info:  # 768 tokens left: too little to be useful, so compact
        run(server.provider("openai"), ModelRequest(model="m", messages=[], max_tokens=4000))
    assert info.value.context_window == 32768 and len(server.requests) == 3


def test_overflow_reported_inside_a_stream(server):
    openai_error = {"error": {"message": "context overflow", "type": "invalid_request_error",
                              "code": "context_length_exceeded"}}
    server.enqueue_raw([f"data: {json.dumps(openai_error)}\n\n"])
    with pytest.raises(ContextOverflowError):
        run(server.provider("openai"))
    llama_error = {"code": 400, "type": "exceed_context_size_error", "n_ctx": 8192,
                   "message": "request (9000 tokens) exceeds the available context size (8192 tokens)"}
    server.enqueue_raw([f"error: {json.dumps(llama_error)}\n\n"])
    with pytest.raises(ContextOverflowError) as info:
        run(server.provider("openai"))
    assert info.value.context_window == 8192 and len(server.requests) == 2


def test_429_is_never_overflow():
    assert not is_overflow_error(429, "Too many tokens per minute: context_length_exceeded")
    assert not is_overflow_error(400, "Invalid value for temperature")
    assert not is_context_overflow({"stopReason": "error", "errorMessage": "429 too many tokens per minute"})


def test_silent_overflow():
    message = {"role": "assistant", "stopReason": "stop", "usage": {"input": 7000, "cacheRead": 2000}}
    assert is_silent_overflow(message, 8192)
    assert not is_silent_overflow(message, 16384)
    assert not is_silent_overflow(message, None)
    assert is_context_overflow(message, 8192)


def test_silent_overflow_from_a_server_that_does_not_refuse(server):
    server.context_window = 50
    server.overflow_style = "silent"
    server.enqueue_text("I only saw part of it")
    message = run(server.provider("openai"), request("word " * 400)).message
    assert is_silent_overflow(message, 50)


def test_learned_window_caps_table_and_configuration():
    models = ModelTable()
    assert models.context_window("openai", "gpt-4.1-mini-2025-04-14") == 1_047_576
    models.set_override("openai", "gpt-4.1-mini", context_window=4000)
    assert models.context_window("openai", "gpt-4.1-mini") == 4000
    models.learn_window("openai", "gpt-4.1-mini", 3000)
    assert models.context_window("openai", "gpt-4.1-mini") == 3000
    models.learn_window("ollama", "unknown-model:1b", 2048)
    assert models.context_window("ollama", "unknown-model:1b") == 2048
    assert models.info("anthropic", "claude-3-7-sonnet-latest").reasoning is True
    assert models.context_window("ollama", "llama3.1:8b") == 131_072
    assert models.context_window("openai", "no-such-model") is None


# ---- retries -------------------------------------------------------------------------------------


@pytest.mark.parametrize("header,value,expected", [
    ("retry-after", "3", 3.0), ("retry-after-ms", "1500", 1.5), ("retry-after", "0.25", 0.25)])
def test_429_waits_for_retry_after(server, header, value, expected):
    server.enqueue_rate_limit(value, header=header)
    server.enqueue_text("after the wait")
    delays: list[float] = []
    result = run(server.provider("openai"), sleep=delays.append)
    assert delays == [expected] and result.text == "after the wait"
    assert [type(e).__name__ for e in result.events][:1] == ["Retrying"] and result.retries[0].delay == expected
    assert len(result.done) == 1


def test_retry_after_http_date():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": when}) <= 31
    assert parse_retry_after({"retry-after": "garbage"}) is None


def test_server_asking_for_longer_than_max_delay_fails_at_once(server):
    server.enqueue_rate_limit(600)
    with pytest.raises(RateLimitError) as info:
        run(server.provider("openai"), max_delay=60)
    assert info.value.retry_after == 600 and len(server.requests) == 1


def test_insufficient_quota_is_not_retried(server):
    server.enqueue_error(429, body={"error": {"message": "You exceeded your current quota", "type":
                                              "insufficient_quota", "code": "insufficient_quota"}})
    with pytest.raises(RateLimitError, match="quota"):
        run(server.provider("openai"))
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_5xx_retried_with_exponential_backoff(server, status):
    server.enqueue_error(status)
    server.enqueue_error(status)
    server.enqueue_text("recovered")
    delays: list[float] = []
    result = run(server.provider("anthropic"), sleep=delays.append)
    assert delays == [2.0, 4.0] and result.text == "recovered" and len(result.done) == 1


def test_gives_up_after_max_retries(server):
    for status in (503, 502, 503, 500):  # never the same error three times in a row (test_repeated_errors.py)
        server.enqueue_error(status)
    delays: list[float] = []
    with pytest.raises(ServerError, match="gave up after 4 attempts"):
        run(server.provider("openai"), sleep=delays.append, max_retries=3)
    assert delays == [2.0, 4.0, 8.0] and len(server.requests) == 4


@pytest.mark.parametrize("clean", [False, True], ids=["connection-dropped", "no-DONE"])
def test_stream_cut_short_is_retried_and_yields_exactly_one_message(server, clean):
    server.enqueue_cut("This text is streamed halfway and then lost.", after_chunks=4, clean=clean)
    server.enqueue_text("The full reply.")
    events = list(stream_with_retry(server.provider("openai"), request(), sleep=lambda s: None))
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("MessageDone") == 1 and kinds.count("Retrying") == 1
    assert kinds.index("TextDelta") < kinds.index("Retrying")  # partial text arrived, then the reset
    assert isinstance(events[kinds.index("Retrying")], Retrying)
    assert events[-1].message["content"] == [{"type": "text", "text": "The full reply."}]


def test_connection_refused_is_a_retryable_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    provider = OpenAIChatProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    delays: list[float] = []
    with pytest.raises(NetworkError, match="connection problem") as info:
        run(provider, sleep=delays.append, max_retries=2)
    assert info.value.retryable and delays == [2.0, 4.0] and KEY not in str(info.value)


def test_base_url_without_scheme_is_a_configuration_error():
    delays: list[float] = []
    with pytest.raises(BadRequestError, match="invalid base URL 'localhost:11434/v1'"):
        run(OpenAIChatProvider(base_url="localhost:11434/v1"), sleep=delays.append)
    assert delays == []


def test_cancel_during_the_backoff_returns_an_aborted_message(server):
    server.enqueue_error(503)
    cancel = threading.Event()
    result = collect(stream_with_retry(server.provider("openai"), request(), cancel=cancel,
                                       sleep=lambda s: cancel.set()))
    assert result.message["stopReason"] == "aborted" and len(server.requests) == 1


# ---- other failures ------------------------------------------------------------------------------


def test_malformed_sse_is_a_clear_error_and_not_retried(server):
    server.enqueue_malformed(after_chunks=3)
    server.enqueue_text("unused")
    with pytest.raises(MalformedStreamError, match="not JSON") as info:
        run(server.provider("openai"))
    assert "broken" in str(info.value) and len(server.requests) == 1


def test_401_names_the_variable_and_never_the_key(server):
    server.api_key = "the-right-key"
    for protocol, variable in (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")):
        provider = server.provider(protocol, api_key=KEY)
        with pytest.raises(AuthenticationError) as info:
            run(provider)
        text = f"{info.value} {info.value!r} {info.value.body} {provider!r}"
        assert variable in str(info.value) and "401" in str(info.value)
        assert KEY not in text and KEY[-8:] not in text


def test_a_server_echoing_the_key_is_scrubbed(server):
    server.enqueue_error(401, body={"error": {"message": f"Incorrect API key provided: {KEY}",
                                              "code": "invalid_api_key"}})
    with pytest.raises(AuthenticationError) as info:
        run(server.provider("openai", api_key=KEY))
    assert KEY not in str(info.value) and KEY not in (info.value.body or "") and "***" in str(info.value)


def test_404_unknown_model_and_other_400(server):
    server.enqueue_error(404)
    with pytest.raises(ModelNotFoundError, match="gpt-4.1-mini"):
        run(server.provider("openai"))
    server.enqueue_error(400, body={"error": {"message": "Invalid value for 'temperature'", "type":
                                              "invalid_request_error"}})
    with pytest.raises(BadRequestError, match="temperature"):
        run(server.provider("openai"))
    assert len(server.requests) == 2  # neither was retried


def test_unscripted_request_gets_a_clear_error(server):
    with pytest.raises(BadRequestError, match="no reply queued"):
        run(server.provider("openai"))
