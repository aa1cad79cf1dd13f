"""The agent loop against the loopback fake provider: real HTTP, real SSE."""

from __future__ import annotations

import _thread
import threading

import pytest

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.hooks import HookRegistry
from ipyagent.session.messages import system_prompt_text
from ipyagent.testing import FakeProviderServer


def make_agent(server: FakeProviderServer, *, window: int | None = None, reserve: int = 16384, keep: int = 20000,
               approval: str = "auto", summarizer=None, protocol: str = "openai", **config) -> AgentLoop:
    server.register("fake", protocol)
    session = Session(hooks=HookRegistry())
    cfg = RunConfig(model="fake:test-model", context_window=window,
                    compaction=CompactionSettings(reserve, keep), tool_approval=approval, **config)
    return AgentLoop(session, config=cfg, namespace={}, summarizer=summarizer, sleep=lambda s: None,
                     providers=server.providers)


def roles(session: Session) -> list[str]:
    """The conversation's roles on the path (the system messages, prompt state, left out)."""
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in session.path()
            if not (e["type"] == "message" and e["message"]["role"] == "system")]


def assert_calls_answered(session: Session) -> None:
    """Every tool call on the path has exactly one result, and no result lacks its call."""
    calls, results = [], []
    for entry in session.path():
        if entry["type"] != "message":
            continue
        message = entry["message"]
        if message["role"] == "assistant" and message.get("stopReason") != "aborted":
            calls += [b["id"] for b in message["content"] if b["type"] == "toolCall"]
        if message["role"] == "toolResult":
            results.append(message["toolCallId"])
    assert sorted(calls) == sorted(results)


def test_streamed_text_becomes_entries_and_events():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        seen = []
        agent.subscribe(seen.append)
        server.enqueue_text("Hello from the model, streamed in pieces.")
        result = agent.prompt("hi", cellId="cell-1")
        assert result.error is None
        assert result.text == "Hello from the model, streamed in pieces."
        assert roles(agent.session) == ["user", "assistant"]
        system, prompt = agent.session.path()[:2]
        assert system["message"]["role"] == "system" and prompt["message"]["cellId"] == "cell-1"
        deltas = "".join(e.text for e in seen if type(e).__name__ == "TextDelta")
        assert deltas == result.text
        assert isinstance(seen[0], ev.AgentStart) and isinstance(seen[-1], ev.AgentEnd)
        usage = agent.session.path()[-1]["message"]["usage"]
        assert usage["input"] > 0 and usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]


