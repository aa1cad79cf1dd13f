"""``ipyagent inspect`` and ``ipyagent compact --dry-run``: JSON fields, text output, errors on
stderr with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ipyagent.cli import main
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.session.tokens import js_json
from support.sessiongen import generate_session


@pytest.fixture
def session_file(tmp_path):
    header, entries = generate_session(5, 400)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(js_json(x) + "\n" for x in [header, *entries]), encoding="utf-8")
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_json_fields(capsys, session_file):
    code, out, err = run(capsys, "inspect", session_file, "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    session = Session.from_file(session_file)
    assert report["session_id"] == session.header["id"]
    assert report["entries"] == len(session) == 400
    assert sum(report["entry_types"].values()) == 400
    assert report["entry_types"]["message:user"] == sum(
        1 for e in session.entries if e["type"] == "message" and e["message"]["role"] == "user")
    assert report["leaf"] == session.leaf_id and report["path_length"] == len(session.path())
    assert report["context_messages"] == len(session.build_context())
    assert report["context_tokens"] == session.context_tokens()
    assert report["estimator"] == "chars4"
    assert [c["id"] for c in report["compactions"]] == [c["id"] for c in session.compactions()]
    assert set(report["compactions"][0]) == {"id", "tokensBefore", "firstKeptEntryId", "fromHook"}
    assert report["problems"] == []
    assert "budget" not in report


def test_inspect_budget(capsys, session_file):
    code, out, _ = run(capsys, "inspect", session_file, "--json", "--context-window", 60000,
                       "--reserve-tokens", 10000)
    budget = json.loads(out)["budget"]
    tokens = Session.from_file(session_file).context_tokens()
    assert budget["context_window"] == 60000 and budget["threshold"] == 50000 and budget["reserve_tokens"] == 10000
    assert budget["percent"] == round(100 * tokens / 60000, 1)
    assert budget["would_compact"] == (tokens > 50000)


def test_inspect_text(capsys, session_file):
    code, out, err = run(capsys, "inspect", session_file, "--context-window", 200000)
    assert code == 0 and err == ""
    assert out.startswith("session ") and "400 entries" in out
    assert "context: " in out and "tokens (chars4)" in out and "budget: " in out
    assert out.count("\ncompaction ") == len(Session.from_file(session_file).compactions())


def test_inspect_reports_problems(capsys, tmp_path, session_file):
    broken = tmp_path / "broken.jsonl"
    lines = session_file.read_text(encoding="utf-8").splitlines(keepends=True)
    broken.write_text(lines[0] + "{not json\n" + "".join(lines[1:]), encoding="utf-8")
    code, out, err = run(capsys, "inspect", broken)
    assert code == 0 and "line 2" in err and "not valid JSON" in err
    code, out, err = run(capsys, "inspect", broken, "--json")
    assert any(p.startswith("line 2: not valid JSON") for p in json.loads(out)["problems"])


def test_compact_dry_run_json_is_the_plan_and_changes_nothing(capsys, session_file):
    before = session_file.read_bytes()
    code, out, err = run(capsys, "compact", session_file, "--dry-run", "--json", "--keep-recent-tokens", 2000)
    assert code == 0 and err == ""
    result = json.loads(out)
    plan = Session.from_file(session_file).prepare_compaction(CompactionSettings(keep_recent_tokens=2000))
    assert result == plan.to_summary_dict()
    assert set(result) == {"first_kept_entry_id", "is_split_turn", "tokens_before", "messages_to_summarize",
                           "turn_prefix_messages", "read_files", "modified_files", "previous_summary"}
    assert session_file.read_bytes() == before


def test_compact_dry_run_nothing_to_compact(capsys, session_file):
    code, out, _ = run(capsys, "compact", session_file, "--dry-run", "--json", "--keep-recent-tokens", 10**9)
    assert code == 0 and json.loads(out) == {"nothing_to_compact": True}
    code, out, _ = run(capsys, "compact", session_file, "--dry-run", "--keep-recent-tokens", 10**9)
    assert out.strip() == "nothing to compact"


def test_compact_dry_run_text(capsys, session_file):
    code, out, _ = run(capsys, "compact", session_file, "--dry-run", "--keep-recent-tokens", 2000)
    assert code == 0 and "first_kept_entry_id: " in out and "tokens_before: " in out


@pytest.mark.parametrize("command", [["inspect"], ["compact", "--dry-run", "--json"]])
def test_missing_file_is_an_error_on_stderr(capsys, tmp_path, command):
    code, out, err = run(capsys, command[0], tmp_path / "nope.jsonl", *command[1:])
    assert code == 2 and out == ""
    assert err.startswith(f"ipyagent {command[0]}: no such file: ")


def test_unreadable_path_is_an_error(capsys, tmp_path):
    code, out, err = run(capsys, "inspect", tmp_path)
    assert code == 2 and out == "" and "cannot read" in err


def test_bad_arguments_exit_non_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect"])
    assert exc.value.code == 2 and "file" in capsys.readouterr().err


def test_console_script_process(session_file, tmp_path):
    ok = subprocess.run([sys.executable, "-m", "ipyagent.cli", "compact", str(session_file), "--dry-run", "--json"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "first_kept_entry_id" in json.loads(ok.stdout)
    bad = subprocess.run([sys.executable, "-m", "ipyagent.cli", "inspect", str(tmp_path / "none.jsonl")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and "no such file" in bad.stderr
