"""The fake provider server itself: real HTTP with plain httpx, scripting, recording, windows, cache."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest

from ipyagent.providers import ContextOverflowError, ModelRequest, stream_with_retry
from ipyagent.testing import DEFAULT_SUMMARY, FakeProviderServer, Fault, Reply, collect


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def sse_data(response: httpx.Response) -> list[str]:
    return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]


def test_the_module_docstring_example_runs():
    import ipyagent.testing.fake_server as module

    doc = module.__doc__
    example = doc[doc.index("::\n") + 3:doc.index("Or point any client")]
    exec(textwrap.dedent(example), {})


def test_plain_httpx_client_gets_real_openai_sse(server):
    server.enqueue_text("hi there")
    with httpx.stream("POST", f"{server.openai_base_url}/chat/completions",
                      json={"model": "x", "messages": [{"role": "user", "content": "q"}], "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        data = sse_data(r)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    text = "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices"))
    assert text == "hi there"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1


def test_plain_httpx_client_gets_real_anthropic_sse(server):
    server.enqueue_text("hello")
    with httpx.stream("POST", f"{server.anthropic_base_url}/v1/messages",
                      json={"model": "c", "max_tokens": 10, "messages": [{"role": "user", "content": "q"}]}) as r:
        lines = list(r.iter_lines())
    events = [line[7:] for line in lines if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-1] == "message_stop" and "ping" in events
    assert events.count("content_block_delta") >= 1


def test_records_requests_with_secrets_redacted(server):
    server.enqueue_text("a")
    server.enqueue_text("b")
    collect(server.provider("openai", api_key="sk-very-secret").stream(
        ModelRequest(model="m1", messages=[{"role": "user", "content": "one"}])))
    collect(server.provider("anthropic", api_key="sk-ant-very-secret").stream(
        ModelRequest(model="m2", messages=[{"role": "user", "content": "two"}])))
    first, second = server.requests
    assert (first.path, first.protocol, first.kind, first.body["model"]) == ("/v1/chat/completions", "openai",
                                                                            "chat", "m1")
    assert first.headers["authorization"] == "REDACTED" and second.headers["x-api-key"] == "REDACTED"
    assert "very-secret" not in repr(server.requests)
    assert second.body["messages"][0]["content"][0]["text"] == "two"
    assert first.prompt_tokens > 0 and server.chat_calls == 2 and server.summary_calls == 0


def test_summariser_calls_are_served_and_counted(server):
    provider = server.provider("openai")
    server.enqueue_summary("## Goal\nScripted summary")
    summary_request = ModelRequest(
        model="cheap", system_prompt="You are a context summarization assistant.",
        messages=[{"role": "user", "content": "<conversation>\n[User]: hi\n</conversation>\nSummarise."}])
    assert collect(provider.stream(summary_request)).text == "## Goal\nScripted summary"
    # no scripted summary left: a stock one, still counted
    assert collect(provider.stream(summary_request)).text == DEFAULT_SUMMARY.format(n=2)
    server.enqueue_text("normal chat reply")
    assert collect(provider.stream(ModelRequest(model="m", messages=[{"role": "user", "content": "hey"}]))).text \
        == "normal chat reply"
    assert server.summary_calls == 2 and server.chat_calls == 1


def test_summary_queue_accepts_faults(server):
    too_long = {"error": {"message": "prompt is too long: 9 tokens > 5 maximum"}}
    server.enqueue_summary(Fault("status", status=400, body=too_long))
    with pytest.raises(ContextOverflowError):
        collect(server.provider("openai").stream(ModelRequest(
            model="m", messages=[{"role": "user", "content": "<conversation>x</conversation>"}])))
    assert server.summary_calls == 1


def test_policy_function_sees_the_request(server):
    seen = []

    def policy(body):
        seen.append(body)
        last = body["messages"][-1]["content"]
        return f"echo: {last}" if isinstance(last, str) else Reply(text="blocks")

    server.policy = policy
    provider = server.provider("openai")
    for word in ("alpha", "beta"):
        assert collect(provider.stream(ModelRequest(model="m", messages=[{"role": "user", "content": word}]))).text \
            == f"echo: {word}"
    assert [b["messages"][-1]["content"] for b in seen] == ["alpha", "beta"]


def test_queue_wins_over_policy(server):
    server.policy = lambda body: "from policy"
    server.enqueue_text("from queue")
    provider = server.provider("openai")
    req = ModelRequest(model="m", messages=[{"role": "user", "content": "q"}])
    assert [collect(provider.stream(req)).text for _ in range(2)] == ["from queue", "from policy"]


def test_context_window_is_enforced_per_request(server):
    server.context_window = 100
    provider = server.provider("anthropic")
    server.enqueue_text("fits")
    small = ModelRequest(model="m", messages=[{"role": "user", "content": "short"}])
    big = ModelRequest(model="m", messages=[{"role": "user", "content": "long " * 200}])
    with pytest.raises(ContextOverflowError) as info:
        collect(provider.stream(big))
    assert "prompt is too long" in str(info.value) and info.value.context_window == 100
    assert collect(provider.stream(small)).text == "fits"  # the queued reply was kept for it
    assert [r.outcome for r in server.requests] == ["overflow", "reply"]


def test_usage_estimate_and_cached_prefix(server):
    provider = server.provider("openai")
    base = [{"role": "user", "content": "x" * 4000}]
    server.enqueue_text("one")
    server.enqueue_text("two")
    first = collect(provider.stream(ModelRequest(model="m", messages=base))).message["usage"]
    second = collect(provider.stream(ModelRequest(model="m", messages=base + [
        {"role": "assistant", "content": [{"type": "text", "text": "one"}], "stopReason": "stop"},
        {"role": "user", "content": "more"}]))).message["usage"]
    assert first["input"] == server.requests[0].prompt_tokens and first["cacheRead"] == 0
    assert 1000 <= first["input"] <= 1100  # ceil(chars / 4) of the serialised prompt
    reuse = second["cacheRead"] / (second["input"] + second["cacheRead"])
    assert reuse > 0.9 and server.requests[1].cached_tokens == second["cacheRead"]


def test_cache_min_tokens_and_disabled_cache():
    with FakeProviderServer(cache_min_tokens=10_000) as fake:
        provider = fake.provider("openai")
        req = ModelRequest(model="m", messages=[{"role": "user", "content": "y" * 400}])
        fake.enqueue_text("a")
        fake.enqueue_text("b")
        collect(provider.stream(req))
        assert collect(provider.stream(req)).message["usage"]["cacheRead"] == 0


def test_api_key_enforced_when_configured():
    with FakeProviderServer(api_key="right") as fake:
        fake.enqueue_text("welcome")
        ok = collect(fake.provider("openai").stream(ModelRequest(model="m", messages=[])))
        assert ok.text == "welcome"
        r = httpx.post(f"{fake.openai_base_url}/chat/completions", json={"model": "m", "messages": []},
                       headers={"authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_count_tokens_endpoint_and_unknown_route(server):
    body = {"model": "c", "messages": [{"role": "user", "content": "z" * 400}]}
    r = httpx.post(f"{server.url}/v1/messages/count_tokens", json=body)
    assert r.status_code == 200 and r.json()["input_tokens"] == server.requests[-1].prompt_tokens
    assert httpx.post(f"{server.url}/v2/nothing", json={}).status_code == 404


def test_fault_injection_shapes(server):
    server.enqueue_rate_limit(7)
    server.enqueue_error(503)
    server.enqueue_malformed()
    url = f"{server.openai_base_url}/chat/completions"
    req = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    r = httpx.post(url, json=req)
    assert r.status_code == 429 and r.headers["retry-after"] == "7"
    assert httpx.post(url, json=req).status_code == 503
    with httpx.stream("POST", url, json=req) as r:
        data = sse_data(r)
    assert data[-1].startswith('{"choices": [{"delta": {"content": "broken') and len(data) == 3


def test_tool_calls_and_several_in_one_reply_through_retry(server):
    server.enqueue_tool_calls([("read", {"path": "x"}), ("ls", {"path": "."})], text="Two calls.")
    result = collect(stream_with_retry(server.provider("anthropic"), ModelRequest(model="m", messages=[])))
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("read", {"path": "x"}), ("ls", {"path": "."})]
    assert result.text == "Two calls." and result.message["stopReason"] == "toolUse"


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "responses"])
def test_every_wire_api_sends_extra_body_fields_over_its_own(server, protocol):
    server.enqueue_text("ok")
    request = ModelRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}], max_tokens=64,
                           options={"extra_body": {"max_tokens": 7, "top_k": 3}})
    assert collect(server.provider(protocol).stream(request)).text == "ok"
    body = server.last_request.body
    assert (body["model"], body["max_tokens"], body["top_k"]) == ("fake-model", 7, 3)
