"""Real traffic: responses recorded from the real APIs and servers (public projects' cassettes,
``tests/providers/recordings``, listed with their sources in its SOURCES file), served byte for
byte on loopback to the providers. What each provider reads is compared with an independent
reading of the same bytes (``tests/support/wire_reading.py``), and the request it builds next is
checked against the API's own request types (the official SDKs' TypedDicts, validated with
pydantic) and the API's rules."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from pydantic import TypeAdapter

from ipyagent.providers import (
    AnthropicProvider,
    MessageDone,
    ModelRequest,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    ProviderNote,
    ToolSpec,
)
from ipyagent.providers.errors import (
    AuthenticationError,
    BadRequestError,
    ModelNotFoundError,
    ProviderError,
    RateLimitError,
)
from ipyagent.providers.overflow import is_silent_overflow
from ipyagent.session.tokens import is_valid_usage_message, normalize_usage
from support.replay_server import Recording, ReplayServer, all_recordings, recording
from support.wire_reading import Reading, continued, read

RECORDINGS = all_recordings()
PROVIDERS = {"anthropic-messages": AnthropicProvider, "openai-completions": OpenAIChatProvider,
             "openai-responses": OpenAIResponsesProvider}
TOOL = ToolSpec("lookup", "Look something up", {"type": "object", "properties": {}})
# Pi's stop reason for each word the servers wrote in these recordings (read from the API docs)
PI_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "toolUse",
           "stop": "stop", "length": "length", "tool_calls": "toolUse", "completed": "stop",
           "incomplete:max_output_tokens": "length"}
# each failed recording's status (None: an error inside a 200 stream) -> the error it must raise
ERRORS = {401: AuthenticationError, 404: ModelNotFoundError, 429: RateLimitError, 400: BadRequestError}
# a reply Anthropic paused (pause_turn) -> the recorded continuation the provider's next request gets
CONTINUED_BY = {"anthropic_pause_turn_stream": "anthropic_pause_turn_continued_stream"}
# recordings that fail this test, with why (listed, never skipped in silence)
KNOWN_FAILURES: dict[str, str] = {}  # none fail now


def replay(rec: Recording, *messages: dict[str, Any], queue: Iterable[Recording] = ()) -> tuple[
        dict[str, Any] | ProviderError, list[Any], ReplayServer]:
    """Serve ``rec`` (then ``queue``) to the provider of its API; (the message or the error, the
    events, the server with the requests it received)."""
    with ReplayServer().queue(rec, *queue) as server:
        options: dict[str, Any] = {"api_key": "sk-test", "base_url": server.url, "name": rec.provider}
        if rec.api == "openai-completions":
            options["stream"] = rec.streamed or rec.status >= 400
        provider = PROVIDERS[rec.api](**options)
        body = rec.request.get("body")
        model = body.get("model", "m") if isinstance(body, dict) else "m"
        request = ModelRequest(model=model, messages=list(messages) or [{"role": "user", "content": "hi"}],
                               tools=[TOOL])
        events: list[Any] = []
        try:
            for event in provider.stream(request):
                events.append(event)
        except ProviderError as exc:
            return exc, events, server
        done = [e.message for e in events if isinstance(e, MessageDone)]
        assert len(done) == 1
        return done[0], events, server


def next_request(rec: Recording, message: dict[str, Any]) -> dict[str, Any]:
    """The body the provider sends after ``message`` (each tool call answered "ok")."""
    results = [{"role": "toolResult", "toolCallId": b["id"], "toolName": b["name"],
                "content": [{"type": "text", "text": "ok"}], "isError": False}
               for b in message["content"] if b["type"] == "toolCall"]
    follow = [] if results else [{"role": "user", "content": "and then?"}]
    provider = PROVIDERS[rec.api](api_key="sk-test", base_url="http://127.0.0.1:9", name=rec.provider)
    request = ModelRequest(model=message["model"], messages=[{"role": "user", "content": "hi"}, message, *results,
                                                                 *follow], tools=[TOOL])
    return provider.payload(request)


def validated(adapter: TypeAdapter[Any], value: Any) -> None:
    """Validate, walking the lazy iterables pydantic returns for TypedDict lists."""
    def walk(item: Any) -> None:
        if isinstance(item, dict):
            for v in item.values():
                walk(v)
        elif isinstance(item, (str, bytes, int, float, bool)) or item is None:
            return
        elif isinstance(item, Iterable):
            for v in item:
                walk(v)
    walk(adapter.validate_python(value))


def check_next_request(rec: Recording, message: dict[str, Any], reading: Reading) -> dict[str, Any]:
    body = next_request(rec, message)
    if rec.api == "openai-completions":
        from openai.types.chat import ChatCompletionMessageParam
        validated(TypeAdapter(list[ChatCompletionMessageParam]), body["messages"])
        asked = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        assert asked == answered and all(asked)  # Gemini sends calls with an empty id: each gets one
    elif rec.api == "openai-responses":
        from openai.types.responses import ResponseInputParam
        said = [p if isinstance(p, str) else p["text"] for i in body["input"] if i.get("role") == "assistant"
                for p in ([i["content"]] if isinstance(i["content"], str) else i["content"])]
        assert not any(t and t in said for t in reading.thinking), "reasoning sent back as text the model said"
        validated(TypeAdapter(ResponseInputParam), body["input"])
        # reasoning goes back only holding itself: encrypted (OpenAI) or as reasoning_text (DeepSeek)
        assert all(i.get("encrypted_content") or i.get("content") for i in body["input"] if i.get("type") == "reasoning")
    else:
        from anthropic.types import MessageParam
        from anthropic.types.beta import BetaMessageParam
        # the blocks of beta features (compaction, the advisor tool) exist in the beta API's types only
        validated(TypeAdapter(list[BetaMessageParam] if reading.unknown else list[MessageParam]), body["messages"])
        roles = [m["role"] for m in body["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles)), roles
    return body


@pytest.mark.parametrize("rec", [pytest.param(r, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[r.name], strict=True))
                                 if r.name in KNOWN_FAILURES else r for r in RECORDINGS],
                         ids=[r.name for r in RECORDINGS])
def test_recording_is_read_as_the_bytes_say(rec: Recording) -> None:
    host = str(rec.request.get("url", ""))
    assert host.startswith("https://") and "localhost" not in host and "127.0.0.1" not in host  # from the real host
    reading = read(rec)
    queue = [recording(CONTINUED_BY[rec.name])] if rec.name in CONTINUED_BY else []
    if queue:
        reading = continued([reading, *map(read, queue)])
    result, events, _ = replay(rec, queue=queue)
    if reading.error is not None:
        assert isinstance(result, ProviderError), f"{rec.name}: the server's error was not raised"
        expected = ERRORS.get(reading.error["status"]) if reading.error["status"] else None
        if reading.error.get("code") in ("model_not_found",):
            expected = ModelNotFoundError
        if expected is not None:
            assert isinstance(result, expected), (rec.name, result)
        retry = reading.error["status"] == 429 or reading.error.get("type") in ("overloaded_error", "api_error")
        assert result.retryable == retry, (rec.name, result)
        return
    assert isinstance(result, dict), f"{rec.name}: {result}"
    message = result
    content = message["content"]
    assert "".join(b["text"] for b in content if b["type"] == "text") == reading.text + reading.refusal
    thinking = [b.get("thinking", "") for b in content if b["type"] == "thinking" and not b.get("redacted")]
    assert [t for t in thinking if t] == [t for t in reading.thinking if t]
    assert sum(bool(b.get("redacted")) for b in content if b["type"] == "thinking") == reading.redacted
    if rec.api == "anthropic-messages":
        assert [b.get("thinkingSignature") for b in content if b["type"] == "thinking" and not b.get("redacted")] \
            == reading.signatures
    assert [(b["name"], b["arguments"]) for b in content if b["type"] == "toolCall"] == reading.calls
    for key, value in reading.usage.items():
        assert message["usage"][key] == value, (key, message["usage"])
    stop = PI_STOP[reading.stop or "stop"]
    if stop == "stop" and reading.calls:
        # the Responses API has no stop reason for tool calls: a "completed" reply whose output
        # holds function_call items asks for them (Ollama's Chat endpoint says "stop" the same way)
        stop = "toolUse"
    assert message["stopReason"] == stop
    if reading.server_blocks or reading.unknown:
        kept = [b.get("type") for b in message.get("providerContent") or []]
        assert all(kind in kept for kind in reading.server_blocks + reading.unknown), kept
    notes = [e.text for e in events if isinstance(e, ProviderNote) and " unknown " in e.text]
    assert len(notes) == len(set(notes)) == len(set(reading.unknown))  # each unknown thing said once
    check_next_request(rec, message, reading)


def test_corpus_has_forty_recordings_from_six_providers() -> None:
    providers = {r.provider for r in RECORDINGS}
    assert len(RECORDINGS) >= 40 and len(providers) >= 6, (len(RECORDINGS), providers)


# ---- the five fixes, each on a real recording ----------------------------------------------------

def test_deepseek_reasoning_goes_back_with_the_tool_call() -> None:
    """Item 1: DeepSeek answers 400 to a tool loop whose assistant turn lost its reasoning_content;
    the next request of the recording (what DeepSeek accepted) carries it."""
    rec = recording("deepseek_tool_call_thinking")
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    body = check_next_request(rec, message, read(rec))
    sent = next(m for m in body["messages"] if m["role"] == "assistant")
    accepted = next(m for m in recording("deepseek_parallel_calls_thinking").request["body"]["messages"]
                    if m["role"] == "assistant")
    assert sent["reasoning_content"] == accepted["reasoning_content"] == read(rec).thinking[0]
    assert sent["tool_calls"][0]["id"] == accepted["tool_calls"][0]["id"]


def test_openrouter_reasoning_goes_back_in_its_own_field() -> None:
    rec = recording("openrouter_reasoning_stream")
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    sent = next(m for m in check_next_request(rec, message, read(rec))["messages"] if m["role"] == "assistant")
    assert sent["reasoning"] == read(rec).thinking[0]
    assert "".join(d.get("text", "") for d in sent["reasoning_details"]) == read(rec).thinking[0]


def test_an_in_stream_quota_error_is_not_retried() -> None:
    """Item 2: the Responses API's in-stream insufficient_quota was retried three times."""
    error, _, _ = replay(recording("responses_insufficient_quota"))
    assert isinstance(error, RateLimitError) and not error.retryable
    assert "quota" in str(error)


