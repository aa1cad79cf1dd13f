"""``ipyagent probe`` / ``%agent probe``: questions from the summarised-away part, three ways of
answering (full history, compacted, compacted + recall), a judge's grades, a table per kind and
the tokens per way. Against the fake provider (real HTTP), scripted with ``ProbeScript``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ipyagent.agent.probe.probe_prompts import (
    ANSWER_SYSTEM,
    JUDGE_SYSTEM,
    KINDS,
    QUESTIONS_SYSTEM,
    parse_grade,
    parse_questions,
    probe_request_kind,
)
from ipyagent.agent.probe.runner import (
    PROBE_CUSTOM_TYPE,
    WAYS,
    ProbeError,
    ProbeReport,
    ProbeRunner,
    RecordedResponses,
    recompact,
)
from ipyagent.agent.replayer import ReplayDivergence
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.store.chunks import assemble
from ipyagent.testing import FakeProviderServer, ProbeScript, Reply
from ipyagent.testing.accounting import default_summary_detector
from kernel_support import SETUP, fake_provider, notebook
from support.builders import assistant, call, new_session, tool_result
from support.builders import user as _user
from support.outputs import outputs_text

QUESTIONS = [
    {"kind": "recall", "question": "Which port does the server listen on?", "answer": "8042"},
    {"kind": "artifact", "question": "Which variable holds the parsed log?", "answer": "log_frame"},
    {"kind": "continuation", "question": "What was the next step?", "answer": "add a health check"},
    {"kind": "decision", "question": "Why gunicorn instead of uvicorn?", "answer": "uvicorn crashed on reload"},
]


def user(text: str, **extra) -> dict:
    return {**_user(text), **extra}


def summarizer(text: str = "## Goal\nRun the web server.") -> ScriptedSummarizer:
    return ScriptedSummarizer(fn=lambda request: text if request.kind == "history" else "prefix")


def session_with_history():
    s = new_session()
    s.append_message(user("Start the web server.", executionCount=3))
    s.append_message(assistant("Trying uvicorn first.", call("c1", "bash", command="uvicorn app:app --reload")))
    s.append_message(tool_result("c1", "Traceback (most recent call last):\n" + "  File \"uvicorn/x.py\", line 1\n" * 120
                                 + "RuntimeError: uvicorn crashed on reload", name="bash", is_error=True))
    s.append_message(assistant("We use gunicorn because uvicorn crashed on reload.",
                               call("c2", "python", code="port = 8042\nlog_frame = parse('server.log')")))
    s.append_message(tool_result("c2", "(no output)", name="python"))
    s.append_message(assistant("The server listens on port 8042; next we add a health check. " + "x" * 600))
    s.append_message(user("Now the docs " + "d" * 600, executionCount=4))
    s.append_message(assistant("Docs done. " + "y" * 600))
    return s


def compacted():
    s = session_with_history()
    s.compact(summarizer(), CompactionSettings(keep_recent_tokens=200))
    return s


# ---- prompts and parsers -----------------------------------------------------------------------


def test_each_request_kind_is_recognised_on_both_wire_protocols():
    for kind, system in (("questions", QUESTIONS_SYSTEM), ("answer", ANSWER_SYSTEM), ("judge", JUDGE_SYSTEM)):
        openai = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "x"}]}
        anthropic = {"system": [{"type": "text", "text": system}], "messages": [{"role": "user", "content": "x"}]}
        assert probe_request_kind(openai) == probe_request_kind(anthropic) == kind
        assert not default_summary_detector(openai)  # never mistaken for a summariser request
    assert probe_request_kind({"messages": [{"role": "user", "content": "hi"}]}) is None


def test_questions_and_grades_are_parsed_leniently_and_checked():
    reply = ("Here you go:\n```json\n" + json.dumps(
        [*QUESTIONS, {"kind": "recall", "question": "second", "answer": 1}, {"kind": "gossip", "question": "?",
                                                                           "answer": "x"}, {"kind": "recall"}, "junk"])
             + "\n```")
    parsed = parse_questions(reply, per_kind=1)
    assert [q.kind for q in parsed] == list(KINDS)
    assert [q.reference for q in parse_questions(reply, per_kind=2) if q.kind == "recall"] == ["8042", "1"]
    assert parse_questions("no JSON at all", 2) == []
    assert parse_grade('{"score": 4, "reason": "close"}') == (4, "close")
    assert parse_grade('```\n{"score": 9}\n```')[0] == 5
    assert parse_grade("Score: 3 — partly right")[0] == 3
    assert parse_grade("I cannot grade this")[0] is None


# ---- the runner --------------------------------------------------------------------------------


def run_probe(session, script, **kwargs) -> tuple[ProbeReport, FakeProviderServer]:
    with FakeProviderServer(policy=script) as server:
        server.register("fake")
        report = ProbeRunner(session, model="fake:answerer", judge="fake:judge", per_kind=1, sleep=lambda s: None,
                             **kwargs, providers=server.providers).run()
    return report, server


def test_the_probe_asks_answers_three_ways_and_grades_each_answer():
    s = compacted()
    hidden = {e["id"] for e in s.summarized_entries()}
    script = ProbeScript(QUESTIONS)
    report, server = run_probe(s, script)
    # questions: one request to the judge model, from the summarised-away transcript only
    [asked] = script.seen["questions"]
    assert "uvicorn crashed on reload" in asked and "Docs done" not in asked
    models = [r.body["model"] for r in server.requests]
    assert models[0] == "judge" and models.count("judge") == 1 + 3 * len(QUESTIONS)
    # three answers per question; recall offered only on the third way, and used there
    answers = script.seen["answer"]
    assert len({a.question for a in answers}) == len(QUESTIONS)
    for item in report.items:
        assert set(item.answers) == set(WAYS)
        assert item.answers["recall"].recalls >= (0 if item.answers["compacted"].score == 5 else 1)
        assert all(a.score is not None and a.usage["input"] > 0 for a in item.answers.values())
    offered = {a.can_recall for a in answers}
    assert offered == {True, False}
    full = [a for a in answers if not a.can_recall and "Trying uvicorn first." in a.context]
    assert full and all("<summary>" not in a.context for a in full)  # the full history has no summary
    # the table: a row per kind and overall; the full history and recall know, the summary does not
    rows = {row[0]: row for row in report.rows()}
    assert list(rows) == [*KINDS, "overall"]
    assert rows["overall"][2:] == ["5.0", "2.5", "5.0"], report.text()
    # the summary alone lost the port and the next step; its artifact ledger kept log_frame (kernel
    # variables) and the uvicorn error (tool errors)
    assert [rows[k][3] for k in KINDS] == ["0.0", "5.0", "0.0", "5.0"]
    assert report.judge_calls == 3 * len(QUESTIONS)
    for way in WAYS:
        assert report.way_usage(way)["input"] > 0
    text = report.text()
    assert "full history" in text and "compacted + recall" in text and "judge" in text
    assert all(e in hidden for e in [s.get(i)["id"] for i in hidden])


def test_a_way_that_does_not_fit_is_reported_not_graded():
    s = compacted()
    script = ProbeScript(QUESTIONS[:1])
    with FakeProviderServer(policy=script, context_window=2600) as server:  # the full history overflows
        server.register("fake")
        report = ProbeRunner(s, model="fake:answerer", judge="fake:judge", per_kind=1, sleep=lambda s: None,
                             providers=server.providers).run()
    [item] = report.items
    assert item.answers["full"].error and "context" in item.answers["full"].error.lower()
    assert item.answers["full"].score is None and item.answers["recall"].score == 5
    assert report.rows()[0][2] == "–"


def test_nothing_summarised_means_no_probe_and_recompact_makes_one():
    s = session_with_history()
    with pytest.raises(ProbeError, match="Nothing has been summarised away"):
        ProbeRunner(s, model="fake:a").run()
    fresh = recompact(s, summarizer("## Goal\nFresh."), CompactionSettings(keep_recent_tokens=200))
    assert s.compactions() == [] and len(fresh.compactions()) == 1
    assert fresh.summarized_entries() and fresh.latest_summary().startswith("## Goal\nFresh.")


def test_a_recorded_probe_replays_offline_and_stops_where_it_departs():
    s = compacted()
    report, _ = run_probe(s, ProbeScript(QUESTIONS))
    responses = RecordedResponses(report.recording)
    again = ProbeRunner(s, model="fake:answerer", judge="fake:judge", per_kind=1, answer_provider=responses,
                        judge_provider=responses).run()  # no server: every answer comes from the recording
    assert again.rows() == report.rows() and again.token_rows() == report.token_rows()
    assert ProbeReport.from_dict(json.loads(json.dumps(report.to_dict()))).rows() == report.rows()
    junk = RecordedResponses([{"kind": "questions", "message": "not a message"}])
    with pytest.raises(ReplayDivergence, match="malformed"):
        ProbeRunner(s, model="fake:answerer", per_kind=1, answer_provider=junk, judge_provider=junk).run()
    short = RecordedResponses(report.recording[:5])
    with pytest.raises(ReplayDivergence, match="diverged"):
        ProbeRunner(s, model="fake:answerer", per_kind=1, answer_provider=short, judge_provider=short).run()


# ---- the command line --------------------------------------------------------------------------


def _cli(args: list[str], server: FakeProviderServer) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="fake-key")
    env.pop("IPYAGENT_MODEL", None)
    return subprocess.run([sys.executable, "-m", "ipyagent", "probe", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_cli_probe_runs_end_to_end_against_the_fake_server(tmp_path):
    s = compacted()
    path = tmp_path / "session.jsonl"
    s.to_pi_jsonl(path)
    before = path.read_text()
    script = ProbeScript(QUESTIONS)
    with FakeProviderServer(policy=script) as server:
        done = _cli([str(path), "--model", "openai:answerer", "--judge", "openai:judge", "--questions", "1",
                     "-o", str(tmp_path / "report.json")], server)
        assert done.returncode == 0, done.stderr
        kinds = [probe_request_kind(r.body) for r in server.requests]
    assert kinds.count("questions") == 1 and kinds.count("judge") == 12 and kinds.count("answer") >= 12
    assert "probe: writing the questions" in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Probe of compaction ") and "4 questions" in lines[0]
    table = {line.split()[0]: line.split()[1:] for line in lines if line.split() and line.split()[0] in (*KINDS, "overall")}
    assert table["overall"] == ["4", "5.0", "2.5", "5.0"]
    assert any(line.startswith("compacted + recall") for line in lines)
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["items"]) == 4 and report["model"] == "openai:answerer" and report["judge"] == "openai:judge"
    assert path.read_text() == before  # the probe never changes the file


def test_cli_probe_recompacts_with_another_summary_model_and_focus(tmp_path):
    s = session_with_history()  # never compacted: the probe compacts it afresh, in memory
    path = tmp_path / "session.jsonl"
    s.to_pi_jsonl(path)
    script = ProbeScript(QUESTIONS[:2], fallback=lambda body: Reply(text="## Goal\nServer work; port 8042.")
                         if default_summary_detector(body) else None)
    with FakeProviderServer(policy=script) as server:
        done = _cli([str(path), "--model", "openai:answerer", "--summary-model", "openai:cheap", "--focus",
                     "ports", "--keep-recent-tokens", "200", "--questions", "1", "--json"], server)
        assert done.returncode == 0, done.stderr
        summaries = [r for r in server.requests if r.kind == "summary"]
    assert summaries and {r.body["model"] for r in summaries} == {"cheap"}
    assert "ports" in json.dumps(summaries[0].body)
    report = json.loads(done.stdout)
    assert report["recompacted"] is True and report["focus"] == "ports"
    assert report["recording"][0]["kind"] == "summary:history"
    assert [i["answers"]["compacted"]["score"] for i in report["items"]] == [5, 5]  # both in the fresh summary/ledger


def test_cli_probe_recompacts_within_the_context_window_it_is_given(tmp_path):
    path = tmp_path / "session.jsonl"
    s = session_with_history()
    for i in range(8):  # ~4,000 tokens more to summarise
        s.append_message(user(f"Step {i}: " + "details of the step " * 100))
        s.append_message(assistant(f"Done with step {i}."))
    s.to_pi_jsonl(path)
    sent = {}
    for window in (None, 2000):
        script = ProbeScript(QUESTIONS[:1], fallback=lambda body: Reply(text="## Goal\nServer work.")
                             if default_summary_detector(body) else None)
        with FakeProviderServer(policy=script) as server:
            options = ["--context-window", str(window)] if window else []
            done = _cli([str(path), "--model", "openai:answerer", "--recompact", "--keep-recent-tokens", "200",
                         "--reserve-tokens", "500", "--questions", "1", "--json", *options], server)
            assert done.returncode == 0, done.stderr
            sent[window] = [json.dumps(r.body) for r in server.requests if r.kind == "summary"]
    # a 2,000-token window leaves the summariser 1,088 tokens of input: the history is cut to fit
    assert len(sent[2000]) == len(sent[None]) == 1
    assert len(sent[2000][0]) < len(sent[None][0]) / 2
    assert "Step 0: details" in sent[None][0]


def test_cli_probe_says_clearly_what_is_missing(tmp_path):
    path = tmp_path / "s.jsonl"
    compacted().to_pi_jsonl(path)
    with FakeProviderServer() as server:
        done = _cli([str(path)], server)
        assert done.returncode == 2 and "no model" in done.stderr
        done = _cli([str(path), "--model", "openai:m"], server)  # nothing scripted: the server says so
        assert done.returncode == 2 and "ipyagent probe:" in done.stderr and "Traceback" not in done.stderr


# ---- %agent probe in a real kernel, recorded and replayed ----------------------------------------


@pytest.mark.kernel
def test_agent_probe_in_a_kernel_is_stored_and_replays_offline(tmp_path):
    from ipyagent.bridge.headless import execute_notebook

    script = ProbeScript([{"kind": "recall", "question": "What is the vault code?", "answer": "OTTER-7731"}],
                         fallback=lambda body: None)
    cells = [SETUP + "%config Agent.keep_recent_tokens = 60",
             "%%agent\n" + "Some padding words. " * 20 + "Remember: the vault code is OTTER-7731.",
             "%%agent\nNow summarise the weather. " + "More padding. " * 40,
             "%compact", "%agent probe --questions 1"]
    with fake_provider(policy=script) as server:
        server.enqueue_text("Noted the vault code. " + "ok " * 80)
        server.enqueue_text("The weather is mild. " + "ok " * 80)
        server.enqueue_summary("## Goal\nChat about the weather.")
        out = execute_notebook(notebook(*cells), timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
    shown = outputs_text(out.nb["cells"][-1]["outputs"])
    assert "Mean score (0-5)" in shown and "compacted + recall" in shown, shown
    session = out.nb["metadata"]["ipyagent"]["sessions"]["default"]
    [probe] = [e for e in session["entries"] if e["type"] == "custom"]
    assert probe["customType"] == PROBE_CUSTOM_TYPE and probe["cellId"] == "cell-4"
    scores = {w: a["score"] for w, a in probe["data"]["items"][0]["answers"].items()}
    assert scores == {"full": 5, "compacted": 0, "recall": 5}
    html = next(o["data"]["text/html"] for o in out.nb["cells"][-1]["outputs"] if "text/html" in o.get("data", {}))
    assert "OTTER-7731" in html and "<script" not in html

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "IPYAGENT_MODEL")}
    saved = tmp_path / "recorded.ipynb"
    saved.write_text(json.dumps(out.nb))
    replayed_path = tmp_path / "replayed.ipynb"
    done = subprocess.run([sys.executable, "-m", "ipyagent", "run", str(saved), "--replay", "-o", str(replayed_path),
                           "--timeout", "60"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = json.loads(replayed_path.read_text())
    again = outputs_text(replayed["cells"][-1]["outputs"])
    assert again.split("Mean score")[1] == shown.split("Mean score")[1]
    entries = assemble(replayed["metadata"])["sessions"]["default"]["entries"]  # the labextension's layout
    assert [e["data"]["items"] for e in entries if e["type"] == "custom"][-1] == probe["data"]["items"]
