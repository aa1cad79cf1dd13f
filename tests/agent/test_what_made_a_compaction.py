"""What made a compaction is in its entry (``trigger``: idle, foreground, overflow or manual), the
summary's progress is reported as it arrives, and a run can leave its after-run compaction to the
kernel's idle time (``AgentLoop.prompt(compact_after=False)``). Against the loopback fake provider."""

from __future__ import annotations

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.session.entries import compaction_trigger, last_compaction_note
from ipyagent.testing import FakeProviderServer

ANSWER = "The table holds one row per order, with the region and the amount. " * 40  # ~700 tokens


def _agent(server: FakeProviderServer) -> AgentLoop:
    server.register("fake")
    config = RunConfig(model="fake:test-model", context_window=4000, compaction=CompactionSettings(1000, 600))
    return AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[], sleep=lambda s: None,
                     providers=server.providers)


def _fill(agent: AgentLoop, server: FakeProviderServer, turns: int) -> None:
    for i in range(turns):
        server.enqueue_text(ANSWER)
        assert agent.prompt(f"Question {i}", compact_after=False).error is None


def test_a_manual_compaction_records_its_trigger_and_reports_the_summary_as_it_arrives():
    with FakeProviderServer() as server:
        agent = _agent(server)
        _fill(agent, server, 3)
        seen: list = []
        agent.subscribe(seen.append)
        server.enqueue_summary("## Goal\nOrders by region.\n\n## Progress\n- [x] the regions, one by one")
        entry = agent.compact()
        assert entry is not None and entry["trigger"] == "manual" and compaction_trigger(entry) == "manual"
        progress = [e for e in seen if isinstance(e, ev.CompactionProgress)]
        assert progress and progress[-1].tokens > 0 and progress[-1].reason == "manual"
        assert last_compaction_note(agent.session.compactions()).startswith("last compaction: manual, ")


def test_a_run_can_leave_its_after_run_compaction_to_the_idle_kernel():
    with FakeProviderServer() as server:
        agent = _agent(server)
        _fill(agent, server, 5)  # well over the 3,000-token threshold, and no compaction made
        assert not agent.session.compactions() and server.summary_calls == 0
        server.enqueue_text("Done.")
        assert agent.prompt("One more?").error is None  # the default: the budget is checked at the start and the end
        triggers = [compaction_trigger(c) for c in agent.session.compactions()]
        assert triggers and set(triggers) == {"foreground"}

        other = _agent(server)  # the same session left to the idle kernel: the same compaction, made idle
        _fill(other, server, 5)
        idle = other.compact(reason="idle")
        assert idle is not None and idle["trigger"] == "idle"
        assert set(idle) == set(agent.session.compactions()[0])


def test_older_entries_without_a_trigger_read_as_manual_or_foreground():
    assert compaction_trigger({"type": "compaction", "cellId": "c1"}) == "manual"
    assert compaction_trigger({"type": "compaction"}) == "foreground"
    assert compaction_trigger({"type": "compaction", "trigger": "overflow"}) == "overflow"
    assert last_compaction_note([]) == ""
    note = last_compaction_note([{"type": "compaction", "trigger": "idle", "timestamp": "2026-12-02T12:51:03.120Z"}])
    assert note == "last compaction: idle, 2026-12-02 12:51:03 UTC"
