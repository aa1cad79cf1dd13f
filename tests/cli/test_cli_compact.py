"""``ipyagent compact FILE`` for real: the summary comes from a model over loopback HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ipyagent import Session
from ipyagent.session.messages import tool_call_block, tool_result_message, user_message
from ipyagent.testing import FakeProviderServer


def write_session(path) -> Session:
    session = Session()
    for i in range(12):
        session.append_message(user_message(f"step {i}: " + "please look " * 40))
        session.append_message({"role": "assistant", "content": [tool_call_block(f"c{i}", "read", {"path": f"src/m{i}.py"})],
                                "usage": {"input": 0, "output": 0}, "stopReason": "toolUse", "timestamp": 1})
        session.append_message(tool_result_message(f"c{i}", "read", "code " * 300))
    session.to_pi_jsonl(path)
    return session


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ipyagent", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_compact_writes_a_compaction_from_the_summary_model(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path)
    with FakeProviderServer() as server:
        server.enqueue_summary("## Goal\nRead the modules.\n\n## Progress\n### Done\n- [x] read m0..m9")
        env = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-test-cli-123"}
        done = run_cli("compact", str(path), "--summary-model", "openai:gpt-4.1-mini", "--keep-recent-tokens", "400",
                       "--json", env=env)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert server.summary_calls == 1
        assert result["tokens_after"] < result["tokens_before"]
    compacted = Session.from_file(path)
    entry = compacted.compactions()[-1]
    assert entry["summary"].startswith("## Goal\nRead the modules.")
    assert "<read-files>\nsrc/m0.py" in entry["summary"]
    assert entry["firstKeptEntryId"] == result["first_kept_entry_id"]
    assert "sk-test-cli-123" not in path.read_text()


def test_compact_without_a_model_fails_clearly(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path)
    before = path.read_text()
    env = {k: v for k, v in os.environ.items() if k != "IPYAGENT_MODEL"}
    done = subprocess.run([sys.executable, "-m", "ipyagent", "compact", str(path), "--keep-recent-tokens", "400"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "no summary model" in done.stderr
    assert path.read_text() == before


def test_compact_reports_a_summariser_error_and_keeps_the_file(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path)
    before = path.read_text()
    with FakeProviderServer(api_key="sk-right") as server:
        env = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-wrong"}
        done = run_cli("compact", str(path), "--summary-model", "openai:gpt-4.1-mini", "--keep-recent-tokens", "400",
                       env=env)
    assert done.returncode != 0
    assert "Summarization failed" in done.stderr and "401" in done.stderr
    assert "sk-wrong" not in done.stderr and "Traceback" not in done.stderr
    assert path.read_text() == before
