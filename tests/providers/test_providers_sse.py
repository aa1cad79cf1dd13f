"""The SSE parser and JSON decode on their own, and the small helpers around the providers."""

from __future__ import annotations

import json

import pytest

from ipyagent.providers import (
    ContextOverflowError,
    ModelRequest,
    complete,
    error_message,
    is_context_overflow,
    parse_model_string,
)
from ipyagent.providers.models import ModelTable
from ipyagent.providers.transport import sse
from ipyagent.providers.transport.sse import iter_sse
from ipyagent.testing import FakeProviderServer

STREAM = (b": keep-alive comment\n\n"
          b"data: {\"a\": 1}\n\n"
          b"event: message_start\ndata: {\"type\": \"message_start\"}\n\n"
          b"id: 7\nretry: 100\ndata: first line\ndata: second line\n\n"
          b"error: {\"code\": 500}\n\n"
          b"data: [DONE]\n\n")
EXPECTED = [(None, b'{"a": 1}'), ("message_start", b'{"type": "message_start"}'),
            (None, b"first line\nsecond line"), ("error", b'{"code": 500}'), (None, b"[DONE]")]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, 1000])
def test_events_survive_any_chunking(size):
    chunks = [STREAM[i:i + size] for i in range(0, len(STREAM), size)]
    assert list(iter_sse(chunks)) == EXPECTED


def test_crlf_line_endings_and_a_last_event_without_blank_line():
    crlf = STREAM.replace(b"\n", b"\r\n")
    for size in (1, 2, 5, 50):
        assert list(iter_sse([crlf[i:i + size] for i in range(0, len(crlf), size)])) == EXPECTED
    assert list(iter_sse([b"data: {\"x\": 2}\n\ndata: tail"])) == [(None, b'{"x": 2}'), (None, b"tail")]
    assert list(iter_sse([b"data:no-space\n\n"])) == [(None, b"no-space")]


@pytest.mark.parametrize("use_orjson", [True, False])
def test_fast_loads_matches_json(monkeypatch, use_orjson):
    if not use_orjson:
        monkeypatch.setattr(sse, "_orjson", None)
    for raw in (b'{"a": [1, 2.5, null, true], "b": "\\u00e9\\n"}', b'  {"lead": 1}', b'{"t": 1}  ',
                b'"just a string"', b'{"n": NaN}', "{\"ü\": \"ö\"}".encode()):
        assert json.dumps(sse.loads(raw)) == json.dumps(json.loads(raw))
    for bad in (b'{"a": 1} trailing', b'{"unterminated": "x', b"not json", b"\xff\xfe"):
        with pytest.raises(ValueError):
            sse.loads(bad)


def test_parse_model_string():
    assert parse_model_string("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_model_string("openai:qwen2.5-coder:7b") == ("openai", "qwen2.5-coder:7b")
    assert parse_model_string("gpt-4o") == ("openai", "gpt-4o")
    with pytest.raises(ValueError, match="no model after the provider"):
        parse_model_string("openai:")


def test_complete_and_error_message_helpers():
    with FakeProviderServer(context_window=50) as server:
        provider = server.provider("openai")
        server.enqueue_text("## Goal\nSummary text")
        message = complete(provider, ModelRequest(model="cheap", messages=[{"role": "user", "content": "hi"}]))
        assert message["content"] == [{"type": "text", "text": "## Goal\nSummary text"}]
        request = ModelRequest(model="cheap", messages=[{"role": "user", "content": "x " * 500}])
        with pytest.raises(ContextOverflowError) as info:
            complete(provider, request, sleep=lambda s: None)
    failed = error_message(provider, request, info.value)
    assert failed["stopReason"] == "error" and failed["provider"] == "openai" and failed["content"] == []
    assert is_context_overflow(failed)  # Pi's rule recognises the recorded error
    models = ModelTable()
    assert models.learn_from_error("openai", "cheap", info.value) == 50
    assert models.context_window("openai", "cheap") == 50
