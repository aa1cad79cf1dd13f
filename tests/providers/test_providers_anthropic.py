"""Anthropic Messages provider against the loopback fake server (real HTTP, real SSE)."""

from __future__ import annotations

import json
import re
import threading

import pytest

from ipyagent.providers import (
    AnthropicProvider,
    AuthenticationError,
    ModelRequest,
    ServerError,
    StreamInterrupted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    stream_with_retry,
)
from ipyagent.testing import FakeProviderServer, RawStream, Reply, ToolCallSpec, collect

MODEL = "claude-sonnet-4-5"


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def request(*messages: dict, **kw) -> ModelRequest:
    msgs = list(messages) or [{"role": "user", "content": "hello"}]
    return ModelRequest(model=MODEL, messages=msgs, system_prompt="You are helpful.", **kw)


def ev(kind: str, **data) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def test_streamed_text_thinking_and_message(server):
    server.enqueue(Reply(text="The answer is 42.", thinking="Six times seven.", signature="EqQBCkYI"))
    result = collect(server.provider("anthropic").stream(request()))
    assert result.text == "The answer is 42." and result.thinking == "Six times seven."
    assert any(isinstance(e, ThinkingDelta) for e in result.events)
    msg = result.message
    assert (msg["api"], msg["provider"], msg["model"], msg["stopReason"]) == (
        "anthropic-messages", "anthropic", MODEL, "stop")
    assert msg["content"] == [
        {"type": "thinking", "thinking": "Six times seven.", "thinkingSignature": "EqQBCkYI"},
        {"type": "text", "text": "The answer is 42."}]
    assert msg["responseId"].startswith("msg_") and isinstance(msg["timestamp"], int)


