"""Servers that fail silently: a stream with no event at all (a ``200`` that closes at once, or a
connection closed before any answer) is asked again once without streaming, so the server's real
error shows; an overflow found that way teaches the window, compacts and retries, in the same
cell. A stream cut after some events is retried as before."""

from __future__ import annotations

import pytest

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent.run_config import RunConfig
from ipyagent.bridge.headless import execute_notebook
from ipyagent.hooks import HookRegistry
from ipyagent.providers import (
    ContextOverflowError,
    MalformedStreamError,
    ModelRequest,
    stream_with_retry,
)
from ipyagent.testing import FakeProviderServer, collect
from kernel_support import SETUP, fake_provider, notebook
from support.outputs import outputs_text


def ask(provider, text: str = "hello", **request):
    return collect(stream_with_retry(provider, ModelRequest(model="m", messages=[{"role": "user", "content": text}],
                                                            **request), sleep=lambda s: None))


def sent(server: FakeProviderServer) -> list[tuple[bool, str]]:
    return [(r.body.get("stream", True), r.outcome) for r in server.requests]


def test_an_empty_stream_is_asked_again_without_streaming():
    with FakeProviderServer() as server:
        server.enqueue_empty_stream()
        server.enqueue_text("The whole answer at once.")
        result = ask(server.provider())
        assert result.text == "The whole answer at once." and result.retries == []
        assert result.message["stopReason"] == "stop" and result.message["usage"]["input"] > 0
        assert sent(server) == [(True, "fault:empty"), (False, "reply")]
        assert "stream_options" not in server.requests[1].body


def test_a_connection_closed_before_any_answer_is_asked_again_without_streaming():
    with FakeProviderServer() as server:
        server.enqueue_hangup()
        server.enqueue_tool_call("python", {"code": "1 + 1"}, text="Let me compute.")
        result = ask(server.provider())
        assert result.retries == [] and sent(server) == [(True, "fault:hangup"), (False, "reply")]
        assert result.text == "Let me compute."
        assert [(c.name, c.arguments) for c in result.tool_calls] == [("python", {"code": "1 + 1"})]
        assert result.message["stopReason"] == "toolUse"


def test_llama_cpp_python_overflow_shows_its_real_error_and_window():
    with FakeProviderServer(context_window=300, overflow_style="llama-cpp-python") as server:
        with pytest.raises(ContextOverflowError) as info:
            ask(server.provider(), "word " * 800, max_tokens=48)
        assert info.value.context_window == 300 and info.value.status == 400
        assert "maximum context length is 300 tokens" in str(info.value)
        assert sent(server) == [(True, "overflow"), (False, "overflow")]  # asked once more, never retried


def test_a_stream_cut_after_some_events_is_retried_streaming():
    with FakeProviderServer() as server:
        server.enqueue_cut("This reply is cut after a few pieces.", after_chunks=3)
        server.enqueue_text("Complete.")
        result = ask(server.provider())
        assert result.text == "Complete." and len(result.retries) == 1
        assert [stream for stream, _ in sent(server)] == [True, True]


def test_an_empty_stream_and_a_failing_second_try_is_retried_as_before():
    with FakeProviderServer() as server:
        server.enqueue_empty_stream()
        server.enqueue_error(503)
        server.enqueue_text("streamed after the retry")
        result = ask(server.provider())
        assert result.text == "streamed after the retry" and len(result.retries) == 1
        assert sent(server) == [(True, "fault:empty"), (False, "fault:status:503"), (True, "reply")]


def test_stream_false_asks_for_whole_answers():
    with FakeProviderServer() as server:
        server.stream_usage = False  # like llama-cpp-python: streams carry no usage
        server.enqueue_text("streamed")
        server.enqueue_text("whole")
        streamed = ask(server.provider())
        assert streamed.message["usage"]["totalTokens"] == 0
        whole = ask(server.provider(stream=False))
        assert whole.text == "whole" and whole.message["usage"]["input"] > 0
        assert [stream for stream, _ in sent(server)] == [True, False]


def test_the_agent_learns_the_window_compacts_and_retries_in_the_same_prompt():
    with FakeProviderServer(context_window=1400, overflow_style="llama-cpp-python") as server:
        server.register("fake")
        config = RunConfig(model="fake:small-local", compaction=CompactionSettings(300, 250))
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[], sleep=lambda s: None,
                          providers=server.providers)
        server.policy = lambda body: "A short answer."
        for i in range(3):
            assert agent.prompt(f"Question {i}: " + "tell me about the columns " * 60).error is None
        assert agent.budget.window() is None and not agent.session.compactions()
        result = agent.prompt("Question 3: " + "tell me about the columns " * 60)
        assert result.error is None and result.text == "A short answer."
        info = agent.budget.window_info()
        assert (info.window, info.source) == (1400, "error")
        assert len(agent.session.compactions()) == 1
        chats = [(r.body.get("stream", True), r.outcome) for r in server.requests if r.kind == "chat"]
        assert chats[-3:] == [(True, "overflow"), (False, "overflow"), (True, "reply")]


@pytest.mark.kernel
def test_in_a_kernel_an_empty_200_recovers_through_compaction_in_the_same_cell(tmp_path):
    small = "%config Agent.reserve_tokens = 300\n%config Agent.keep_recent_tokens = 250\n"
    cells = [f"%%agent --no-tools\nQuestion {i}: " + "tell me about the columns of the table " * 45
             for i in range(4)]
    with fake_provider(context_window=1400, overflow_style="llama-cpp-python") as server:
        server.policy = lambda body: "A short answer."
        out = execute_notebook(notebook(SETUP + small, *cells), timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
        chats = [(r.body.get("stream", True), r.outcome) for r in server.requests if r.kind == "chat"]
    assert (True, "overflow") in chats and (False, "overflow") in chats
    recovered = [i for i, c in enumerate(out.nb["cells"]) if "Compacted (overflow)" in outputs_text(c["outputs"])]
    assert len(recovered) == 1
    cell = out.nb["cells"][recovered[0]]
    shown = outputs_text(cell["outputs"])
    assert "A short answer." in shown.split("Compacted (overflow)")[-1]  # the answer came after, in that cell
    assert "Model error" not in "".join(outputs_text(c["outputs"]) for c in out.nb["cells"])
    session = out.nb["metadata"]["ipyagent"]["sessions"]["default"]
    assert [e["type"] for e in session["entries"]].count("compaction") >= 1
    assert "window from an overflow error" in outputs_text(out.nb["cells"][-1]["outputs"])


def test_a_whole_answer_that_is_not_json_is_a_clear_error():
    with FakeProviderServer() as server:
        server.enqueue_error(200, body="<html>a proxy's error page</html>")
        with pytest.raises(MalformedStreamError, match="is not a JSON object"):
            ask(server.provider(stream=False))
        assert len(server.requests) == 1  # not retried
