"""How deep an idle compaction cuts (issue 37, item 6), against the loopback fake provider: deep
enough that the next turn of typical size fits under the threshold, so the next cell does not
compact again in the foreground; and where no cut can leave that much room, none is started."""

from __future__ import annotations

from ipyagent import AgentLoop, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.kernel.idle import IdleCompactor
from ipyagent.testing import FakeProviderServer

WINDOW = 8192  # threshold 6,144 with the derived reserve; the tools and system prompt take ~1,600
# a turn of about 1,400 tokens: what a cell with a tool result or a long answer adds
ANSWER = "The readings are steady, the units agree and the gaps are few; the trend is up. " * 70
# a summary of the size real ones have (about 450 tokens)
SUMMARY = ("## Goal\nDescribe the readings of the three stations, part by part.\n\n## Constraints & Preferences\n"
           + "- Plain words, short steps, every figure with where it comes from.\n" * 8
           + "\n## Progress\n### Done\n" + "- [x] Described a part of the readings: steady, few gaps, trend up.\n" * 10
           + "\n## Key Decisions\n- Keep the raw files.\n\n## Next Steps\n1. The next part.\n\n"
           "## Critical Context\n- Units agree across the stations.")


def agent_for(server: FakeProviderServer, window: int) -> AgentLoop:
    server.register("fake")
    config = RunConfig(model="fake:m", context_window=window, tool_approval="auto")
    return AgentLoop(Session(hooks=HookRegistry()), config=config, namespace={}, sleep=lambda s: None,
                     providers=server.providers)


def turns(agent: AgentLoop, server: FakeProviderServer, count: int) -> None:
    """``count`` cells as the kernel runs them: no compaction after the run (it is left to idle time)."""
    for i in range(count):
        server.enqueue_text(ANSWER)
        result = agent.prompt(f"Describe part {i + 1} of the readings.", compact_after=False)
        assert result.error is None, result.error


def test_an_idle_compaction_leaves_the_next_turn_room_and_the_next_cell_compacts_nothing():
    with FakeProviderServer() as server:
        agent = agent_for(server, WINDOW)
        turns(agent, server, 3)
        budget = agent.budget
        threshold = budget.fitted().threshold
        assert threshold is not None
        turn = budget.typical_turn()
        assert 1300 < turn < 1500 and budget.request_tokens() <= threshold  # under it: no compaction yet
        assert budget.request_tokens() > 0.85 * threshold  # above the idle share: due
        server.enqueue_summary(SUMMARY)
        entry = agent.compact(reason="idle")
        assert entry is not None and entry["trigger"] == "idle"
        after = agent.budget.request_tokens()
        assert after + turn <= threshold, (after, turn, threshold)

        seen: list = []
        agent.subscribe(seen.append)
        turns(agent, server, 1)  # the next cell, of the typical size
        assert not [e for e in seen if isinstance(e, ev.CompactionStart)]
        assert agent.budget.request_tokens() <= threshold


def test_a_foreground_compaction_still_compacts_just_enough():
    # the same session compacted before a prompt: Pi's cut, shallower than the idle one
    with FakeProviderServer() as server:
        agent = agent_for(server, WINDOW)
        turns(agent, server, 3)
        turn, threshold = agent.budget.typical_turn(), agent.budget.fitted().threshold
        server.enqueue_summary(SUMMARY)
        agent.compact(reason="threshold")
        assert threshold is not None and agent.budget.request_tokens() + turn > threshold


def test_no_idle_compaction_where_no_cut_leaves_a_turn_room():
    # a 4,096-token window: the tools and the system prompt take ~1,600 of its 3,072-token threshold,
    # and a turn of ~1,400 tokens cannot fit next to them and a summary, however deep the cut
    with FakeProviderServer() as server:
        agent = agent_for(server, 4096)
        turns(agent, server, 2)
        budget = agent.budget
        assert not budget.deepest_leaves_room(budget.typical_turn())
        why = IdleCompactor(runtime=None).no_room(budget)
        assert why.startswith("no compaction leaves room for a turn of typical size (about ")
