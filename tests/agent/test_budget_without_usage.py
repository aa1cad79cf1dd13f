"""A budget without usage: when no reply in the context carries usage, the trigger counts what the
request will hold (system prompt, tool definitions, messages), exactly as the widget shows it; a
server's tokenizer calibrates the chars/4 estimate once, and only ever upwards."""

from __future__ import annotations

import math

import pytest

from ipyagent import AgentLoop, CompactionSettings
from ipyagent.agent import run_events as ev
from ipyagent.agent.budget import request_tokens, system_tools_tokens, token_factor
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools import default_tools
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.display.budget_widget import budget_facts
from ipyagent.providers import window_discovery as discovery
from ipyagent.testing import FakeProviderServer
from support.builders import assistant, new_session, user

SUMMARY = "## Goal\nEarlier questions about the table, summarised."




def specs():
    return [t.spec() for t in default_tools()]


def test_without_usage_the_request_counts_system_tools_and_messages_and_the_widget_agrees():
    session = new_session(user("a question " * 40), assistant("an answer " * 30), user("another " * 20))
    config = RunConfig(model="openai:local-model")
    messages = sum(session.context_state().estimates)
    overhead = system_tools_tokens(config.system_prompt, specs())
    assert overhead > 1000  # the system prompt and the eight tools: what the old trigger left out
    assert request_tokens(session, config.system_prompt, specs()) == messages + overhead
    assert session.context_tokens() == messages  # Pi's count, as before (and in dry-run plans)
    facts = budget_facts(session, config, window=8000, tool_specs=specs())
    assert facts.total == messages + overhead and sum(facts.parts.values()) == facts.total


def test_with_usage_the_count_is_pis():
    session = new_session(user("q " * 50), assistant("a " * 50, total=4321), user("next " * 10))
    config = RunConfig(model="openai:local-model")
    expected = 4321 + math.ceil(50 / 4)
    assert request_tokens(session, config.system_prompt, specs()) == session.context_tokens() == expected
    assert budget_facts(session, config, window=8000, tool_specs=specs()).total == 4321 + 13


def test_the_trigger_fires_when_system_and_tools_tip_the_request_over():
    session = new_session(user("a question " * 40), assistant("an answer " * 30), user("another " * 20),
                          assistant("more " * 20))
    agent = AgentLoop(session, config=RunConfig(model="openai:local-model", compaction=CompactionSettings(200, 50)),
                      summarizer=ScriptedSummarizer(fn=lambda request: SUMMARY))
    messages = session.context_tokens()
    # the messages alone stay under the threshold; the whole request does not; and a compaction
    # can make room (the system prompt and tools with the last turn fit the window)
    window = max(messages + 200 + 100, agent.budget.fixed_tokens() + 100)
    agent.config.context_window = window
    assert messages <= window - 200 < agent.budget.request_tokens()
    assert agent.compactor.check_budget() is not None and len(session.compactions()) == 1


@pytest.mark.parametrize("chars_per_token,factor", [(2.0, 2.0), (8.0, 1.0), (0.5, 4.0)])
def test_a_tokenizer_calibrates_the_estimate_once(chars_per_token, factor):
    with FakeProviderServer(server_kind="llamacpp", served_window=50_000, model="local") as server:
        server.chars_per_token = chars_per_token
        server.register("fake")
        agent = AgentLoop(new_session(), config=RunConfig(model="fake:local"), tools=default_tools(),
                          sleep=lambda s: None, providers=server.providers)
        server.enqueue_text("first")
        agent.prompt("hello " * 100)
        assert agent.budget.token_factor() == pytest.approx(factor, rel=0.02)
        state = agent.session.context_state()
        assert state.last_usage_index >= 0  # the fake server reports usage: only the trailing part is scaled
        agent.session.append_message(user("a follow-up " * 30))
        usage_part = agent.session.context_tokens() - agent.session.context_state().trailing
        assert agent.budget.request_tokens() == usage_part + math.ceil(agent.session.context_state().trailing
                                                                * agent.budget.token_factor())
        tokenized = [p for m, p in server.meta_requests if p == "/tokenize"]
        server.enqueue_text("second")
        agent.prompt("again")
        assert [p for m, p in server.meta_requests if p == "/tokenize"] == tokenized  # once per session