def test_a_reply_cut_at_openrouters_token_limit_is_kept_as_length() -> None:
    """Item 2: OpenRouter's {"code": 400, "message": "Token limit reached"} after finish_reason
    "length" threw the reply away (retried as a ServerError)."""
    message, events, _ = replay(recording("openrouter_stream_error"))
    assert isinstance(message, dict) and message["stopReason"] == "length"
    assert [b["thinking"] for b in message["content"] if b["type"] == "thinking"] == read(
        recording("openrouter_stream_error")).thinking
    assert any("Token limit reached" in e.text for e in events if isinstance(e, ProviderNote))


@pytest.mark.parametrize("name", ["openai_refusal_stream", "openai_refusal_whole_gzip"])
def test_chat_refusals_are_the_reply(name: str) -> None:
    """Item 3: delta.refusal (streamed) and message.refusal (whole) were dropped."""
    rec = recording(name)
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    refusal = read(rec).refusal
    assert refusal and message["content"] == [{"type": "text", "text": refusal}]


def test_anthropic_server_tool_blocks_go_back_unchanged_and_usage_is_not_overflow() -> None:
    """Item 4: server-tool blocks were dropped, and the usage Anthropic adds up over its own search
    iterations (10,423 input tokens for a 2,039-token prompt here) read as a silent overflow."""
    rec = recording("anthropic_web_search_stream")
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    kinds = [b["type"] for b in message["providerContent"]]
    assert kinds.count("server_tool_use") == 1 and kinds.count("web_search_tool_result") == 1
    body = check_next_request(rec, message, read(rec))
    sent = next(m for m in body["messages"] if m["role"] == "assistant")["content"]
    assert sent == message["providerContent"]
    window = 8000  # larger than the prompt (2,039 tokens), smaller than the summed usage
    assert message["usage"]["input"] > window and not is_silent_overflow(message, window)
    stored = {**message, "usage": normalize_usage(message["usage"])}
    assert not is_valid_usage_message(stored)  # the context is estimated, not taken from that sum


