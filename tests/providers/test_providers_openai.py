"""OpenAI Chat Completions provider against the loopback fake server (real HTTP, real SSE)."""

from __future__ import annotations

import _thread
import json
import threading
import time

import pytest

from ipyagent.providers import (
    AuthenticationError,
    ModelRequest,
    OpenAIChatProvider,
    ProviderNote,
    ProviderRegistry,
    ServerError,
    StreamInterrupted,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    UsageUpdate,
    resolve_provider,
    stream_with_retry,
)
from ipyagent.providers.transport.streaming import interrupt
from ipyagent.testing import FakeProviderServer, RawStream, Reply, ToolCallSpec, collect

PYTHON_TOOL = ToolSpec("python", "Run Python code in the kernel", {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def request(*messages: dict, **kw) -> ModelRequest:
    msgs = list(messages) or [{"role": "user", "content": "hello", "timestamp": 1}]
    return ModelRequest(model="gpt-4.1-mini", messages=msgs, system_prompt="You are helpful.", **kw)


def wait_for(condition, what: str) -> None:
    """Poll ``condition`` (the server's thread sets it); the minute is a safety net, not a measure."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_streamed_text_and_final_message(server):
    server.enqueue_text("Hello from the fake model, streamed in pieces.")
    result = collect(server.provider("openai").stream(request(tools=[PYTHON_TOOL])))
    assert len([e for e in result.events if isinstance(e, TextDelta)]) > 3
    assert result.text == "Hello from the fake model, streamed in pieces."
    msg = result.message
    assert msg["role"] == "assistant" and msg["api"] == "openai-completions" and msg["provider"] == "openai"
    assert msg["model"] == "gpt-4.1-mini" and msg["stopReason"] == "stop"
    assert isinstance(msg["timestamp"], int) and msg["timestamp"] > 1_600_000_000_000
    assert msg["content"] == [{"type": "text", "text": "Hello from the fake model, streamed in pieces."}]
    assert set(msg["usage"]) == {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}
    assert msg["usage"]["totalTokens"] == msg["usage"]["input"] + msg["usage"]["output"] + msg["usage"]["cacheRead"]


def test_request_body_and_headers(server):
    server.enqueue_text("ok")
    collect(server.provider("openai", api_key="sk-secret-123").stream(request(tools=[PYTHON_TOOL], max_tokens=99)))
    sent = server.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "REDACTED"
    body = sent.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are helpful."}
    assert body["messages"][1] == {"role": "user", "content": "hello"}
    assert body["tools"] == [{"type": "function", "function": PYTHON_TOOL.to_dict()}]
    assert body["max_tokens"] == 99  # a compatible server gets the classic field name


def test_server_rejecting_stream_options_gets_the_request_without_it(server):
    server.enqueue_error(400, body={"error": {"message": "Unrecognized request argument supplied: stream_options",
                                              "type": "invalid_request_error"}})
    server.enqueue_text("fine without usage")
    assert collect(server.provider("openai").stream(request())).text == "fine without usage"
    assert ["stream_options" in r.body for r in server.requests] == [True, False]


def test_prompt_cache_key_only_for_openai_itself(server):
    req = request(options={"session_id": "0f3a9c2e"})
    assert OpenAIChatProvider(api_key="k").payload(req)["prompt_cache_key"] == "0f3a9c2e"
    assert "prompt_cache_key" not in server.provider("openai").payload(req)


def test_single_tool_call_with_arguments_split_across_chunks(server):
    args = {"code": "import math\nprint(math.pi * 2)", "timeout": 30}
    server.enqueue(Reply(tool_calls=[ToolCallSpec("python", args, "call_1")], chunk_size=3))
    result = collect(server.provider("openai").stream(request()))
    starts = [e for e in result.events if isinstance(e, ToolCallStart)]
    pieces = [e.arguments_delta for e in result.events if isinstance(e, ToolCallDelta)]
    assert [(s.index, s.id, s.name) for s in starts] == [(0, "call_1", "python")]
    assert len(pieces) > 5 and json.loads("".join(pieces)) == args
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "python", args)]
    assert result.message["stopReason"] == "toolUse"
    assert result.message["content"] == [{"type": "toolCall", "id": "call_1", "name": "python", "arguments": args}]


@pytest.mark.parametrize("omit_index", [False, True], ids=["indexed", "no-index-like-ollama"])
def test_parallel_tool_calls(server, omit_index):
    calls = [ToolCallSpec("read", {"path": "a.py"}, "call_a"), ToolCallSpec("read", {"path": "b.py"}, "call_b"),
             ToolCallSpec("ls", {}, "call_c")]
    server.enqueue(Reply(text="Reading both.", tool_calls=calls, omit_tool_index=omit_index, chunk_size=4))
    result = collect(server.provider("openai").stream(request()))
    assert [(c.index, c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (0, "call_a", "read", {"path": "a.py"}), (1, "call_b", "read", {"path": "b.py"}), (2, "call_c", "ls", {})]
    assert [b["type"] for b in result.message["content"]] == ["text", "toolCall", "toolCall", "toolCall"]


def test_arguments_cut_by_the_length_limit_are_kept_raw(server):
    cut = '{"path": "a.py", "con'
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "write", "arguments": cut}}
    server.enqueue(RawStream([
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}) + "\n\n",
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n', "data: [DONE]\n\n"]))
    message = collect(server.provider("openai").stream(request())).message
    assert message["stopReason"] == "length"
    assert message["content"] == [{"type": "toolCall", "id": "c1", "name": "write", "arguments": {},
                                   "rawArguments": cut}]


def test_every_call_numbered_zero_but_distinct_ids(server):
    chunks = []
    for call_id, name in (("call_x", "read"), ("call_y", "ls")):
        call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        chunks.append("data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}) + "\n\n")
    chunks += ['data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n', "data: [DONE]\n\n"]
    server.enqueue(RawStream(chunks))
    result = collect(server.provider("openai").stream(request()))
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_x", "read"), ("call_y", "ls")]


def test_error_null_and_unknown_fields_are_ignored_but_an_error_object_raises(server):
    server.enqueue(RawStream([
        'data: {"choices":[{"index":0,"delta":{"content":"fine"}}],"error":null,"x_extra":{"a":1}}\n\n',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n', "data: [DONE]\n\n"]))
    assert collect(server.provider("openai").stream(request())).text == "fine"
    server.enqueue(RawStream(['data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
                              'data: {"error":{"message":"upstream timed out","type":"server_error"}}\n\n']))
    with pytest.raises(ServerError, match="upstream timed out"):
        collect(server.provider("openai").stream(request()))


def test_gemini_thought_signature_round_trips_on_tool_calls(server):
    extra = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    call = {"id": "g1", "type": "function", "function": {"name": "ls", "arguments": "{}"}, "extra_content": extra}
    server.enqueue(RawStream([  # Gemini's OpenAI endpoint: no index, whole call in one chunk
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}) + "\n\n",
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n', "data: [DONE]\n\n"]))
    provider = server.provider("openai")
    first = collect(provider.stream(request())).message
    assert first["content"][0]["extraContent"] == extra
    server.enqueue_text("ok")
    result = {"role": "toolResult", "toolCallId": "g1", "toolName": "ls", "content": [{"type": "text", "text": "a"}]}
    collect(provider.stream(request({"role": "user", "content": "hi"}, first, result)))
    assert server.last_request.body["messages"][2]["tool_calls"][0]["extra_content"] == extra


@pytest.mark.parametrize("shape", ["empty", "null", "missing"])
def test_usage_with_cached_tokens(server, shape):
    server.enqueue(Reply(text="cached!", usage={"input": 120, "cacheRead": 880, "output": 7}, usage_choices=shape))
    result = collect(server.provider("openai").stream(request()))
    usage = result.message["usage"]
    # prompt_tokens (1000) includes cached_tokens (880): input is the uncached part
    assert (usage["input"], usage["cacheRead"], usage["cacheWrite"], usage["output"]) == (120, 880, 0, 7)
    assert usage["totalTokens"] == 1007
    assert any(isinstance(e, UsageUpdate) for e in result.events)


def test_prefix_cache_reported_on_a_growing_conversation(server):
    provider = server.provider("openai")
    history = [{"role": "user", "content": "Please analyse this data set. " * 40}]
    server.enqueue_text("First answer.")
    first = collect(provider.stream(request(*history))).message
    server.enqueue_text("Second answer.")
    second = collect(provider.stream(request(*history, first, {"role": "user", "content": "and now?"}))).message
    assert first["usage"]["cacheRead"] == 0
    assert second["usage"]["cacheRead"] >= first["usage"]["input"] - 2
    assert second["usage"]["input"] < second["usage"]["cacheRead"]


def test_reasoning_content_becomes_thinking(server):
    server.enqueue(Reply(text="42", thinking="Let me work it out step by step."))
    result = collect(server.provider("openai").stream(request()))
    assert result.thinking == "Let me work it out step by step."
    # the block keeps the field the reasoning came in, so it goes back in that field
    assert result.message["content"] == [{"type": "thinking", "thinking": "Let me work it out step by step.",
                                          "thinkingSignature": "reasoning_content"},
                                         {"type": "text", "text": "42"}]


def test_history_conversion_to_the_wire(server):
    long_id = "toolu_" + "x" * 60
    history = [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
        {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
         "stopReason": "toolUse", "content": [
             {"type": "thinking", "thinking": "I should run it.", "thinkingSignature": "sig"},
             {"type": "text", "text": "Running."},
             {"type": "toolCall", "id": long_id, "name": "python", "arguments": {"code": "1+1"}},
             {"type": "toolCall", "id": "toolu_2", "name": "ls", "arguments": {}}]},
        {"role": "toolResult", "toolCallId": long_id, "toolName": "python", "isError": False,
         "content": [{"type": "text", "text": "2"}, {"type": "image", "data": "BBBB", "mimeType": "image/jpeg"}]},
        # toolu_2 never got a result (interrupted): a synthetic error result is inserted
        {"role": "assistant", "stopReason": "error", "content": [], "errorMessage": "boom"},
        {"role": "assistant", "stopReason": "aborted", "content": [
            {"type": "text", "text": "Partial"}, {"type": "toolCall", "id": "c9", "name": "ls", "arguments": {}}]},
        {"role": "toolResult", "toolCallId": "orphan", "toolName": "ls", "content": [], "isError": False},
        {"role": "user", "content": "next"},
    ]
    server.enqueue_text("ok")
    collect(server.provider("openai").stream(request(*history)))
    wire = server.last_request.body["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "user", "assistant", "user"]
    assert wire[1]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    assistant = wire[2]
    # thinking from another provider's model is kept as plain text
    assert assistant["content"] == "I should run it.Running."
    short_id = assistant["tool_calls"][0]["id"]
    assert len(short_id) <= 40 and short_id != long_id
    assert assistant["tool_calls"][0]["function"] == {"name": "python", "arguments": '{"code": "1+1"}'}
    assert wire[3] == {"role": "tool", "tool_call_id": short_id, "content": "2"}
    assert wire[4]["tool_call_id"] == "toolu_2" and "No result" in wire[4]["content"]
    assert wire[5]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,BBBB"}}
    assert wire[6] == {"role": "assistant", "content": "Partial"}  # aborted: text kept, tool call dropped
    assert wire[7] == {"role": "user", "content": "next"}


def test_cancel_gives_an_aborted_message_with_what_arrived(server):
    server.enqueue(Reply(text="word " * 4000, chunk_size=5, delay=0.005))  # 20 s: still streaming at the hang-up
    cancel = threading.Event()
    events = []
    for event in server.provider("openai").stream(request(), cancel=cancel):
        events.append(event)
        if sum(isinstance(e, TextDelta) for e in events) == 3:
            cancel.set()
    done = events[-1].message
    assert done["stopReason"] == "aborted"
    assert done["content"] == [{"type": "text", "text": "word word word "}]
    wait_for(lambda: server.last_request.outcome == "client-closed", "the server to see the connection closed")


def test_cancel_while_waiting_for_a_slow_server_stops_at_once(server):
    server.enqueue(RawStream(['data: {"choices":[{"index":0,"delta":{"content":"first chunk,"}}]}\n\n',
                              'data: {"choices":[{"index":0,"delta":{"content":" second"}}]}\n\n'], delay=30.0))
    cancel = threading.Event()
    events = []
    for event in server.provider("openai").stream(request(), cancel=cancel):
        events.append(event)
        if isinstance(event, TextDelta):
            threading.Timer(0.05, cancel.set).start()  # e.g. a stop button, from another thread
    # had the read not been woken, the next chunk (30 s later) would be in the message
    assert events[-1].message["stopReason"] == "aborted"
    assert events[-1].message["content"] == [{"type": "text", "text": "first chunk,"}]


def test_cancel_before_start_sends_nothing(server):
    cancel = threading.Event()
    cancel.set()
    result = collect(stream_with_retry(server.provider("openai"), request(), cancel=cancel))
    assert result.message["stopReason"] == "aborted" and result.message["content"] == []
    assert server.requests == []


def test_keyboard_interrupt_thrown_by_the_consumer(server):
    server.enqueue(Reply(text="abcdefghij" * 2000, chunk_size=10, delay=0.005))  # 10 s
    stream = stream_with_retry(server.provider("openai"), request())
    seen = 0
    with pytest.raises(StreamInterrupted) as info:
        for event in stream:
            if isinstance(event, TextDelta):
                seen += 1
                if seen == 4:
                    stream.throw(KeyboardInterrupt())
    partial = info.value.partial
    assert partial["stopReason"] == "aborted" and partial["content"] == [{"type": "text", "text": "abcdefghij" * 4}]
    assert isinstance(info.value, KeyboardInterrupt)
    wait_for(lambda: server.last_request.outcome == "client-closed", "the server to see the connection closed")


@pytest.mark.usefixtures("sigint_raises")  # it interrupts itself: see tests/conftest.py
def test_kernel_interrupt_while_waiting_for_the_network(server):
    server.enqueue(Reply(text="x" * 20000, chunk_size=10, delay=0.01))  # 20 s
    stream = server.provider("openai").stream(request())
    text = ""
    timer = threading.Timer(0.02, _thread.interrupt_main)  # what the kernel's SIGINT does
    try:
        for event in stream:
            if isinstance(event, TextDelta):
                text += event.text
                if len(text) == 30:
                    timer.start()
        raise AssertionError("the stream was not interrupted")
    except StreamInterrupted as exc:
        partial = exc.partial
    except KeyboardInterrupt:  # landed in this loop's own code: hand it to the stream
        partial = interrupt(stream).partial
    finally:
        if timer.ident is not None:
            timer.join()  # an interrupt that came late lands here, never in a later test
    got = partial["content"][0]["text"]
    assert partial["stopReason"] == "aborted" and got.startswith("x" * 30) and len(got) < 20000
    wait_for(lambda: server.last_request.outcome == "client-closed", "the server to see the connection closed")
    server.enqueue_text("still works")
    assert collect(server.provider("openai").stream(request())).text == "still works"


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        next(OpenAIChatProvider().stream(request()))


def test_local_server_needs_no_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    server.enqueue_text("local answer")
    provider = OpenAIChatProvider()
    assert collect(provider.stream(request())).text == "local answer"
    assert "authorization" not in server.last_request.headers


def test_environment_and_explicit_arguments(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAIChatProvider().base_url == "http://127.0.0.1:9/v1"
    provider = OpenAIChatProvider(base_url=server.openai_base_url + "/", api_key="sk-explicit")
    assert provider.base_url == server.openai_base_url and provider.api_key() == "sk-explicit"
    assert "sk-" not in repr(provider)


def test_resolve_provider_from_model_strings(server):
    registry = ProviderRegistry.builtin()
    provider, model = registry.resolve("openai:gpt-4.1-mini")
    assert isinstance(provider, OpenAIChatProvider) and model == "gpt-4.1-mini"
    assert registry.resolve("openai:gpt-4.1-mini")[0] is provider  # reused: keeps connections alive
    assert resolve_provider("openai:gpt-4.1-mini")[0] is not provider  # the module's function: a new registry
    ollama, tagged = registry.resolve("ollama:qwen2.5-coder:7b")
    assert ollama.name == "ollama" and tagged == "qwen2.5-coder:7b" and ollama.base_url.endswith(":11434/v1")
    assert registry.resolve("claude-sonnet-4-5")[0].name == "anthropic"
    assert registry.resolve("llama3:8b")[1] == "llama3:8b"  # an unknown prefix is part of the model id
    with pytest.raises(ValueError, match="empty model string"):
        registry.resolve("  ")
    assert server.register("fake", registry=registry) is registry
    fake, model = registry.resolve("fake:tiny", {"fake": {"api_key": "k"}})
    server.enqueue_text("via the registry")
    assert collect(fake.stream(ModelRequest(model=model, messages=[{"role": "user", "content": "q"}]))).text \
        == "via the registry"
    assert server.last_request.body["model"] == "tiny"
    assert registry.parse("fake:tiny") == ("fake", "tiny")
    assert ProviderRegistry.builtin().parse("fake:tiny") == ("openai", "fake:tiny")  # another registry: unknown


def test_proxy_environment_is_honoured(server, monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)  # the fake server answers proxied requests too
    server.enqueue_text("through the proxy")
    provider = OpenAIChatProvider(base_url="http://api.example.invalid/v1", api_key="k")
    assert collect(provider.stream(request())).text == "through the proxy"
    assert server.last_request.path == "/v1/chat/completions"
    assert server.last_request.headers["host"] == "api.example.invalid"


def test_misspelt_provider_option_is_a_clear_error():
    with pytest.raises(ValueError, match="invalid options \\['api_key', 'baseurl'\\] for provider 'openai'") as info:
        resolve_provider("openai:gpt-4o", {"openai": {"baseurl": "http://x", "api_key": "sk-hidden"}})
    assert "sk-hidden" not in str(info.value)


def test_a_registry_laid_over_another_finds_its_providers_first(server):
    """A kernel's registry is made with the user's laid over it (``user=USER_PROVIDERS``): what
    the user registers resolves there, and wins over a built-in of the same name. (The process's
    own ``register_provider`` is tested in a kernel: tests/kernel/test_user_registrations.py.)"""
    user = ProviderRegistry()
    kernel = ProviderRegistry.builtin(user=user)
    user.register("mylocal", lambda **cfg: OpenAIChatProvider(name="mylocal", base_url=server.openai_base_url,
                                                              **cfg))
    provider, model = kernel.resolve("mylocal:my-model")
    server.enqueue_text("mine")
    assert collect(provider.stream(ModelRequest(model=model, messages=[]))).message["provider"] == "mylocal"
    assert "mylocal" in kernel.names() and kernel.registered("mylocal") is None
    user.register("openai", lambda **cfg: OpenAIChatProvider(name="openai", base_url=server.openai_base_url, **cfg))
    assert kernel.resolve("openai:gpt-4.1-mini")[0].base_url == server.openai_base_url
    user.models.set_override("mylocal", "my-model", context_window=5000)
    assert kernel.info("mylocal:my-model").context_window == 5000  # the user's overrides apply too
    kernel.models.learn_window("mylocal", "my-model", 4000)
    assert kernel.info("mylocal:my-model").context_window == 4000 and user.models.learned_window("mylocal",
                                                                                                 "my-model") is None


def test_tools_go_with_tool_choice_auto_and_calls_with_a_string_content(server):
    # llama-cpp-python's function-calling format drops tools without tool_choice, and rejects a
    # null content beside tool calls
    server.enqueue_text("ok")
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "python",
                                                  "arguments": {"code": "1"}}],
                "provider": "openai", "api": "openai-completions", "model": "m", "stopReason": "toolUse"},
               {"role": "toolResult", "toolCallId": "c1", "toolName": "python",
                "content": [{"type": "text", "text": "1"}], "isError": False}]
    collect(server.provider("openai").stream(request(*history, tools=[PYTHON_TOOL])))
    body = server.last_request.body
    assert body["tool_choice"] == "auto"
    assert body["messages"][2]["content"] == "" and body["messages"][2]["tool_calls"]


def test_a_stream_with_tools_that_comes_back_empty_sends_such_requests_whole_from_then_on(server):
    provider = server.provider("openai")
    server.enqueue_raw([])  # a 200 stream with no event: llama-cpp-python when the reply calls a tool
    server.enqueue_tool_call("python", {"code": "1 + 1"})
    first = collect(provider.stream(request(tools=[PYTHON_TOOL])))
    assert first.message["content"][0]["type"] == "toolCall"
    notes = [e for e in first.events if isinstance(e, ProviderNote)]
    assert len(notes) == 1 and "go whole from now on" in notes[0].text
    server.enqueue_text("done")
    again = collect(provider.stream(request(tools=[PYTHON_TOOL])))
    assert server.last_request.body["stream"] is False  # whole at once, no empty stream first
    assert not [e for e in again.events if isinstance(e, ProviderNote)]
    server.enqueue_text("plain")
    collect(provider.stream(request()))
    assert server.last_request.body["stream"] is True  # without tools it streams as before