def test_parallel_tool_calls_run_and_results_follow_their_calls(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    with FakeProviderServer() as server:
        agent = make_agent(server)
        agent.tool_context.cwd = str(tmp_path)
        server.enqueue_tool_calls([("read", {"path": "a.txt"}), ("python", {"code": "y = 6 * 7\ny"})])
        server.enqueue_text("a.txt says alpha and y is 42.")
        result = agent.prompt("read a.txt and compute")
        assert result.error is None
        assert roles(agent.session) == ["user", "assistant", "toolResult", "toolResult", "assistant"]
        texts = [e["message"]["content"][0]["text"] for e in agent.session.path() if e["message"]["role"] == "toolResult"]
        assert "alpha" in texts[0] and "42" in texts[1]
        assert agent.tool_context.namespace["y"] == 42
        # the second request carried both results back to the model
        sent = server.requests[-1].body["messages"]
        assert [m["role"] for m in sent if m["role"] == "tool"] == ["tool", "tool"]
        assert_calls_answered(agent.session)


def test_ask_policy_without_a_callback_refuses_clearly():
    with FakeProviderServer() as server:
        agent = make_agent(server, approval="ask")
        server.enqueue_tool_call("bash", {"command": "echo should-not-run"})
        server.enqueue_text("ok")
        agent.prompt("run it")
        result = [e for e in agent.session.path() if e["message"]["role"] == "toolResult"][0]["message"]
        assert result["isError"] and "did not approve" in result["content"][0]["text"]
        assert "should-not-run" not in result["content"][0]["text"]


@pytest.mark.parametrize("style,protocol", [("openai", "openai"), ("anthropic", "anthropic"), ("llamacpp", "openai")])
def test_overflow_error_compacts_and_retries_once(style, protocol):
    with FakeProviderServer() as server:
        summarizer = ScriptedSummarizer(fn=lambda request: "## Goal\nEarlier work, summarised.")
        agent = make_agent(server, window=None, reserve=200, keep=100, summarizer=summarizer, protocol=protocol)
        for i in range(4):
            server.enqueue_text(f"answer {i} " + "lorem " * 80)
            agent.prompt(f"question {i} " + "ipsum " * 80)
        server.enqueue_overflow(style, window=5000)
        server.enqueue_text("after recovery")
        seen = []
        agent.subscribe(seen.append)
        result = agent.prompt("one more")
        assert result.error is None and result.text == "after recovery"
        assert len(agent.session.compactions()) == 1
        assert any(isinstance(e, ev.CompactionEnd) and e.reason == "overflow" and e.will_retry for e in seen)
        assert 1 <= len(summarizer.requests) <= 2  # two only when the cut splits a turn
        # the retried request is smaller: it starts with the summary
        first = server.requests[-1].body["messages"]
        text = str(first[0]["content"]) if protocol == "anthropic" else str(first[1]["content"])
        assert "compacted into the following summary" in text


def test_overflow_twice_gives_a_clear_error_and_a_valid_session():
    with FakeProviderServer() as server:
        agent = make_agent(server, reserve=100, keep=50, summarizer=ScriptedSummarizer(fn=lambda r: "## Goal\nsummary"))
        for i in range(3):
            server.enqueue_text("reply " * 50)
            agent.prompt("prompt " * 50)
        server.enqueue_overflow("openai")
        server.enqueue_overflow("openai")
        result = agent.prompt("again")
        assert result.error and "recovery failed" in result.error
        # the prompt is kept, the one compaction is recorded, no error message was appended
        assert roles(agent.session)[-2:] == ["user", "compaction"]


def test_rate_limit_is_retried_after_retry_after_without_duplicates():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        delays = []
        agent._sleep = delays.append
        server.enqueue_rate_limit(retry_after=7)
        server.enqueue_error(503)
        server.enqueue_text("finally")
        result = agent.prompt("hi")
        assert result.text == "finally"
        assert delays[0] == 7 and len(delays) == 2
        assert roles(agent.session) == ["user", "assistant"]


def test_stream_cut_short_is_retried_and_leaves_one_message():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        server.enqueue_cut("this will be cut", after_chunks=2)
        server.enqueue_text("complete answer")
        result = agent.prompt("hi")
        assert result.text == "complete answer"
        assert roles(agent.session) == ["user", "assistant"]


def test_auth_error_is_reported_and_the_key_never_appears():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        server.enqueue_auth_error()
        result = agent.prompt("hi")
        assert result.error and "401" in result.error
        assert "test-key" not in result.error
        assert roles(agent.session) == ["user"]


def test_budget_is_checked_inside_a_tool_loop():
    """Pi only checks at agent_end (#5512, #7821); here every provider call is guarded."""
    with FakeProviderServer(context_window=4000) as server:
        summarizer = ScriptedSummarizer(fn=lambda r: "## Goal\nKeep going.")
        agent = make_agent(server, window=4000, reserve=1000, keep=800, summarizer=summarizer)
        for i in range(10):
            server.enqueue_tool_call("python", {"code": f"print('{i}' * 600)"})
        server.enqueue_text("all done")
        seen = []
        agent.subscribe(seen.append)
        result = agent.prompt("run ten steps")
        assert result.error is None and result.text == "all done"
        starts = [i for i, e in enumerate(seen) if isinstance(e, ev.CompactionStart)]
        ends = [i for i, e in enumerate(seen) if isinstance(e, ev.AgentEnd)]
        assert starts and starts[0] < ends[0]  # compacted during the single run
        assert [r.outcome for r in server.requests if r.outcome != "reply"] == []  # no overflow served
        assert_calls_answered(agent.session)


def test_three_failed_compactions_stop_automatic_compaction():
    with FakeProviderServer() as server:
        summarizer = ScriptedSummarizer(fn=lambda r: "")  # always empty → rejected
        # the window leaves room above the system prompt and tools: no reply is a silent overflow
        agent = make_agent(server, window=2900, reserve=2400, keep=100, summarizer=summarizer)
        seen = []
        agent.subscribe(seen.append)
        for i in range(5):
            server.enqueue_text("reply " * 40)
            agent.prompt("prompt " * 40)
        assert agent.failures.blocked
        assert len(summarizer.requests) == 3
        errors = [e.message for e in seen if isinstance(e, ev.AgentError) and e.kind == "compaction"]
        assert errors and "stopped after 3 failures" in errors[0]
        assert agent.session.compactions() == []
        agent.failures.reset()
        summarizer.fn = lambda r: "## Goal\nrecovered"
        server.enqueue_text("ok")
        agent.prompt("again")
        assert len(agent.session.compactions()) >= 1


def test_summary_model_can_differ_from_the_session_model():
    with FakeProviderServer() as server:
        server.register("fake", "openai")
        server.register("cheap", "anthropic")
        agent = make_agent(server, window=2500, reserve=1500, keep=100, summary_model="cheap:small-model")
        agent.config.summary_model = "cheap:small-model"
        for i in range(3):
            server.enqueue_text("reply " * 40)
            agent.prompt("prompt " * 40)
        summary_requests = [r for r in server.requests if r.path.endswith("/messages")]
        assert summary_requests and summary_requests[0].body["model"] == "small-model"
        assert agent.session.compactions()


@pytest.mark.usefixtures("sigint_raises")  # it interrupts itself: see tests/conftest.py
def test_interrupt_during_a_stream_records_an_aborted_message():
    with FakeProviderServer(chunk_delay=0.05) as server:
        agent = make_agent(server)
        server.enqueue_text("word " * 200, chunk_size=5)
        fired = threading.Event()

        def on_event(event):
            if type(event).__name__ == "TextDelta" and not fired.is_set():
                fired.set()
                _thread.interrupt_main()

        agent.subscribe(on_event)
        with pytest.raises(KeyboardInterrupt):
            agent.prompt("long answer please")
        last = agent.session.path()[-1]["message"]
        assert last["role"] == "assistant" and last["stopReason"] == "aborted"
        assert len(last["content"][0]["text"]) < len("word " * 200)
        server.enqueue_text("fresh start")
        assert agent.prompt("again").text == "fresh start"
        assert server.last_request.outcome == "reply"


@pytest.mark.usefixtures("sigint_raises")  # it interrupts itself: see tests/conftest.py
def test_interrupt_during_a_tool_gives_every_call_a_result():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        # the tool's own code says it has started; only then comes the interrupt (as a user's would)
        started = agent.tool_context.namespace["started"] = threading.Event()
        server.enqueue_tool_calls([("python", {"code": "started.set()\nimport time\n"
                                                       "for _ in range(200): time.sleep(0.05)"}),
                                   ("python", {"code": "z = 1"})])
        threading.Thread(target=lambda: started.wait() and _thread.interrupt_main(), daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            agent.prompt("slow")
        results = [e["message"] for e in agent.session.path() if e["message"]["role"] == "toolResult"]
        assert len(results) == 2 and all(r["isError"] for r in results)
        assert "Interrupted" in results[0]["content"][0]["text"]
        assert "z" not in agent.tool_context.namespace
        assert_calls_answered(agent.session)


def test_interrupt_during_compaction_leaves_the_session_unchanged():
    def interrupting(request):
        raise KeyboardInterrupt

    with FakeProviderServer() as server:
        agent = make_agent(server, summarizer=ScriptedSummarizer(fn=interrupting))
        for i in range(4):
            server.enqueue_text("reply " * 50)
            agent.prompt("prompt " * 50)
        before = [dict(e) for e in agent.session.entries]
        seen = []
        agent.subscribe(seen.append)
        agent.config.compaction = CompactionSettings(100, 50)
        with pytest.raises(KeyboardInterrupt):
            agent.compact()
        assert agent.session.entries == before
        assert any(isinstance(e, ev.CompactionEnd) and e.aborted for e in seen)


def test_no_model_configured_is_a_clear_error():
    session = Session(hooks=HookRegistry())
    agent = AgentLoop(session, config=RunConfig(model=""))
    with pytest.raises(Exception, match="No model configured"):
        agent.prompt("hi")
    assert len(session) == 0


def test_the_system_prompt_is_recorded_as_pi_16_system_messages_whole_then_patches():
    with FakeProviderServer() as server:
        agent = make_agent(server)
        for text in ("one", "two"):
            server.enqueue_text(f"answer {text}")
            agent.prompt(text)
        agent.session.append({"type": "custom", "customType": "ipyagent.pin", "data": {"text": "Be brief."}})
        server.enqueue_text("answer three")
        agent.prompt("three")
        chats = [r.body for r in server.requests if r.kind == "chat"]
    systems = [e["message"] for e in agent.session.path() if e["type"] == "message" and e["message"]["role"] == "system"]
    first, patch = systems  # the second prompt changed nothing: no system message
    assert first["sections"]["preamble"] == agent.config.system_prompt
    assert [t["name"] for t in first["toolsAdded"]] == list(agent.tools)
    assert set(patch) == {"role", "content", "sections", "timestamp"} and list(patch["sections"]) == ["pins"]
    assert "Be brief." in patch["sections"]["pins"]
    # what is sent is what the recorded messages replay to
    sent = [m["content"] for m in chats[-1]["messages"] if m["role"] == "system"]
    assert sent == [system_prompt_text(agent.session.system_message())]
    assert all(m["role"] != "system" for body in chats for m in body["messages"][1:])
