"""``%agent mask`` in a real kernel: a masked tool result is gone from the next request and its
placeholder is there, ``recall`` returns it, and Pi 1.6.0 loading the exported session hides it too."""

from __future__ import annotations

import json
import re

import pytest

from ipyagent.bridge.headless import execute_notebook
from ipyagent.testing.specs import Reply, ToolCallSpec
from kernel_support import SETUP, fake_provider, notebook, path_of
from support.outputs import outputs_text
from support.pi_oracle import run_oracle

pytestmark = pytest.mark.kernel  # every test here starts a kernel

BIG = "row,value\n" + "".join(f"{i},{i * i}\n" for i in range(2000))


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
