"""The OpenAI Responses API provider against the loopback fake server (real HTTP, real SSE): the
request it sends, the events it reads, tool loops, encrypted reasoning carried across turns,
usage and cost, errors and overflow, and the agent loop on top of it."""

from __future__ import annotations

import json

import httpx
import pytest
from genai_prices import Usage, calc_price

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.providers import (
    ContextOverflowError,
    MalformedStreamError,
    ModelRequest,
    OpenAIResponsesProvider,
    ServerError,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    UsageUpdate,
    parse_model_string,
    resolve_provider,
    stream_with_retry,
)
from ipyagent.providers.apis.openai_responses import responses_only, responses_tool_id, to_responses_input
from ipyagent.testing import FakeProviderServer, RawStream, Reply, ToolCallSpec, collect
from ipyagent.testing.specs import sse

PYTHON_TOOL = ToolSpec("python", "Run Python code in the kernel", {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})
USER = {"role": "user", "content": "What is 6 * 7?", "timestamp": 1}


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def request(*messages: dict, model: str = "gpt-5-codex", **kw) -> ModelRequest:
    return ModelRequest(model=model, messages=list(messages) or [USER], system_prompt="You are helpful.", **kw)


def tool_result(call: dict, text: str) -> dict:
    return {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
            "content": [{"type": "text", "text": text}], "isError": False, "timestamp": 2}


def items(body: dict, kind: str) -> list[dict]:
    return [i for i in body["input"] if i.get("type") == kind]


# ---- the request ---------------------------------------------------------------------------------


def test_request_is_stateless_with_encrypted_reasoning_and_a_cache_key(server):
    server.enqueue_text("ok")
    provider = server.provider("responses", api_key="sk-secret-123")
    collect(provider.stream(request(tools=[PYTHON_TOOL], max_tokens=999, reasoning="high",
                                    options={"session_id": "session-42"})))
    sent = server.last_request
    assert sent.path == "/v1/responses" and sent.protocol == "responses"
    assert sent.headers["authorization"] == "REDACTED" and sent.auth_scheme == "Bearer"
    body = sent.body
    assert body["stream"] is True and body["store"] is False and "previous_response_id" not in body
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["instructions"] == "You are helpful."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "What is 6 * 7?"}]}]
    assert body["tools"] == [{"type": "function", "name": "python", "description": PYTHON_TOOL.description,
                              "parameters": PYTHON_TOOL.parameters}]
    assert body["max_output_tokens"] == 999 and body["prompt_cache_key"] == "session-42"
    assert "temperature" not in body


def test_a_model_without_reasoning_gets_no_reasoning_fields(server):
    server.enqueue_text("ok")
    collect(server.provider("responses").stream(request(model="gpt-4.1-mini", temperature=0.2)))
    body = server.last_request.body
    assert "reasoning" not in body and "include" not in body and body["temperature"] == 0.2
    assert "prompt_cache_key" not in body  # no session, no key


# ---- the stream ----------------------------------------------------------------------------------