def _block_key(block: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies an Anthropic block sent back: its kind, ids, text, signature, input, and the
    encrypted content of each search result (ignoring the fields an SDK may add or leave out)."""
    results = block.get("content") if isinstance(block.get("content"), list) else []
    return (*(block.get(k) for k in ("type", "id", "tool_use_id", "name", "input", "text", "thinking", "signature")),
            [r.get("encrypted_content") for r in results])


def test_a_paused_turn_is_continued_as_anthropic_accepted_it() -> None:
    """Item 4: pause_turn was taken for the end of the turn. Anthropic paused this reply after
    eleven searches (the last one still pending); the provider sends it back unchanged as the last
    assistant turn, as pydantic-ai did in the recorded continuation Anthropic answered, and the two
    parts come back as one message whose summed usage (887,029 input tokens) is no overflow."""
    paused, more = recording("anthropic_pause_turn_stream"), recording("anthropic_pause_turn_continued_stream")
    message, _, server = replay(paused, queue=[more])
    assert isinstance(message, dict) and len(server.requests) == 2
    first, second = server.requests
    sent, accepted = second["messages"][-1], more.request["body"]["messages"][-1]
    assert second["messages"][:-1] == first["messages"] and sent["role"] == accepted["role"] == "assistant"
    assert [_block_key(b) for b in sent["content"]] == [_block_key(b) for b in accepted["content"]]
    assert sent["content"][-1]["type"] == "server_tool_use"  # the pending search goes back too
    assert message["stopReason"] == "stop"
    assert "".join(b["text"] for b in message["content"] if b["type"] == "text") == read(paused).text + read(more).text
    assert message["usage"]["input"] == 404_500 + 482_529
    assert not is_silent_overflow(message, 200_000)
    assert not is_valid_usage_message({**message, "usage": normalize_usage(message["usage"])})


def test_deepseek_responses_reasoning_goes_back_as_deepseek_accepted_it() -> None:
    """DeepSeek's Responses API writes its reasoning as reasoning_text content with no encrypted
    content; it went nowhere. The next request carries the item as the recorded follow-up that
    DeepSeek answered did."""
    rec, answer = recording("deepseek_responses_tool_stream"), recording("deepseek_responses_tool_answer_stream")
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    body = check_next_request(rec, message, read(rec))
    accepted = answer.request["body"]["input"]
    sent = [i for i in body["input"] if i.get("type") in ("reasoning", "function_call", "function_call_output")]
    expected = [{k: v for k, v in i.items() if v is not None} for i in accepted if i.get("type")]
    assert [{k: v for k, v in i.items() if k != "output"} for i in sent] == [
        {k: v for k, v in i.items() if k != "output"} for i in expected]


def test_responses_reasoning_without_encrypted_content_is_never_said_text() -> None:
    """Item 5: a reasoning item without encrypted_content went back as an assistant output_text."""
    rec = recording("responses_reasoning_summary_unencrypted")
    message, _, _ = replay(rec)
    assert isinstance(message, dict)
    assert read(rec).thinking[0] and not read(rec).signatures[0]
    body = check_next_request(rec, message, read(rec))
    assert not any(i.get("type") == "reasoning" for i in body["input"])


def test_unknown_blocks_are_kept_and_said_once() -> None:
    """Forward compatibility: Anthropic's compaction block, unknown to ipyagent, is kept in the
    message and named once; the reply's text is read as usual."""
    rec = recording("anthropic_compaction_stream")
    message, events, _ = replay(rec)
    assert isinstance(message, dict)
    assert "compaction" in [b["type"] for b in message["providerContent"]]
    notes = [e.text for e in events if isinstance(e, ProviderNote)]
    assert notes == [("Anthropic sent an unknown content block 'compaction': kept in the session as it came "
                     "(ipyagent does not read it).")]
