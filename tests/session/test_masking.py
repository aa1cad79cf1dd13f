"""Masking, the second way to forget: old tool results hidden behind a placeholder through Pi 1.6's
``context_edit`` entries (``Session.mask`` / ``unmask``, ``Agent.auto_mask_turns``), with ``recall``
returning them. In a real kernel, and Pi 1.6.0 loading the export: tests/kernel/test_kernel_masking.py."""

from __future__ import annotations

import pytest

from ipyagent import AgentLoop
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.session.entries import compaction_entry
from ipyagent.session.messages import text_of
from ipyagent.session.tree import SessionError
from ipyagent.testing import FakeProviderServer
from support.builders import assistant, call, new_session, tool_result, user

BIG = "row,value\n" + "".join(f"{i},{i * i}\n" for i in range(2000))


def three_reads() -> Session:
    s = new_session()
    for k in range(3):
        s.append_message(user(f"read part {k}"))
        s.append_message(assistant("", call(f"c{k}", "read", path=f"part{k}.csv")))
        s.append_message(tool_result(f"c{k}", BIG))
        s.append_message(assistant(f"part {k} read"))
    return s


def tool_results(session: Session) -> list[dict]:
    return [e for e in session.path() if e["type"] == "message" and e["message"]["role"] == "toolResult"]


def test_mask_hides_the_result_keeps_the_call_and_counts_the_placeholder():
    s = three_reads()
    before = s.context_tokens()
    first = tool_results(s)[0]
    edit = s.mask(first["id"])
    assert edit["type"] == "context_edit" and edit["targetId"] == first["id"]
    [sent] = [m for m in s.build_context() if m.get("toolCallId") == "c0"]
    assert text_of(sent["content"]) == f"[tool result hidden, {len(BIG):,} chars: recall('{first['id']}') returns it]"
    assert first["message"]["content"][0]["text"] == BIG  # the entry itself is unchanged
    assert s.context_tokens() < before - len(BIG) // 4 + 50  # usage before the edit is stale: estimated
    assert s.mask(first["id"]) is None  # masked already
    assert s.masked_entries() == [first] and first in s.summarized_entries()  # recall searches it


def test_tool_results_before_the_last_turns_and_unmask():
    s = three_reads()
    written = s.mask_tool_results(1)
    assert [e["targetId"] for e in written] == [e["id"] for e in tool_results(s)[:2]]
    assert s.mask_tool_results(1) == []
    s.unmask(tool_results(s)[0]["id"])
    assert [e["id"] for e in s.masked_entries()] == [tool_results(s)[1]["id"]]
    s.unmask()
    assert s.masked_entries() == []
    assert [text_of(m["content"]) for m in s.build_context() if m["role"] == "toolResult"] == [BIG] * 3
    with pytest.raises(SessionError, match="not a tool result"):
        s.mask(s.path()[0]["id"])


def test_the_kept_end_of_a_split_turn_counts_as_a_turn():
    """After a compaction that kept the end of a turn and summarised its prompt (a split turn, as in
    the tour), ``--tool-results-before 1`` masks that remainder's results and keeps the latest turn's."""
    s = new_session()
    s.append_message(user("read the parts"))
    s.append_message(assistant("", call("c0", "read", path="part0.csv")))
    s.append_message(tool_result("c0", BIG))
    kept = s.append_message(assistant("", call("c1", "read", path="part1.csv")))
    s.append_message(tool_result("c1", BIG))
    s.append_message(assistant("both read"))
    s.append(compaction_entry("SUMMARY", kept["id"], 9000))
    s.append_message(user("and part 2"))
    s.append_message(assistant("", call("c2", "read", path="part2.csv")))
    s.append_message(tool_result("c2", BIG))
    s.append_message(assistant("part 2 read"))
    results = tool_results(s)
    written = s.mask_tool_results(1)
    assert [e["targetId"] for e in written] == [results[1]["id"]]  # c0's result is summarised, c2's is the latest turn's
    assert [e["targetId"] for e in s.mask_tool_results(0)] == [results[2]["id"]]


def test_recall_returns_a_masked_result_in_full():
    from ipyagent.agent.tools.builtin.recall import RecallTool
    from ipyagent.agent.tools.tool import ToolContext

    s = three_reads()
    target = tool_results(s)[1]
    s.mask(target["id"])
    out = RecallTool().run({"entry_id": target["id"]}, ToolContext(cwd=".", namespace={}, history=s))
    assert not out.is_error and "1500,2250000" in out.text and "hidden" not in out.text


def test_automatic_masking_makes_room_before_a_summary_is_asked_for():
    with FakeProviderServer() as server:
        server.register("fake")
        config = RunConfig(model="fake:test-model", context_window=24_000, tool_approval="auto",
                           compaction=CompactionSettings(4000, 2000), auto_mask_turns=1)
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, namespace={"BIG": BIG}, sleep=lambda s: None,
                          providers=server.providers)
        for k in range(4):
            server.enqueue_tool_call("python", {"code": "print(BIG)"})
            server.enqueue_text(f"printed it ({k})")
            agent.prompt(f"print the table ({k})")
        summaries = server.summary_calls
    path = agent.session.path()
    assert any(e["type"] == "context_edit" for e in path)
    assert summaries == 0 and not any(e["type"] == "compaction" for e in path)  # no model call was needed