def test_streamed_text_message_shape_usage_and_cost(server):
    server.enqueue(Reply(text="Forty-two, streamed in small pieces.", thinking="Multiply six by seven.",
                         usage={"input": 1200, "cacheRead": 800, "output": 300, "reasoning": 120}))
    result = collect(server.provider("responses").stream(request()))
    assert len([e for e in result.events if isinstance(e, TextDelta)]) > 3
    assert result.text == "Forty-two, streamed in small pieces." and result.thinking == "Multiply six by seven."
    assert any(isinstance(e, UsageUpdate) for e in result.events)
    msg = result.message
    assert msg["api"] == "openai-responses" and msg["provider"] == "openai-responses"
    assert msg["model"] == "gpt-5-codex" and msg["stopReason"] == "stop"
    assert msg["responseId"].startswith("resp_")
    thinking, text = msg["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "Multiply six by seven."
    assert json.loads(thinking["thinkingSignature"])["encrypted_content"].startswith("gAAAA")
    assert text == {"type": "text", "text": "Forty-two, streamed in small pieces.",
                    "textSignature": text["textSignature"]} and text["textSignature"].startswith("msg_")
    usage = msg["usage"]
    # input_tokens 2000 of which 800 cached; reasoning tokens are inside output and kept apart
    assert (usage["input"], usage["cacheRead"], usage["cacheWrite"], usage["output"]) == (1200, 800, 0, 300)
    assert usage["totalTokens"] == 2300 and usage["reasoning"] == 120
    expected = calc_price(Usage(input_tokens=2000, cache_read_tokens=800, output_tokens=300), "gpt-5-codex",
                          provider_id="openai")
    assert usage["cost"]["total"] == float(expected.total_price) > 0
    assert usage["cost"]["output"] == float(expected.output_price)
    assert usage["cost"]["input"] + usage["cost"]["cacheRead"] == pytest.approx(float(expected.input_price))
    assert 0 < usage["cost"]["cacheRead"] < usage["cost"]["input"]


def test_a_reasoning_summary_in_several_parts_and_one_without_deltas(server):
    base = {"type": "response.created", "response": {"id": "resp_1"}}
    reasoning = {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAenc",
                 "summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}]}
    silent = {"id": "rs_2", "type": "reasoning", "encrypted_content": "gAAAAenc2",
              "summary": [{"type": "summary_text", "text": "Quiet."}]}
    events = [sse(base), sse({"type": "response.output_item.added", "output_index": 0,
                              "item": {"id": "rs_1", "type": "reasoning", "summary": []}})]
    for n, part in enumerate(("First.", "Second.")):
        where = {"item_id": "rs_1", "output_index": 0, "summary_index": n}
        events += [sse({"type": "response.reasoning_summary_part.added", **where}),
                   sse({"type": "response.reasoning_summary_text.delta", **where, "delta": part})]
    events += [sse({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
               sse({"type": "response.output_item.added", "output_index": 1,
                    "item": {"id": "rs_2", "type": "reasoning", "summary": []}}),
               sse({"type": "response.output_item.done", "output_index": 1, "item": silent}),
               sse({"type": "response.output_text.delta", "output_index": 2, "item_id": "msg_1", "delta": "Done."}),
               sse({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
                                                                "usage": {"input_tokens": 5, "output_tokens": 3}}})]
    server.enqueue(RawStream(events))
    result = collect(server.provider("responses").stream(request()))
    first, second, text = result.message["content"]
    assert first["thinking"] == "First.\n\nSecond." and second["thinking"] == "Quiet."
    assert json.loads(second["thinkingSignature"])["id"] == "rs_2"
    assert text == {"type": "text", "text": "Done."}  # a text delta whose item was never announced


def test_tool_call_events_and_the_call_id_item_id_pair(server):
    server.enqueue(Reply(tool_calls=[ToolCallSpec("python", {"code": "6 * 7"}, id="call_abc")], chunk_size=4))
    result = collect(server.provider("responses").stream(request(tools=[PYTHON_TOOL])))
    starts = [e for e in result.events if isinstance(e, ToolCallStart)]
    assert len(starts) == 1 and starts[0].id.startswith("call_abc|fc_")
    assert "".join(e.arguments_delta for e in result.events if isinstance(e, ToolCallDelta)) == '{"code": "6 * 7"}'
    (call,) = result.tool_calls
    assert call.id == starts[0].id and call.arguments == {"code": "6 * 7"}
    assert result.message["stopReason"] == "toolUse"


def test_parallel_calls_go_back_with_their_outputs(server):
    server.enqueue_tool_calls([("python", {"code": "1"}), ("read", {"path": "a.txt"})])
    server.enqueue_text("both done")
    provider = server.provider("responses")
    first = collect(provider.stream(request(tools=[PYTHON_TOOL]))).message
    calls = [b for b in first["content"] if b["type"] == "toolCall"]
    assert [c["name"] for c in calls] == ["python", "read"]
    history = [USER, first, tool_result(calls[0], "1"), tool_result(calls[1], "alpha")]
    assert collect(provider.stream(request(*history, tools=[PYTHON_TOOL]))).text == "both done"
    body = server.last_request.body
    sent_calls, outputs = items(body, "function_call"), items(body, "function_call_output")
    assert [c["call_id"] for c in sent_calls] == [c["id"].split("|")[0] for c in calls]
    assert [c["id"] for c in sent_calls] == [c["id"].split("|")[1] for c in calls]
    assert [(o["call_id"], o["output"]) for o in outputs] == [(sent_calls[0]["call_id"], "1"),
                                                               (sent_calls[1]["call_id"], "alpha")]
    assert json.loads(sent_calls[1]["arguments"]) == {"path": "a.txt"}


def test_reasoning_round_trip_in_a_tool_loop(server):
    server.enqueue(Reply(thinking="I need the product.", tool_calls=[ToolCallSpec("python", {"code": "6 * 7"})]))
    server.enqueue(Reply(thinking="It printed 42.", text="The answer is 42."))
    server.enqueue_text("Still 42.")
    provider = server.provider("responses")
    first = collect(provider.stream(request(tools=[PYTHON_TOOL]))).message
    reasoning = json.loads(first["content"][0]["thinkingSignature"])
    call = first["content"][1]
    history = [USER, first, tool_result(call, "42")]
    second = collect(provider.stream(request(*history, tools=[PYTHON_TOOL]))).message
    body = server.last_request.body
    # the encrypted reasoning item went back, before the call it led to, paired with it by ids
    kinds = [i.get("type") or i["role"] for i in body["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    sent = items(body, "reasoning")[0]
    assert sent == {k: reasoning[k] for k in ("id", "type", "summary", "encrypted_content")}
    assert items(body, "function_call")[0]["id"] == call["id"].split("|")[1]
    # next turn: both replies' reasoning items, each before its own output
    history += [second, {"role": "user", "content": "Sure?", "timestamp": 3}]
    collect(provider.stream(request(*history, tools=[PYTHON_TOOL])))
    body = server.last_request.body
    kinds = [i.get("type") or i["role"] for i in body["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output", "reasoning", "message", "user"]
    assert [i["encrypted_content"] for i in items(body, "reasoning")] == [
        json.loads(m["content"][0]["thinkingSignature"])["encrypted_content"] for m in (first, second)]
    assert items(body, "message")[0]["id"] == second["content"][1]["textSignature"]


def test_switching_model_or_provider_drops_the_encrypted_reasoning(server):
    server.enqueue(Reply(thinking="Secret chain of thought.", tool_calls=[ToolCallSpec("python", {"code": "1"})]))
    first = collect(server.provider("responses").stream(request(tools=[PYTHON_TOOL]))).message
    history = [USER, first, tool_result(first["content"][1], "1")]
    encrypted = json.loads(first["content"][0]["thinkingSignature"])["encrypted_content"]
    # another model on the same API: the thinking becomes plain text, no item ids are sent
    server.enqueue_text("other model")
    collect(server.provider("responses").stream(request(*history, model="gpt-5-mini", tools=[PYTHON_TOOL])))
    body = server.last_request.body
    assert encrypted not in json.dumps(body) and not items(body, "reasoning")
    # as an earlier reply without OpenAI's message id: the assistant's input message
    assert [i for i in body["input"] if i.get("role") == "assistant"] == [
        {"role": "assistant", "content": "Secret chain of thought."}]
    assert "id" not in items(body, "function_call")[0]
    assert items(body, "function_call")[0]["call_id"] == items(body, "function_call_output")[0]["call_id"]
    # Chat Completions and Anthropic: the call|item id is adapted, the encrypted item never sent
    for protocol in ("openai", "anthropic"):
        server.enqueue_text("switched")
        collect(server.provider(protocol).stream(request(*history, model="other", tools=[PYTHON_TOOL])))
        wire = json.dumps(server.last_request.body)
        assert encrypted not in wire and "Secret chain of thought." in wire and "|" not in wire


def test_ids_from_other_providers_become_valid_call_ids():
    assert responses_tool_id("call_1|fc_2") == "call_1|fc_2"
    assert responses_tool_id("toolu_01A.b/c") == "toolu_01A_b_c"
    assert responses_tool_id("x" * 100) == "x" * 64
    assert responses_tool_id("call_9|not-an-item") == "call_9"
    history = [USER, {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic", "model": "claude",
                      "stopReason": "toolUse", "content": [{"type": "toolCall", "id": "toolu.1", "name": "python",
                                                            "arguments": {"code": "1"}}]},
               {"role": "toolResult", "toolCallId": "toolu.1", "toolName": "python",
                "content": [{"type": "text", "text": "1"},
                            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}], "isError": False}]
    wire = to_responses_input(request(*history), "openai-responses", "openai-responses")
    assert wire[1] == {"type": "function_call", "call_id": "toolu_1", "name": "python", "arguments": '{"code": "1"}'}
    assert wire[2]["call_id"] == "toolu_1" and wire[2]["output"] == [
        {"type": "input_text", "text": "1"},
        {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="}]


def test_incomplete_reply_is_length_and_content_filter_is_an_error(server):
    server.enqueue(Reply(text="cut here", stop_reason="length"))
    server.enqueue(Reply(text="blocked", stop_reason="content_filter"))
    provider = server.provider("responses")
    assert collect(provider.stream(request())).message["stopReason"] == "length"
    filtered = collect(provider.stream(request())).message
    assert filtered["stopReason"] == "error" and "content filter" in filtered["errorMessage"]


# ---- errors and overflow -------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["responses", "responses_failed"])
def test_overflow_http_400_and_in_stream_failure(server, style):
    server.enqueue_overflow(style)
    with pytest.raises(ContextOverflowError, match="exceeds the context window"):
        collect(stream_with_retry(server.provider("responses"), request(), sleep=lambda s: None))
    assert server.chat_calls == 1  # an overflow is never retried as it is


def test_window_enforced_by_the_server_is_an_overflow():
    with FakeProviderServer(context_window=50, overflow_style="responses_failed") as server:
        with pytest.raises(ContextOverflowError):
            collect(server.provider("responses").stream(request({"role": "user", "content": "word " * 400})))
        assert server.last_request.outcome == "overflow"


def test_error_events_are_retried_and_a_cut_stream_too(server):
    server.enqueue_stream_error()
    server.enqueue_cut(clean=True)
    server.enqueue_text("third time lucky")
    result = collect(stream_with_retry(server.provider("responses"), request(), sleep=lambda s: None))
    assert result.text == "third time lucky" and len(result.retries) == 2
    assert "server_error" in result.retries[0].reason and "no response.completed" in result.retries[1].reason


def test_rate_limit_failure_and_malformed_data(server):
    provider = server.provider("responses")
    server.enqueue(RawStream([sse({"type": "response.failed", "response": {
        "error": {"code": "rate_limit_exceeded", "message": "slow down"}}})]))
    with pytest.raises(Exception) as info:
        collect(provider.stream(request()))
    assert type(info.value).__name__ == "RateLimitError" and "slow down" in str(info.value)
    server.enqueue(RawStream([sse({"type": "error", "code": "invalid_prompt", "message": "bad prompt"})]))
    with pytest.raises(Exception) as info:
        collect(stream_with_retry(provider, request(), sleep=lambda s: None))
    assert type(info.value).__name__ == "BadRequestError" and server.chat_calls == 2  # not retried
    server.enqueue_malformed()
    with pytest.raises(MalformedStreamError):
        collect(provider.stream(request()))
    server.enqueue_error(500)
    server.enqueue_text("recovered")
    assert collect(stream_with_retry(provider, request(), sleep=lambda s: None)).text == "recovered"
    assert isinstance(ServerError("x"), Exception)


def test_plain_httpx_client_reads_the_responses_stream(server):
    server.enqueue(Reply(text="hi", thinking="hmm", tool_calls=[ToolCallSpec("python", {"code": "1"})]))
    with httpx.stream("POST", f"{server.openai_base_url}/responses", json={"model": "m", "input": "hello"}) as r:
        events = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    assert events[:2] == ["response.created", "response.in_progress"] and events[-1] == "response.completed"
    for kind in ("response.output_item.added", "response.output_text.delta", "response.reasoning_summary_text.delta",
                 "response.function_call_arguments.delta", "response.function_call_arguments.done",
                 "response.output_item.done"):
        assert kind in events


# ---- which models go here ------------------------------------------------------------------------


def test_models_only_the_responses_api_serves_resolve_to_it():
    for model in ("gpt-5-codex", "openai:gpt-5.1-codex-max", "codex-mini-latest", "openai:o3-pro", "gpt-5-pro"):
        assert parse_model_string(model)[0] == "openai-responses", model
    for model in ("gpt-4.1", "openai:gpt-5", "gemini-2.5-pro", "ollama:codex", "anthropic:claude-sonnet-4-5"):
        assert parse_model_string(model)[0] != "openai-responses", model
    assert parse_model_string("openai-responses:gpt-4.1") == ("openai-responses", "gpt-4.1")
    assert responses_only("openrouter/openai/gpt-5-codex") and not responses_only("o3-mini")
    # without options of its own it takes the openai ones: same key, same base URL
    provider, model = resolve_provider("openai:gpt-5-codex", {"openai": {"api_key": "sk-x", "base_url": "http://h/v1"}})
    assert isinstance(provider, OpenAIResponsesProvider) and model == "gpt-5-codex"
    assert provider.base_url == "http://h/v1" and provider.api_key() == "sk-x"


# ---- the agent loop on the Responses API ---------------------------------------------------------


def responses_agent(server: FakeProviderServer, **config) -> AgentLoop:
    cfg = RunConfig(model="openai:gpt-5-codex", tool_approval="auto",
                    provider_options={"openai": {"base_url": server.openai_base_url, "api_key": "sk-test"}},
                    **config)
    return AgentLoop(Session(hooks=HookRegistry()), config=cfg, namespace={}, sleep=lambda s: None)


def test_agent_tool_loop_with_reasoning_carried_between_calls(server):
    agent = responses_agent(server)
    server.enqueue(Reply(thinking="Compute it in Python.", tool_calls=[ToolCallSpec("python", {"code": "y = 6 * 7\ny"})]))
    server.enqueue(Reply(thinking="The tool said 42.", text="It is 42."))
    result = agent.prompt("What is 6 * 7?")
    assert result.error is None and result.text == "It is 42."
    assert agent.tool_context.namespace["y"] == 42
    assert [r.path for r in server.requests] == ["/v1/responses", "/v1/responses"]
    second = server.requests[1].body
    assert [i.get("type") or i["role"] for i in second["input"]] == [
        "user", "reasoning", "function_call", "function_call_output"]
    assert "42" in items(second, "function_call_output")[0]["output"]
    session_id = agent.session.header["id"]
    assert {r.body["prompt_cache_key"] for r in server.requests} == {session_id}
    assert server.requests[1].cached_tokens > 0  # the growing prompt kept its prefix
    replies = [e["message"] for e in agent.session.path() if e["message"]["role"] == "assistant"]
    assert all(m["provider"] == "openai-responses" and m["usage"]["cost"]["total"] > 0 for m in replies)
    assert agent.session.costs().total == pytest.approx(sum(m["usage"]["cost"]["total"] for m in replies))


def test_agent_overflow_compacts_with_the_responses_summariser_and_retries(server):
    agent = responses_agent(server, compaction=CompactionSettings(200, 100))
    for i in range(4):
        server.enqueue_text(f"answer {i} " + "lorem " * 80)
        agent.prompt(f"question {i} " + "ipsum " * 80)
    server.enqueue_overflow("responses_failed")
    server.enqueue_text("after recovery")
    seen = []
    agent.subscribe(seen.append)
    result = agent.prompt("one more")
    assert result.error is None and result.text == "after recovery"
    assert any(isinstance(e, ev.CompactionEnd) and e.reason == "overflow" and e.will_retry for e in seen)
    (compaction,) = agent.session.compactions()
    summaries = [r for r in server.requests if r.kind == "summary"]
    assert summaries and all(r.path == "/v1/responses" for r in summaries)
    assert "summarization assistant" in summaries[0].body["instructions"].lower()
    # the summariser's calls are priced and recorded on the compaction entry
    assert compaction["usage"]["cost"]["total"] > 0 and "costUnknown" not in compaction["usage"]
    costs = agent.session.costs()
    assert costs.summaries == pytest.approx(compaction["usage"]["cost"]["total"])
    assert costs.total > costs.summaries
    retried = server.requests[-1].body["input"]
    assert "compacted into the following summary" in json.dumps(retried[0])
