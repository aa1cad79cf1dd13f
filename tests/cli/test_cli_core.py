"""``ipyagent inspect`` and ``ipyagent compact --dry-run``: JSON fields, text output, errors on
stderr with a non-zero exit."""

from __future__ import annotations

import argparse
import json
import re
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


# ---- the budget from the session's stored settings, names, compactions off the path ---------------


def stored_notebook(tmp_path, settings, name="lesson"):
    from ipyagent.store.ipynb import new_notebook, write_notebook, write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions, StoredSession

    header, entries = generate_session(5, 400)
    path = tmp_path / "nb.ipynb"
    write_notebook(path, write_sessions_into_notebook(new_notebook(), NotebookSessions(
        name, {name: StoredSession(header, entries[-1]["id"], settings, entries)})))
    return path, Session(header, entries)


SMALL_WINDOW = {"model": "openai:gpt-4.1-mini", "context_window": 4300,
                "compaction": {"reserve_tokens": 1400, "keep_recent_tokens": 460, "enabled": True}}


def test_inspect_uses_the_stored_reserve_with_a_window_given_on_the_command_line(capsys, tmp_path):
    path, session = stored_notebook(tmp_path, SMALL_WINDOW)
    code, out, _ = run(capsys, "inspect", path, "--context-window", 4300)
    assert code == 0 and "compacts above 2,900 (reserve 1,400)" in out and "-12,084" not in out
    budget = json.loads(run(capsys, "inspect", path, "--context-window", 4300, "--json")[1])["budget"]
    assert budget["threshold"] == 2900 and budget["reserve_tokens"] == 1400 and budget["keep_recent_tokens"] == 460
    assert budget["window_source"] == "--context-window"
    assert budget["would_compact"] == (session.context_tokens() > 2900)
    budget = json.loads(run(capsys, "inspect", path, "--context-window", 9000, "--reserve-tokens", 100,
                            "--json")[1])["budget"]
    assert budget["threshold"] == 8900  # an option given beats the stored setting


def test_inspect_without_a_window_shows_the_stored_one_and_the_session_name(capsys, tmp_path):
    path, _ = stored_notebook(tmp_path, SMALL_WINDOW)
    code, out, _ = run(capsys, "inspect", path)
    assert out.startswith(f"session 'lesson' {Session.from_file(path).header['id']}: 400 entries")
    assert "budget: " in out and "of 4,300 (stored with the session); compacts above 2,900" in out
    report = json.loads(run(capsys, "inspect", path, "--json")[1])
    assert report["session_name"] == "lesson" and report["budget"]["window_source"] == "stored with the session"
    # a dry-run compaction plans with the stored keep_recent_tokens too
    plan = json.loads(run(capsys, "compact", path, "--dry-run", "--json")[1])
    expected = Session.from_file(path).prepare_compaction(CompactionSettings(1400, 460))
    assert plan == expected.to_summary_dict()


def test_a_small_window_never_prints_a_negative_threshold(capsys, tmp_path):
    path, _ = stored_notebook(tmp_path, {"context_window": 4300})  # no budget set: derived from the window
    code, out, _ = run(capsys, "inspect", path)
    [budget_line] = [line for line in out.splitlines() if line.startswith("budget:")]
    assert code == 0 and "-12,084" not in out and not re.search(r"-\d", budget_line)
    assert ("compacts above 3,225 · reserve 1,075 (scaled to the 4,300-token window) · keep-recent 1,312 "
            "(scaled too)") in budget_line
    budget = json.loads(run(capsys, "inspect", path, "--json")[1])["budget"]
    assert budget["threshold"] == 3225 and budget["reserve_from"] == "scaled" and not budget["problem"]
    # Pi's values set by hand cannot work with this window: said once, and the scaled ones used
    code, out, _ = run(capsys, "inspect", path, "--reserve-tokens", 16384, "--keep-recent-tokens", 20000)
    [budget_line] = [line for line in out.splitlines() if line.startswith("budget:")]
    assert not re.search(r"-\d", budget_line) and "compacts above 3,225" in budget_line
    assert out.count("cannot work with a 4,300-token window") == 1
    path, _ = stored_notebook(tmp_path, dict(SMALL_WINDOW, compaction={"reserve_tokens": 1400, "enabled": False}))
    assert "automatic compaction is off" in run(capsys, "inspect", path, "--context-window", 100)[1]


def test_inspect_explains_compactions_off_the_current_path(capsys, tmp_path):
    from ipyagent.compaction.summarizer import ScriptedSummarizer, SummaryResponse

    header, entries = generate_session(5, 400)
    session = Session(header, entries)
    fork = session.path()[len(session.path()) // 3]["id"]
    session.branch(fork)  # the compactions after the fork stay on a branch left behind
    session.append_message({"role": "user", "content": "x " * 30000, "timestamp": 1})
    session.compact(ScriptedSummarizer(fn=lambda request: SummaryResponse("short")),
                    CompactionSettings(keep_recent_tokens=100))
    path = tmp_path / "s.jsonl"
    session.to_pi_jsonl(path)  # its last entry is the new compaction: Pi's leaf, and this one
    on_path = [e["id"] for e in session.compactions()]
    off_path = [e["id"] for e in session.entries if e["type"] == "compaction" and e["id"] not in on_path]
    assert len(off_path) >= 2 and len(on_path) >= 1
    report = json.loads(run(capsys, "inspect", path, "--json")[1])
    assert [c["id"] for c in report["compactions"]] == on_path and report["compactions_off_path"] == off_path
    out = run(capsys, "inspect", path)[1]
    assert (f"{len(on_path) + len(off_path)} compactions, {len(on_path)} on this path "
            f"(the other {len(off_path)} are on branches the leaf is not on") in out


# ---- the tiktoken note, help texts, --version ------------------------------------------------------


def test_tiktoken_missing_is_one_clear_sentence(capsys, monkeypatch, session_file):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    code, out, err = run(capsys, "inspect", session_file, "--estimator", "tiktoken")
    assert code == 0 and "RuntimeWarning" not in err and "Traceback" not in err
    assert err == ("ipyagent inspect: note: tiktoken is not installed, so tokens are estimated with chars/4 "
                   "instead (pip install tiktoken).\n")
    assert "tokens (tiktoken(fallback:chars4))" in out


def test_every_option_has_a_help_text_and_there_is_a_version():
    from ipyagent import __version__
    from ipyagent.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            assert action.help, f"ipyagent {name} {action.option_strings or action.dest} has no help text"
    done = subprocess.run([sys.executable, "-m", "ipyagent", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"ipyagent {__version__}\n"