def test_token_factor_without_a_tokenizer_is_one():
    assert token_factor(None) == 1.0
    assert token_factor(discovery.Discovery(sample="abcd" * 10, sample_tokens=None)) == 1.0


def test_with_tools_and_no_usage_compaction_comes_before_the_request_outgrows_the_window():
    window = 3000
    with FakeProviderServer(context_window=window) as server:
        server.stream_usage = False  # like llama-cpp-python
        server.register("fake")
        config = RunConfig(model="fake:local", context_window=window, compaction=CompactionSettings(300, 250))
        agent = AgentLoop(new_session(), config=config, tools=default_tools(), sleep=lambda s: None,
                          summarizer=ScriptedSummarizer(fn=lambda request: SUMMARY), providers=server.providers)
        counted: list[int] = []
        compacted_at: list[int] = []
        agent.subscribe(lambda e: counted.append(e.context_tokens) if isinstance(e, ev.RequestStart) else None)
        agent.subscribe(lambda e: compacted_at.append(e.tokens_before) if isinstance(e, ev.CompactionStart) else None)
        server.policy = lambda body: "A short answer about the table."
        for i in range(8):
            assert agent.prompt(f"Question {i}: " + "what do the columns of the table mean " * 20).error is None
        assert len(counted) == 8 and max(counted) <= window
        assert compacted_at and agent.session.compactions()
        # the whole request was over the threshold; so is the entry's tokensBefore (Pi 1.6's count),
        # since the session records the system prompt and the tools as a system message it counts
        assert window - 300 < compacted_at[0] and window - 300 < agent.session.compactions()[0]["tokensBefore"]
        assert not [r for r in server.requests if r.outcome == "overflow"]  # the fake counts the tools too


def test_a_reported_prompt_without_the_tools_is_told_apart_from_one_with_them():
    from ipyagent.agent.tool_support import tools_left_out
    from ipyagent.providers.provider import ToolSpec

    tools = [ToolSpec(f"tool_{i}", "does a thing " * 40, {"type": "object", "properties": {}}) for i in range(6)]
    messages = [{"role": "user", "content": "hello " * 50}]
    left_out, whole, tool_tokens = tools_left_out(10_000, "system " * 30, tools, messages)
    assert not left_out and tool_tokens > 0.5 * (whole - tool_tokens)
    rest = whole - tool_tokens
    assert tools_left_out(rest, "system " * 30, tools, messages)[0]  # the server counted no tools
    # a tokenizer counting 20 % fewer tokens than chars/4 is no missing tools
    assert not tools_left_out(int(0.8 * whole), "system " * 30, tools, messages)[0]
    # tools a small share of a long conversation: not judged
    long = [{"role": "user", "content": "word " * 20_000}]
    assert not tools_left_out(1, "", tools, long)[0]


def test_the_budget_is_counted_without_an_agent_loop_and_agrees_with_the_loops():
    # what %agent status, the widget, the explorer and the teaching helpers count with: a session,
    # its settings, the tools and the system prompt; no loop is set up for it
    from ipyagent.agent.budget import RequestBudget, configured_provider

    session = new_session(user("a question " * 40), assistant("an answer " * 30), user("another " * 20))
    config = RunConfig(model="openai:local-model", context_window=8000)
    loop = AgentLoop(session, config=config, tools=default_tools())
    budget = RequestBudget(session, config, specs(), lambda: loop.system.text(session, loop.tools),
                           loop.providers, configured_provider(config, loop.providers))
    assert budget.request_tokens() == loop.budget.request_tokens() > sum(session.context_state().estimates)
    assert budget.fixed_tokens() == loop.budget.fixed_tokens() == system_tools_tokens(config.system_prompt, specs())
    assert budget.window_info().describe() == "window from config (Agent.context_window)"
    assert budget.fitted() == loop.budget.fitted() and budget.request_fits().fits
