"""Replay: recorded responses drive a fresh run; budget, trigger and cut point run for real."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.compaction_oracle import CompactionRuling
from ipyagent.agent.ports import RunPorts
from ipyagent.agent.replayer import (
    CellRecording,
    Recording,
    ReplayCompactions,
    ReplayDescriber,
    ReplayProvider,
    ReplaySummarizer,
    ReplayToolResults,
    replay_ports,
    same_when_replayed,
    split_recorded_summary,
)
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools.tool import ToolOutput
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.hooks import HookRegistry
from ipyagent.providers.registry import ProviderRegistry
from ipyagent.session.messages import NOT_RUN_INTERRUPTED, user_message
from ipyagent.testing import FakeProviderServer

SETTINGS = CompactionSettings(reserve_tokens=900, keep_recent_tokens=500)
PROMPTS = [f"cell {i}: look at the data and count " + "carefully " * 25 for i in range(6)]


def offline() -> ProviderRegistry:
    """The providers of a replay: ``fake`` is a known name (``fake:recorder`` parses as when it was
    recorded), which no replayed cell may resolve to a live provider."""
    registry = ProviderRegistry.builtin()
    registry.register("fake", lambda **options: pytest.fail("a replayed cell asked for a live provider"))
    return registry


def config() -> RunConfig:
    return RunConfig(model="fake:recorder", context_window=3500, compaction=SETTINGS, tool_approval="auto")


def record(tmp_path) -> Session:
    session = Session(hooks=HookRegistry())
    summaries = iter(f"## Goal\nSummary number {i}." for i in range(100))
    with FakeProviderServer() as server:
        server.register("fake")
        agent = AgentLoop(session, config=config(), cwd=str(tmp_path), namespace={},
                          summarizer=ScriptedSummarizer(fn=lambda r: next(summaries)), sleep=lambda s: None,
                          providers=server.providers)
        for i, prompt in enumerate(PROMPTS):
            server.enqueue_tool_call("bash", {"command": f"echo run >> {tmp_path}/marker-{i}.txt; seq 1 150"})
            server.enqueue_text(f"Cell {i} counted 150 lines. " + "notes " * 40)
            assert agent.prompt(prompt, cellId=f"cell-{i}").error is None
    assert len(session.compactions()) >= 2
    return session


def replay(recorded: Session, tmp_path, *, prompts=PROMPTS, fallback=None, rerun=False):
    recording = Recording.from_entries(recorded.entries)
    session = Session(hooks=HookRegistry())
    notices: list[str] = []
    results = []
    for i, prompt in enumerate(prompts):
        cell = recording.cell(f"cell-{i}")
        tools = ReplayToolResults(cell, rerun=rerun, notice=notices.append)
        agent = AgentLoop(session, config=config(), cwd=str(tmp_path), namespace={},
                          provider=ReplayProvider(cell, fallback=fallback, notice=notices.append),
                          summarizer=ReplaySummarizer(cell, notice=notices.append), tool_results=tools,
                          sleep=lambda s: None, providers=offline())
        results.append(agent.prompt(prompt, cellId=f"cell-{i}"))
    return session, results, notices


def messages(session: Session) -> list[tuple]:
    out = []
    for entry in session.path():
        if entry["type"] == "message":
            m = entry["message"]
            out.append((m["role"], str(m.get("content"))))
        elif entry["type"] == "compaction":
            out.append(("compaction", entry["summary"]))
    return out


def test_replay_reproduces_the_session_offline_without_running_tools(tmp_path):
    recorded = record(tmp_path)
    for marker in tmp_path.glob("marker-*.txt"):
        marker.unlink()
    session, results, notices = replay(recorded, tmp_path)  # no server is running now
    assert all(r.error is None for r in results)
    assert notices == []
    assert messages(session) == messages(recorded)
    # same cut points: each compaction keeps the same message first
    kept = lambda s: [s.get(c["firstKeptEntryId"])["message"]["content"] for c in s.compactions()]
    assert [str(k) for k in kept(session)] == [str(k) for k in kept(recorded)]
    assert list(tmp_path.glob("marker-*.txt")) == []  # recorded tool calls were not re-executed


def test_a_changed_prompt_is_named_and_stops_without_a_live_provider(tmp_path):
    recorded = record(tmp_path)
    changed = list(PROMPTS)
    changed[2] = "cell 2: something else entirely"
    session, results, _ = replay(recorded, tmp_path, prompts=changed)
    assert results[0].error is None and results[1].error is None
    assert "Replay of cell cell-2 diverged" in results[2].error and "prompt" in results[2].error
    assert "No live provider" in results[2].error


def test_divergence_continues_with_a_live_provider_when_one_is_configured(tmp_path):
    recorded = record(tmp_path)
    changed = list(PROMPTS)
    changed[1] = "cell 1: a new question"
    with FakeProviderServer() as server:
        server.enqueue_text("a live answer")
        for _ in range(10):
            server.enqueue_text("more live answers")
        session, results, notices = replay(recorded, tmp_path, prompts=changed[:2], fallback=server.provider("openai"))
        assert results[1].text == "a live answer"
        assert any("cell-1 diverged" in n and "live provider" in n for n in notices)
        assert server.chat_calls == 1


def test_replay_tools_reruns_and_reports_differences(tmp_path):
    recorded = record(tmp_path)
    session, results, notices = replay(recorded, tmp_path, rerun=True)
    assert all(r.error is None for r in results)
    assert len(list(tmp_path.glob("marker-*.txt"))) == len(PROMPTS)
    for marker in tmp_path.glob("marker-*.txt"):
        assert marker.read_text() == "run\nrun\n"  # once recorded, once replayed
    assert notices == []  # `seq 1 150` prints the same thing again


def test_split_recorded_summary():
    text = "## Goal\nA\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request\nB\n\n<read-files>\na.py\n</read-files>"
    assert split_recorded_summary(text) == ("## Goal\nA", "## Original Request\nB")
    assert split_recorded_summary("## Goal\nonly") == ("## Goal\nonly", None)


def _replay_in_place(session: Session, tmp_path, prompts=PROMPTS, fallback=None) -> list:
    """Re-run every cell on the recorded session itself, following its recorded path."""
    recording = Recording.from_entries(session.path())
    session.follow(session.path())
    session.branch(None)
    results = []
    for i, prompt in enumerate(prompts):
        cell = recording.cell(f"cell-{i}")
        agent = AgentLoop(session, config=config(), cwd=str(tmp_path), namespace={},
                          provider=ReplayProvider(cell, fallback=fallback), summarizer=ReplaySummarizer(cell),
                          tool_results=ReplayToolResults(cell), sleep=lambda s: None, providers=offline())
        results.append(agent.prompt(prompt, cellId=f"cell-{i}"))
    session.follow(None)
    return results


def test_replaying_on_the_recorded_path_leaves_the_session_as_it_was(tmp_path):
    recorded = record(tmp_path)
    before, leaf = json.dumps(recorded.entries, sort_keys=True), recorded.leaf_id
    results = _replay_in_place(recorded, tmp_path)
    assert all(r.error is None for r in results)
    assert results[-1].new_entries and all(e in recorded.entries for r in results for e in r.new_entries)
    assert json.dumps(recorded.entries, sort_keys=True) == before  # same ids, nothing appended
    assert recorded.leaf_id == leaf
    assert len(recorded.compactions()) >= 2  # the recorded compactions were reused as well


def test_only_a_real_divergence_makes_a_new_branch(tmp_path):
    recorded = record(tmp_path)
    count = len(recorded)
    prompt_ids = [e["id"] for e in recorded.path() if e["type"] == "message" and e["message"]["role"] == "user"]
    changed = list(PROMPTS)
    changed[-1] = "cell 5: a question the recording never saw"
    with FakeProviderServer() as server:
        server.enqueue_text("a live answer")
        results = _replay_in_place(recorded, tmp_path, prompts=changed, fallback=server.provider("openai"))
    assert [r.error for r in results] == [None] * len(PROMPTS)
    new = recorded.entries[count:]
    assert [e["message"]["role"] for e in new if e["type"] == "message"] == ["user", "assistant"]
    # the new prompt is a sibling of the recorded one: a branch at the divergence, nothing copied
    assert new[0]["parentId"] == recorded.get(prompt_ids[-1])["parentId"]
    assert results[-1].text == "a live answer"


def _cell_with_an_unanswered_call() -> CellRecording:
    call = {"type": "toolCall", "id": "call-1", "name": "read", "arguments": {"path": "/etc/hostname"}}
    return CellRecording("c1", "read it", assistant_messages=[
        {"role": "assistant", "content": [call], "stopReason": "toolUse"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop"}])


@pytest.mark.parametrize("rerun", [False, True])
def test_a_recorded_call_without_a_result_is_never_run(rerun):
    notices: list[str] = []
    tools = ReplayToolResults(_cell_with_an_unanswered_call(), rerun=rerun, notice=notices.append)
    ran: list[str] = []

    def run() -> ToolOutput:
        ran.append("ran")
        return ToolOutput("the file's content")

    output = tools({"type": "toolCall", "id": "call-1", "name": "read", "arguments": {}}, run)
    assert ran == [] and tools.not_run == ["call-1"]
    assert output.text == NOT_RUN_INTERRUPTED and output.is_error
    assert len(notices) == 1 and "no result for tool call read (call-1)" in notices[0]
    assert "was not run" in notices[0]
    # a call the recording never saw (a live provider's, after a divergence) runs as usual
    assert tools({"type": "toolCall", "id": "live-7", "name": "read", "arguments": {}}, run).text == "the file's content"
    assert ran == ["ran"]


def test_a_replayed_prompt_is_the_recorded_one_when_its_typed_prompt_and_cell_are():
    from ipyagent.agent.replayer import same_when_replayed
    from ipyagent.session.entries import message_entry
    from ipyagent.session.messages import text_block, user_message

    def prompt(block: str, typed: str = "Why did it fail?", cell: str = "c7") -> dict:
        return message_entry(user_message([text_block(f"<notebook-activity>\n{block}\n</notebook-activity>"),
                                           text_block(typed)], cellId=cell, cellPrompt=typed))

    recorded = prompt("Out[6]: {'Ada': 21.4}")
    # the activity block describes the kernel now: a replay did not run the recorded tool calls
    assert same_when_replayed(recorded, prompt("Out[6]: '(not defined)'"))
    assert not same_when_replayed(recorded, prompt("Out[6]: {'Ada': 21.4}", typed="Something else?"))
    assert not same_when_replayed(recorded, prompt("Out[6]: {'Ada': 21.4}", cell="c8"))
    answer = {"role": "assistant", "content": [{"type": "text", "text": "a"}], "stopReason": "stop"}
    assert same_when_replayed(message_entry(answer), message_entry(dict(answer)))
    assert not same_when_replayed(message_entry(answer), message_entry(dict(answer, content=[])))


# ---- compactions follow the recording (agent/replayer.py ReplayCompactions) -------------------------
#
# The recording below scripts the provider's usage, so its budget is the same on every machine
# (whatever the system prompt and the tool list weigh): the first automatic attempt comes before
# the last call of cell 1 and is rejected (the summary came back empty, so it leaves no entry);
# the budget asks again after that call and compacts there (a split turn); cell 3 is a
# ``%compact`` cell; cell 2 and 4 are plain cells after them.

ORACLE_CONFIG = {"window": 3500, "reserve": 900, "keep": 500}


def oracle_config(window=3500, reserve=900, keep=500) -> RunConfig:
    return RunConfig(model="fake:recorder", context_window=window, tool_approval="auto",
                     compaction=CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep))


def _usage(total: int) -> dict:
    return {"usage": {"input": total - 20, "output": 20, "cacheRead": 0, "cacheWrite": 0}}


def record_with_a_rejected_attempt(tmp_path) -> tuple[Session, list[str]]:
    """The recorded session, and the leaves at which an automatic attempt was rejected."""
    session = Session(hooks=HookRegistry())
    summaries = iter([""] + [f"## Goal\nSummary number {i}." for i in range(100)])
    summarizer = ScriptedSummarizer(fn=lambda r: next(summaries))
    rejected: list[str] = []
    script = {  # cell -> (tool calls' usage, final answer's usage)
        0: ([1000], 1300), 1: ([1400, 1700, 2500], 2800), 2: ([1500], 1800), 4: ([1600], 1900)}
    with FakeProviderServer() as server:
        server.register("fake")
        agent = AgentLoop(session, config=oracle_config(), cwd=str(tmp_path), namespace={}, summarizer=summarizer,
                          sleep=lambda s: None, providers=server.providers)
        agent.subscribe(lambda e: rejected.append(session.leaf_id)
                        if isinstance(e, ev.CompactionEnd) and e.error and "empty" in e.error else None)
        for i in range(5):
            if i == 3:
                agent.compact("keep the counts", extra={"cellId": "cell-3"})
                continue
            calls, final = script[i]
            for k, total in enumerate(calls):
                server.enqueue_tool_call("bash", {"command": f"seq 1 {150 + k}"}, **_usage(total))
            server.enqueue_text(f"Cell {i} counted the lines. " + "notes " * 40, **_usage(final))
            assert agent.prompt(f"cell {i}: count the lines " + "carefully " * 10, cellId=f"cell-{i}").error is None
    return session, rejected


def replay_ports_of(agent: AgentLoop, cell: CellRecording, notices: list[str]) -> RunPorts:
    """What the notebook's ReplayController.attached gives one cell's run."""
    return replay_ports(cell, agent.ports, notice=notices.append)


def replay_recording_in_place(session: Session, tmp_path, config: RunConfig, *, oracle: bool = True) -> list[str]:
    recording = Recording.from_entries(session.path())
    session.follow(session.path(), same_when_replayed)
    session.branch(None)
    notices: list[str] = []
    for i in range(5):
        agent = AgentLoop(session, config=config, cwd=str(tmp_path), namespace={}, sleep=lambda s: None,
                          providers=offline())
        ports = replay_ports_of(agent, recording.cell(f"cell-{i}"), notices)
        if not oracle:
            ports = replace(ports, compaction_oracle=None)
        with agent.using(ports):
            if i == 3:
                agent.compact("keep the counts", extra={"cellId": "cell-3"})
            else:
                assert agent.prompt(f"cell {i}: count the lines " + "carefully " * 10,
                                    cellId=f"cell-{i}").error is None
    session.follow(None)
    return notices


def test_the_recording_holds_a_rejected_attempt_away_from_its_compactions(tmp_path):
    recorded, rejected = record_with_a_rejected_attempt(tmp_path)
    compactions = recorded.compactions()
    assert len(rejected) == 1 and [c.get("cellId") for c in compactions] == [None, "cell-3"]
    assert rejected[0] != compactions[0]["parentId"]  # the attempt was made elsewhere
    assert "split turn" in compactions[0]["summary"]


def test_a_rejected_attempt_is_skipped_and_the_recorded_compactions_are_made_again(tmp_path):
    recorded, _ = record_with_a_rejected_attempt(tmp_path)
    before, leaf = json.dumps(recorded.entries), recorded.leaf_id
    notices = replay_recording_in_place(recorded, tmp_path, oracle_config())
    assert notices == []
    assert json.dumps(recorded.entries) == before and recorded.leaf_id == leaf  # every entry was the recorded one


def test_without_the_oracle_the_rejected_attempt_takes_the_next_summary_and_the_replay_departs(tmp_path):
    recorded, _ = record_with_a_rejected_attempt(tmp_path)  # the defect the oracle fixes, shown
    count = len(recorded)
    replay_recording_in_place(recorded, tmp_path, oracle_config(), oracle=False)
    assert len(recorded) > count


@pytest.mark.parametrize("changed", [{"window": 3300}, {"window": 4000}, {"window": 3700, "keep": 300}])
def test_another_budget_still_compacts_exactly_where_the_recording_did(tmp_path, changed):
    recorded, _ = record_with_a_rejected_attempt(tmp_path)
    before, leaf = json.dumps(recorded.entries), recorded.leaf_id
    notices = replay_recording_in_place(recorded, tmp_path, oracle_config(**{**ORACLE_CONFIG, **changed}))
    assert notices == []
    assert json.dumps(recorded.entries) == before and recorded.leaf_id == leaf


def test_the_oracle_rules_from_the_followed_path(tmp_path):
    recorded, _ = record_with_a_rejected_attempt(tmp_path)
    path = recorded.path()
    recording = Recording.from_entries(path)
    automatic, manual = recorded.compactions()
    cell1, cell3 = recording.cell("cell-1"), recording.cell("cell-3")

    def oracle(cell):
        return ReplayCompactions(cell, ReplaySummarizer(cell), ReplayDescriber(cell), ReplayProvider(cell))

    recorded.follow(path, same_when_replayed)
    recorded.branch(automatic["parentId"])  # the recording compacted automatically next
    assert oracle(cell1).rule(recorded, manual=False) == CompactionRuling(True, automatic["firstKeptEntryId"])
    recorded.branch(path[path.index(automatic) - 2]["id"])  # where the rejected attempt was: not here
    assert oracle(cell1).rule(recorded, manual=False) == CompactionRuling(False)
    recorded.branch(manual["parentId"])  # a %compact cell's compaction is next: only that cell makes it
    assert oracle(cell1).rule(recorded, manual=False) == CompactionRuling(False)
    assert oracle(cell3).rule(recorded, manual=True) == CompactionRuling(True, manual["firstKeptEntryId"])
    assert oracle(cell1).rule(recorded, manual=True) is None
    recorded.branch(path[-1]["id"])  # the recording ends here without a compaction
    assert oracle(cell1).rule(recorded, manual=False) == CompactionRuling(False)
    diverged = oracle(cell1)
    diverged.provider.diverged = "the prompt changed"
    recorded.branch(automatic["parentId"])
    assert diverged.rule(recorded, manual=False) is None  # the live budget decides again
    recorded.append_message(user_message("a new question"))  # off the recorded path
    assert oracle(cell1).rule(recorded, manual=False) is None
    recorded.follow(None)
    recorded.branch(automatic["parentId"])
    assert oracle(cell1).rule(recorded, manual=False) is None  # nothing followed
