"""A compaction makes room: it cuts deeper (a smaller kept tail, down to the last message) until
the next request is under the threshold, in one compaction; a request known not to fit the window
is never sent, and the error says what is too large; budgets set by hand that cannot fit the
window are said once. Against the loopback fake provider (real HTTP, real SSE), which enforces
its window."""

from __future__ import annotations

import json

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.settings import fit_budget
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer
from ipyagent.testing.accounting import default_summary_detector, tokens
from ipyagent.testing.specs import Reply

RAMBLE = "- the user wants the data cleaned first and then a short report for the team\n"
WORDS = "the survey answers were typed by hand so the city names are spelled in several ways "


def make_agent(server: FakeProviderServer, window: int, summary: str, compaction: CompactionSettings | None = None,
               **config) -> AgentLoop:
    server.register("fake", "openai")
    cfg = RunConfig(model="fake:test-model", context_window=window, tool_approval="auto",
                    compaction=compaction or CompactionSettings(), **config)
    return AgentLoop(Session(hooks=HookRegistry()), config=cfg, namespace={},
                     summarizer=ScriptedSummarizer(fn=lambda request: summary), sleep=lambda s: None,
                     providers=server.providers)


def runs_on(window: int, asked: list[int | None], answer: str):
    """A summary model that runs on as a small one can: every summary to its ``max_tokens`` or,
    with none asked for, to the window's end (llama-cpp-python's behaviour); each limit is kept
    in ``asked``. Other requests get ``answer``."""

    def model(body: dict) -> Reply | str:
        if not default_summary_detector(body):
            return answer
        asked.append(body.get("max_tokens"))
        left = window - tokens(len(json.dumps(body["messages"])))  # what the window leaves it
        limit = min(body.get("max_tokens") or left, left)
        return Reply(text=(RAMBLE * (4 * limit // len(RAMBLE) + 1))[:4 * limit], stop_reason="length")

    return model


def prompt(i: int, tokens: int) -> str:
    return f"Part {i}. " + (WORDS * (4 * tokens // len(WORDS) + 1))[:4 * tokens]


def test_a_compaction_cuts_deeper_until_the_next_request_is_under_the_threshold():
    # A 6,000-token window and no budget set (reserve 1,500, keep-recent 1,831): with the system
    # prompt and tools (~1,600), prompts of ~1,200 tokens and a summary of ~800, the usual kept
    # tail (two prompts) would leave the context over the threshold after compacting.
    window = 6000
    with FakeProviderServer(context_window=window) as server:
        agent = make_agent(server, window, "## Goal\n" + "g" * 3200)
        threshold = fit_budget(CompactionSettings(), window).threshold
        assert threshold == 4500 and agent.budget.fixed_tokens() > 1000  # the system prompt and the tools
        seen: list = []
        after: list[int] = []
        agent.subscribe(seen.append)
        agent.subscribe(lambda e: after.append(agent.budget.request_tokens())
                        if isinstance(e, ev.CompactionEnd) and e.entry is not None else None)
        for i in range(8):
            server.enqueue_text(f"answer {i}")
            assert agent.prompt(prompt(i, 1200)).error is None
        assert len(after) >= 2
        assert max(after) <= threshold, (after, threshold)  # each compaction made room on its own
        requests = [e.context_tokens for e in seen if isinstance(e, ev.RequestStart)]
        assert max(requests) <= window and len(requests) == 8  # every request fitted, no retry
        assert [r.outcome for r in server.requests if r.outcome not in ("reply", "summary")] == []
        assert len(agent.session.compactions()) == len(after)  # one compaction entry each


def test_nothing_to_compact_at_the_usual_tail_still_makes_room():
    # keep-recent set larger than everything since the start: the usual plan has nothing to
    # summarise, and the compaction cuts deeper instead of being skipped
    window = 6000
    with FakeProviderServer(context_window=window) as server:
        agent = make_agent(server, window, "## Goal\nshort", CompactionSettings(reserve_tokens=1500,
                                                                                 keep_recent_tokens=4400))
        seen: list = []
        agent.subscribe(seen.append)
        for i in range(4):
            server.enqueue_text(f"answer {i}")
            assert agent.prompt(prompt(i, 900)).error is None
        assert not [e for e in seen if isinstance(e, ev.CompactionEnd) and e.error]
        assert [e for e in seen if isinstance(e, ev.CompactionEnd) and e.entry is not None]
        assert agent.budget.request_tokens() <= 4500


def test_a_prompt_too_large_for_the_window_is_not_sent_and_the_error_says_why():
    window = 6000
    with FakeProviderServer(context_window=window) as server:
        agent = make_agent(server, window, "## Goal\nshort")
        server.enqueue_text("answer 0")
        assert agent.prompt(prompt(0, 300)).error is None
        calls = server.chat_calls
        result = agent.prompt(prompt(1, 7000))
        assert result.error is not None
        assert "more than the 6,000-token window" in result.error
        assert "one prompt (entry " in result.error and "Shorten it or split it over several cells" in result.error
        # no compaction can make it fit: said first, and nothing summarised for nothing (issue 28)
        assert "even after the deepest compaction (so none was run)" in result.error
        assert not [r for r in server.requests if r.kind == "summary"]
        assert server.chat_calls == calls  # nothing was sent


def test_system_prompt_and_tools_larger_than_the_window_are_named():
    with FakeProviderServer(context_window=1024) as server:
        agent = make_agent(server, 1024, "## Goal\nshort")
        result = agent.prompt("hello")
        assert result.error is not None and "the system prompt and the" in result.error
        assert "tool definitions take" in result.error and "%%agent --no-tools" in result.error
        assert server.chat_calls == 0


def test_budgets_set_by_hand_that_cannot_fit_are_said_once_and_the_scaled_ones_used():
    window = 2048
    with FakeProviderServer(context_window=window) as server:
        agent = make_agent(server, window, "## Goal\nshort", CompactionSettings(16384, 20000), max_output_tokens=32)
        agent.configure(tools=[])
        seen: list = []
        agent.subscribe(seen.append)
        for i in range(6):
            server.enqueue_text(f"answer {i}")
            assert agent.prompt(prompt(i, 250)).error is None
        notices = [e.message for e in seen if isinstance(e, ev.Notice)]
        assert len(notices) == 1 and "cannot work with a 2,048-token window" in notices[0]
        assert agent.budget.fitted().threshold == 1536
        assert [e for e in seen if isinstance(e, ev.CompactionEnd) and e.entry is not None]


def test_a_summary_model_that_runs_on_still_makes_room_after_an_overflow_with_defaults_only():
    # What a new user of a 4,096-token local model meets (the interop case
    # test_defaults_only_ten_cells_compact_without_errors[n_ctx-4096-no-window]): no settings but
    # the model, no window known until the server's overflow error names it. The summary model
    # runs on as a small model can, to its output limit or, with none asked for, to the window's
    # end (llama-cpp-python's behaviour). The overflow's compaction must still leave room for the
    # next request, in that same prompt, with no error.
    window = 4096
    with FakeProviderServer(context_window=window, overflow_style="llama-cpp-python",
                            server_kind="llama-cpp-python") as server:
        server.stream_usage = False
        server.register("fake")
        asked: list[int | None] = []
        server.policy = runs_on(window, asked, "A short answer.")
        config = RunConfig(model="fake:smollm2-135m-instruct", max_output_tokens=32)
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[], sleep=lambda s: None,
                          providers=server.providers)
        seen: list = []
        agent.subscribe(seen.append)
        for i in range(10):
            result = agent.prompt(prompt(i, 560))
            assert result.error is None, result.error
        info = agent.budget.window_info()
        assert (info.window, info.source) == (window, "error")
        ends = [e for e in seen if isinstance(e, ev.CompactionEnd)]
        assert ends and [e.error for e in ends if e.error] == []
        assert ends[0].reason == "overflow" and len(agent.session.compactions()) == len(ends)
        assert asked and all(limit for limit in asked)  # every summary was told the room it has
        # this model runs past any limit: each summary is kept up to the room it had, marked as cut
        assert all(c["summary"].startswith("- the user wants") and "[The summary was cut off here" in c["summary"]
                   for c in agent.session.compactions())
        threshold = agent.budget.fitted().threshold
        requests = [e.context_tokens for e in seen if isinstance(e, ev.RequestStart)]
        assert max(requests[requests.index(max(requests)) + 1:]) <= threshold  # after the overflow: room
        assert [r.outcome for r in server.requests if r.kind == "chat"].count("overflow") == 2  # streamed, whole


def test_a_manual_compaction_of_a_short_session_with_a_summary_model_that_runs_on_shrinks_it():
    # The interop case test_streaming_text_usage_and_a_summary: three short turns with SmolLM2
    # at 2,048 tokens, then compact(). A summary longer than what it replaces cannot be used, so
    # the summary is asked within about four fifths of that, and one that runs on is kept to it.
    window = 2048
    with FakeProviderServer(context_window=window, server_kind="llama-cpp-python") as server:
        server.register("fake")
        asked: list[int | None] = []
        server.policy = runs_on(window, asked, "A short answer about the notes.")
        config = RunConfig(model="fake:smollm2-135m-instruct", context_window=window, max_output_tokens=32,
                           compaction=CompactionSettings(400, 120))
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[], sleep=lambda s: None,
                          providers=server.providers)
        for i in range(3):
            assert agent.prompt(prompt(i, 270)).error is None
        before = agent.session.compaction_planner().estimated_tokens()
        entry = agent.compact()
        assert entry is not None and "[The summary was cut off here" in entry["summary"]
        assert agent.session.compaction_planner().estimated_tokens() < before
        assert asked and all(limit and limit < before for limit in asked)