def test_headers_system_cache_breakpoints_and_tools(server):
    server.enqueue_text("ok")
    history = [{"role": "user", "content": "first question"},
               {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic", "model": MODEL,
                "stopReason": "stop", "content": [{"type": "text", "text": "first answer"}]},
               {"role": "user", "content": [{"type": "text", "text": "second"},
                                            {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}]
    tool = ToolSpec("ls", "List files", {"type": "object", "properties": {}})
    collect(server.provider("anthropic", api_key="sk-ant-secret").stream(request(*history, tools=[tool])))
    sent = server.last_request
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "REDACTED" and sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.body
    assert body["stream"] is True and body["model"] == MODEL
    assert body["max_tokens"] == 32_000  # from the model table (64k output), capped
    assert body["system"] == [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"] == [{"name": "ls", "description": "List files", "input_schema": tool.parameters}]
    messages = body["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "first question"}]}
    last = messages[-1]["content"]
    assert last[0] == {"type": "text", "text": "second"}
    assert last[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                       "cache_control": {"type": "ephemeral"}}
    assert json.dumps(messages).count("cache_control") == 1  # only the last user block carries one


def test_tool_calls_single_and_parallel_with_split_json(server):
    calls = [ToolCallSpec("read", {"path": "notes/a very long file name.md", "offset": 10}, "toolu_01"),
             ToolCallSpec("bash", {"command": "ls -la && echo done"}, "toolu_02")]
    server.enqueue(Reply(text="Let me look.", tool_calls=calls, chunk_size=4))
    result = collect(server.provider("anthropic").stream(request()))
    deltas = [e for e in result.events if isinstance(e, ToolCallDelta)]
    assert len(deltas) > 8 and {d.index for d in deltas} == {0, 1}
    assert [(c.index, c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (0, "toolu_01", "read", calls[0].arguments), (1, "toolu_02", "bash", calls[1].arguments)]
    assert result.message["stopReason"] == "toolUse"
    assert [b["type"] for b in result.message["content"]] == ["text", "toolCall", "toolCall"]


def test_usage_cache_fields_and_cumulative_message_delta(server):
    server.enqueue(RawStream([
        ev("message_start", message={"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                     "model": MODEL, "usage": {"input_tokens": 12, "cache_read_input_tokens": 3000,
                                                               "cache_creation_input_tokens": 450,
                                                               "output_tokens": 1}}),
        ev("ping"),
        ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        ev("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi"}),
        ev("some_future_event", whatever=True),
        ev("content_block_stop", index=0),
        ev("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 10}),
        ev("message_delta", delta={"stop_reason": "max_tokens"}, usage={"output_tokens": 25}),
        ev("message_stop"),
    ]))
    result = collect(server.provider("anthropic").stream(request()))
    usage = result.message["usage"]
    # cumulative: the last value (25), never 1 + 10 + 25
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (12, 25, 3000, 450)
    assert usage["totalTokens"] == 12 + 25 + 3000 + 450
    assert result.message["stopReason"] == "length" and result.text == "Hi"


def test_server_computed_cache_read_and_write(server):
    provider = server.provider("anthropic")
    first_history = [{"role": "user", "content": "Here is a long document. " * 60}]
    server.enqueue_text("Noted.")
    first = collect(provider.stream(request(*first_history))).message
    server.enqueue_text("Sure.")
    second = collect(provider.stream(request(*first_history, first, {"role": "user", "content": "Summarise."})))
    one, two = first["usage"], second.message["usage"]
    assert one["cacheRead"] == 0 and one["cacheWrite"] > 300
    assert two["cacheRead"] >= one["cacheWrite"] - 2 and two["cacheWrite"] > 0


def test_tool_results_merged_and_ids_adapted_from_another_provider(server):
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "api": "openai-completions", "provider": "openai", "model": "gpt-4.1",
         "stopReason": "toolUse", "content": [
             {"type": "thinking", "thinking": "private reasoning"},
             {"type": "toolCall", "id": "call_abc|item/1", "name": "read", "arguments": {"path": "a"}},
             {"type": "toolCall", "id": "call_def", "name": "read", "arguments": {"path": "b"}}]},
        {"role": "toolResult", "toolCallId": "call_abc|item/1", "toolName": "read",
         "content": [{"type": "text", "text": "A"}], "isError": False},
        {"role": "toolResult", "toolCallId": "call_def", "toolName": "read",
         "content": [{"type": "text", "text": "no such file"}], "isError": True},
    ]
    server.enqueue_text("done")
    collect(server.provider("anthropic").stream(request(*history)))
    messages = server.last_request.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assistant = messages[1]["content"]
    assert assistant[0] == {"type": "text", "text": "private reasoning"}  # another model's thinking: text
    first_id = assistant[1]["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", first_id) and first_id != "call_abc|item/1"
    assert assistant[1]["input"] == {"path": "a"} and assistant[2]["id"] == "call_def"
    results = messages[2]["content"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert results[0]["tool_use_id"] == first_id and results[0]["content"] == [{"type": "text", "text": "A"}]
    assert results[1]["is_error"] is True and results[1]["cache_control"] == {"type": "ephemeral"}


def test_thinking_sent_back_unchanged_to_the_same_model(server):
    server.enqueue(Reply(thinking="Plan: call ls.", signature="SIG123",
                         tool_calls=[ToolCallSpec("ls", {}, "toolu_9")]))
    provider = server.provider("anthropic")
    first = collect(provider.stream(request())).message
    server.enqueue_text("There are two files.")
    result_msg = {"role": "toolResult", "toolCallId": "toolu_9", "toolName": "ls",
                  "content": [{"type": "text", "text": "a b"}], "isError": False}
    collect(provider.stream(request({"role": "user", "content": "hello"}, first, result_msg)))
    assistant = server.last_request.body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "Plan: call ls.", "signature": "SIG123"}
    assert assistant[1] == {"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {}}


def test_redacted_thinking_round_trip(server):
    server.enqueue(RawStream([
        ev("message_start", message={"id": "m", "usage": {"input_tokens": 5, "output_tokens": 1}}),
        ev("content_block_start", index=0, content_block={"type": "redacted_thinking", "data": "opaque=="}),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        ev("content_block_delta", index=1, delta={"type": "text_delta", "text": "ok"}),
        ev("content_block_stop", index=1),
        ev("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}),
        ev("message_stop")]))
    provider = server.provider("anthropic")
    first = collect(provider.stream(request())).message
    assert first["content"][0]["redacted"] is True and first["content"][0]["thinkingSignature"] == "opaque=="
    server.enqueue_text("next")
    collect(provider.stream(request({"role": "user", "content": "q"}, first, {"role": "user", "content": "more"})))
    assert server.last_request.body["messages"][1]["content"][0] == {"type": "redacted_thinking", "data": "opaque=="}


def test_reasoning_request_sets_a_thinking_budget(server):
    server.enqueue_text("ok")
    collect(server.provider("anthropic").stream(request(reasoning="medium", max_tokens=4000, temperature=0.2)))
    body = server.last_request.body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] > 8192 and "temperature" not in body


def test_error_event_mid_stream_is_retried(server):
    server.enqueue_stream_error("overloaded_error", after_chunks=4)
    server.enqueue_text("second time lucky")
    delays = []
    result = collect(stream_with_retry(server.provider("anthropic"), request(), sleep=delays.append))
    assert len(result.retries) == 1 and "overloaded_error" in result.retries[0].reason
    assert delays == [2.0] and result.text == "second time lucky" and len(result.done) == 1


def test_error_event_without_retry_raises_server_error(server):
    server.enqueue_stream_error("api_error")
    with pytest.raises(ServerError, match="api_error"):
        collect(server.provider("anthropic").stream(request()))


def test_missing_message_stop_is_retried_once_and_yields_one_message(server):
    server.enqueue_cut("partial words that will be discarded", after_chunks=5, clean=True)
    server.enqueue_text("complete reply")
    delays = []
    result = collect(stream_with_retry(server.provider("anthropic"), request(), sleep=delays.append))
    assert "message_stop" in result.retries[0].reason and delays == [2.0]
    assert len(result.done) == 1 and result.message["content"] == [{"type": "text", "text": "complete reply"}]


def test_cancel_and_interrupt(server):
    server.enqueue(Reply(text="token " * 300, chunk_size=6, delay=0.003))
    cancel = threading.Event()
    events = []
    for event in server.provider("anthropic").stream(request(), cancel=cancel):
        events.append(event)
        if sum(isinstance(e, TextDelta) for e in events) == 2:
            cancel.set()
    assert events[-1].message["stopReason"] == "aborted"
    assert events[-1].message["content"] == [{"type": "text", "text": "token token "}]

    server.enqueue(Reply(text="token " * 300, chunk_size=6, delay=0.003))
    stream = server.provider("anthropic").stream(request())
    with pytest.raises(StreamInterrupted) as info:
        for event in stream:
            if isinstance(event, TextDelta):
                stream.throw(KeyboardInterrupt())
    assert info.value.partial["content"] == [{"type": "text", "text": "token "}]
    assert info.value.partial["api"] == "anthropic-messages"


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        next(AnthropicProvider().stream(request()))


def test_base_url_from_environment_has_no_v1(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    server.enqueue_text("env ok")
    provider = AnthropicProvider()
    assert provider.endpoint() == server.anthropic_base_url + "/v1/messages"
    assert collect(provider.stream(request())).text == "env ok"


def test_count_tokens_uses_the_providers_endpoint(server):
    req = request({"role": "user", "content": "count me " * 50}, tools=[ToolSpec("ls", "List", {"type": "object"})])
    n = server.provider("anthropic").count_tokens(req)
    sent = server.last_request
    assert sent.path == "/v1/messages/count_tokens" and n == sent.prompt_tokens > 100
    assert "stream" not in sent.body and "max_tokens" not in sent.body and sent.body["tools"][0]["name"] == "ls"
    assert server.chat_calls == 0


def test_tool_ids_reused_by_a_local_server_become_unique(server):
    def turn(n):
        return [{"role": "assistant", "provider": "ollama", "api": "openai-completions", "model": "qwen3",
                 "stopReason": "toolUse", "content": [{"type": "toolCall", "id": "call_0", "name": "ls",
                                                       "arguments": {}}]},
                {"role": "toolResult", "toolCallId": "call_0", "toolName": "ls",
                 "content": [{"type": "text", "text": f"result {n}"}], "isError": False}]

    server.enqueue_text("ok")
    collect(server.provider("anthropic").stream(request({"role": "user", "content": "go"}, *turn(1), *turn(2))))
    messages = server.last_request.body["messages"]
    ids = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [(b["tool_use_id"], b["content"][0]["text"]) for m in messages for b in m["content"]
               if b["type"] == "tool_result"]
    assert len(set(ids)) == 2 and ids[0] == "call_0"
    assert results == [(ids[0], "result 1"), (ids[1], "result 2")]


@pytest.mark.parametrize("retention,expected", [("none", None), ("short", {"type": "ephemeral"}),
                                                ("long", {"type": "ephemeral", "ttl": "1h"})])
def test_cache_retention_option(retention, expected):
    req = request(options={"cache_retention": retention})
    body = AnthropicProvider(api_key="k").payload(req)  # api.anthropic.com: the 1 h TTL is available
    assert body["system"][0].get("cache_control") == expected
    assert body["messages"][-1]["content"][-1].get("cache_control") == expected
    local = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:1").payload(req)
    assert local["system"][0].get("cache_control") == (expected and {"type": "ephemeral"})
