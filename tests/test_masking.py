"""Masking, the second way to forget: old tool results hidden behind a placeholder through Pi 1.6's
``context_edit`` entries (``%agent mask`` / ``unmask``, ``Agent.auto_mask_turns``), with ``recall``
returning them, checked in a real kernel and against Pi 1.6.0 loading the exported file."""

from __future__ import annotations

import json
import re

import pytest
from conftest import assistant, call, new_session, tool_result, user
from kernel_support import SETUP, fake_provider, notebook, outputs_text, path_of
from test_pi_parity import run_oracle

from ipyagent import Agent
from ipyagent.agent.config import AgentConfig
from ipyagent.bridge.headless import execute_notebook
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.session.messages import text_of
from ipyagent.session.tree import SessionError
from ipyagent.testing import FakeProviderServer
from ipyagent.testing.specs import Reply, ToolCallSpec

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


def test_recall_returns_a_masked_result_in_full():
    from ipyagent.agent.tools.base import ToolContext
    from ipyagent.agent.tools.recall import RecallTool

    s = three_reads()
    target = tool_results(s)[1]
    s.mask(target["id"])
    out = RecallTool().run({"entry_id": target["id"]}, ToolContext(cwd=".", namespace={}, history=s))
    assert not out.is_error and "1500,2250000" in out.text and "hidden" not in out.text


def test_automatic_masking_makes_room_before_a_summary_is_asked_for():
    with FakeProviderServer() as server:
        server.register("fake")
        config = AgentConfig(model="fake:test-model", context_window=24_000, tool_approval="auto",
                             compaction=CompactionSettings(4000, 2000), auto_mask_turns=1)
        agent = Agent(Session(hooks=HookRegistry()), config=config, namespace={"BIG": BIG}, sleep=lambda s: None)
        for k in range(4):
            server.enqueue_tool_call("python", {"code": "print(BIG)"})
            server.enqueue_text(f"printed it ({k})")
            agent.prompt(f"print the table ({k})")
        summaries = server.summary_calls
    path = agent.session.path()
    assert any(e["type"] == "context_edit" for e in path)
    assert summaries == 0 and not any(e["type"] == "compaction" for e in path)  # no model call was needed


def test_masking_in_a_real_kernel_and_in_pi_16(tmp_path):
    """A masked result is gone from the next request and its placeholder is there; recall returns
    it; Pi 1.6.0 loading the exported session hides it too."""
    (tmp_path / "data.csv").write_text(BIG, encoding="utf-8")

    def policy(body: dict) -> object:
        found = re.search(r"recall\('([0-9a-f]+)'\) returns it", json.dumps(body))
        if found and '"name": "recall"' not in json.dumps(body["messages"]):  # not called yet
            return Reply(tool_calls=[ToolCallSpec("recall", {"entry_id": found.group(1)})])
        return "the last row is 1999,3996001"

    with fake_provider(policy=policy) as server:
        server.enqueue_tool_call("read", {"path": "data.csv"})
        server.enqueue_text("It has 2,000 rows.")
        nb = notebook(SETUP + "%config Agent.tool_approval = 'auto'",
                      "%%agent\nHow many rows does data.csv have?",
                      "%agent mask --tool-results-before 0",
                      "%%agent\nWhat is its last row?",
                      "%agent export --format pi -o " + str(tmp_path / "exported.jsonl"))
        run = execute_notebook(nb, timeout=180, cwd=str(tmp_path))
        assert run.ok, run.error
        chats = [r.body for r in server.requests if r.kind == "chat"]
    assert "masked 1 tool result" in outputs_text(run.nb["cells"][2]["outputs"])
    asked = json.dumps(chats[2]["messages"])
    assert "1999,3996001" not in asked and "[tool result hidden, " in asked  # gone, the placeholder there
    recalled = json.dumps(chats[3]["messages"][-1])
    assert "1500,2250000" in recalled  # recall's result: the masked content (its first 2,000 lines)
    session = run.nb["metadata"]["ipyagent"]["sessions"]["default"]
    assert any(e["type"] == "context_edit" for e in path_of(session))
    [pi] = run_oracle([{"op": "context", "file": str(tmp_path / "exported.jsonl")}])
    results = [m for m in pi["messages"] if m["role"] == "toolResult"]
    assert "[tool result hidden, " in json.dumps(results[0]) and "1999,3996001" not in json.dumps(results[0])
