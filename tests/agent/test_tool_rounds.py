"""A run that would not end (issue 37, item 1), against the loopback fake provider: the default cap
on tool rounds, the same failing call stopped at its third time, and both said as a stop (a plain
line, :class:`~ipyagent.agent.run_events.RunStopped`), never as a model error."""

from __future__ import annotations

from ipyagent import AgentLoop, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools.repeats import REPEAT_NOTE
from ipyagent.hooks import HookRegistry
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.testing import FakeProviderServer
from ipyagent.testing.specs import Reply, ToolCallSpec

RUNAWAY = 40  # the scripted model calls tools this many times before it answers


def agent_for(server: FakeProviderServer, tmp_path, **config) -> tuple[AgentLoop, list]:
    """An agent with the settings a user has by default (only approval set to "auto")."""
    server.register("fake")
    agent = AgentLoop(Session(hooks=HookRegistry()), config=RunConfig(model="fake:m", tool_approval="auto", **config),
                      cwd=str(tmp_path), namespace={}, sleep=lambda s: None, providers=server.providers)
    seen: list = []
    agent.subscribe(seen.append)
    return agent, seen


def runaway(calls) -> object:
    """A model that makes the call ``calls(i)`` in its i-th reply, then answers after RUNAWAY."""
    def policy(body: dict) -> Reply:
        i = sum(m["role"] == "assistant" for m in body["messages"])
        return Reply(text="done") if i >= RUNAWAY else Reply(tool_calls=[calls(i)])
    return policy


def assert_calls_answered(session: Session) -> None:
    """Every tool call on the path has its one result: the session is one a provider accepts."""
    calls = [b["id"] for e in session.path() if e["type"] == "message" and e["message"]["role"] == "assistant"
             for b in e["message"]["content"] if b["type"] == "toolCall"]
    answered = [e["message"]["toolCallId"] for e in session.path()
                if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert sorted(calls) == sorted(answered)


def tool_results(agent: AgentLoop) -> list[dict]:
    return [e["message"] for e in agent.session.path()
            if e["type"] == "message" and e["message"]["role"] == "toolResult"]


def test_the_default_cap_stops_a_run_away_after_25_rounds_as_a_stop(tmp_path):
    assert AgentSettings().max_tool_rounds == 25 and RunConfig().max_tool_rounds == 25
    with FakeProviderServer(policy=runaway(lambda i: ToolCallSpec("python", {"code": f"{i} + 1"}))) as server:
        agent, seen = agent_for(server, tmp_path)
        result = agent.prompt("keep computing")
        assert server.chat_calls == 25
    assert result.error is None and result.stopped is not None
    assert result.stopped.startswith("Stopped after 25 tool rounds") and "Agent.max_tool_rounds = 25" in result.stopped
    stops = [e for e in seen if isinstance(e, ev.RunStopped)]
    assert [s.reason for s in stops] == ["max_tool_rounds"]
    assert not [e for e in seen if isinstance(e, ev.AgentError)]
    assert len(tool_results(agent)) == 25 and not any(r["isError"] for r in tool_results(agent))
    assert_calls_answered(agent.session)


def test_none_still_means_no_limit(tmp_path):
    with FakeProviderServer(policy=runaway(lambda i: ToolCallSpec("python", {"code": f"{i} + 1"}))) as server:
        agent, _ = agent_for(server, tmp_path, max_tool_rounds=None)
        result = agent.prompt("keep computing")
        assert server.chat_calls == RUNAWAY + 1
    assert result.stopped is None and result.text == "done"


def test_the_same_failing_call_is_said_once_and_stops_the_run_the_third_time(tmp_path):
    with FakeProviderServer(policy=runaway(lambda i: ToolCallSpec("read", {"path": "{{}}"}))) as server:
        agent, seen = agent_for(server, tmp_path)
        result = agent.prompt("Read sales.csv and tell me how many rows it has.")
        assert server.chat_calls == 3  # the third identical failure ends the run
        sent = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    results = tool_results(agent)
    assert len(results) == 3 and all(r["isError"] for r in results)
    texts = [r["content"][0]["text"] for r in results]
    assert [REPEAT_NOTE in t for t in texts] == [False, True, False]  # said to the model once
    assert [REPEAT_NOTE in m["content"] for m in sent] == [False, True]  # and it reached the model
    assert result.error is None and result.stopped is not None
    assert "the same failing call 3 times (read with the same arguments" in result.stopped
    assert texts[0].split("\n")[0][:40] in result.stopped  # the error, in its line
    assert [e.reason for e in seen if isinstance(e, ev.RunStopped)] == ["repeated_failure"]
    assert not [e for e in seen if isinstance(e, ev.AgentError)]
    assert_calls_answered(agent.session)


def test_failures_that_differ_do_not_stop_the_run(tmp_path):
    # a new path each time fails each time, differently: the model is trying things, not looping
    def calls(i: int) -> ToolCallSpec:
        return ToolCallSpec("read", {"path": f"missing-{i}.csv"})
    policy = runaway(calls)

    def short(body: dict) -> Reply:
        reply = policy(body)
        assert isinstance(reply, Reply)
        return Reply(text="done") if sum(m["role"] == "assistant" for m in body["messages"]) >= 6 else reply
    with FakeProviderServer(policy=short) as server:
        agent, _ = agent_for(server, tmp_path)
        result = agent.prompt("find the file")
        assert server.chat_calls == 7
    assert result.stopped is None and result.text == "done"
    assert not any(REPEAT_NOTE in r["content"][0]["text"] for r in tool_results(agent))
