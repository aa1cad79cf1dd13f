"""The same error three times in a row: shown once, clearly, and no more retries burnt on it, in
this call or in the next cells, until a call to that model succeeds again."""

from __future__ import annotations

import pytest

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.providers import (
    ModelRequest,
    NetworkError,
    Retrying,
    ServerError,
    stream_with_retry,
)
from ipyagent.providers.transport.retry import error_signature
from ipyagent.testing import FakeProviderServer, Fault, collect


def ask(provider, model: str = "m", delays: list[float] | None = None):
    sleep = delays.append if delays is not None else (lambda s: None)
    return collect(stream_with_retry(provider, ModelRequest(model=model, messages=[{"role": "user", "content": "q"}]),
                                     sleep=sleep, max_retries=3))


def test_three_identical_errors_stop_the_retries_and_say_so():
    with FakeProviderServer() as server:
        for _ in range(4):
            server.enqueue_error(503)
        delays: list[float] = []
        with pytest.raises(ServerError, match=r"the same error 3 times in a row: stopped retrying"):
            ask(server.provider(), delays=delays)
        assert len(server.requests) == 3 and delays == [2.0, 4.0]


def test_the_next_call_tries_once_and_a_success_clears_the_memory():
    with FakeProviderServer() as server:
        provider = server.provider()
        for _ in range(3):
            server.enqueue_error(503)
        with pytest.raises(ServerError):
            ask(provider)
        server.enqueue_error(503)
        with pytest.raises(ServerError, match="the same error stopped the previous call"):
            ask(provider)
        assert len(server.requests) == 4  # one attempt, no retry

        server.enqueue_text("back")  # the cause went away: one attempt is all it takes
        assert ask(provider).text == "back"
        server.enqueue_error(503)
        server.enqueue_text("retried as usual again")
        result = ask(provider)
        assert result.text == "retried as usual again" and len(result.retries) == 1


def test_other_models_and_other_errors_are_retried_as_usual():
    with FakeProviderServer() as server:
        provider = server.provider()
        for _ in range(3):
            server.enqueue_error(503)
        with pytest.raises(ServerError):
            ask(provider, model="a")
        server.enqueue_error(503)
        server.enqueue_text("another model")
        assert ask(provider, model="b").text == "another model"
        server.enqueue_error(502)  # a different error on the stuck model: retried
        server.enqueue_text("recovered")
        result = ask(provider, model="a")
        assert result.text == "recovered" and [type(e) for e in result.events].count(Retrying) == 1


def test_errors_that_differ_only_in_numbers_are_the_same_error():
    a = NetworkError("OpenAI: connection problem with http://127.0.0.1:40001/v1: ReadError: [Errno 104] reset")
    b = NetworkError("OpenAI: connection problem with http://127.0.0.1:40002/v1: ReadError: [Errno 104] reset")
    assert error_signature(a) == error_signature(b)
    assert error_signature(ServerError("x", status=503)) != error_signature(ServerError("x", status=502))


def test_in_the_agent_the_error_shows_once_per_cell_and_later_cells_do_not_retry():
    with FakeProviderServer() as server:
        server.register("fake")
        config = RunConfig(model="fake:m", compaction=CompactionSettings())
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[], sleep=lambda s: None,
                          providers=server.providers)
        server.policy = lambda body: Fault("status", status=500)
        seen: list[object] = []
        agent.subscribe(seen.append)
        first = agent.prompt("one")
        assert first.error and "3 times in a row" in first.error
        assert sum(isinstance(e, ev.AgentError) for e in seen) == 1 and sum(isinstance(e, Retrying) for e in seen) == 2
        chats = len([r for r in server.requests if r.kind == "chat"])
        assert chats == 3

        seen.clear()
        second = agent.prompt("two")
        assert second.error and "not retrying" in second.error
        assert sum(isinstance(e, ev.AgentError) for e in seen) == 1 and not any(isinstance(e, Retrying) for e in seen)
        assert len([r for r in server.requests if r.kind == "chat"]) == chats + 1
        # the session holds both prompts and no error message: it stays valid
        roles = [e["message"]["role"] for e in agent.session.path() if e["type"] == "message"]
        assert roles == ["system", "user", "user"]  # the system prompt, recorded once (Pi 1.6)
