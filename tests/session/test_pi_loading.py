"""Damaged Pi session files load the way Pi's own ``SessionManager`` loads them, where Pi reads them.

The oracle is Pi's npm package (``tests/oracle``, ``pi_load.mjs``): for each file it reports the
entries Pi indexes, its leaf and its root→leaf path. On the damage Pi reads — an entry written
twice under one id (Pi uses the last), a parent that is gone (the child is a root with its
``parentId`` as written), lines that are not JSON, assistant content as a string, a toolResult
without ``toolCallId``, a ``model_change`` without ``modelId``, an entry type of a Pi fork,
Windows line ends, blank lines — ipyagent indexes the same ids and builds the same path. Where
ipyagent deliberately differs (``docs/pi-differences.md``, "Reading damaged session files") the
test pins the difference.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from support.corrupt import corrupt_pi_file
from support.pi_oracle import ORACLE, ensure_oracle, run_oracle

PI_READS = ("duplicate", "missing_parent", "pi_accepts", "crlf", "blank")


def pi_load(files: list[Path]) -> list[dict]:
    ensure_oracle()
    stdin = "".join(json.dumps({"file": str(f)}) + "\n" for f in files)
    proc = subprocess.run(["node", str(ORACLE / "pi_load.mjs")], input=stdin, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["file"] for a in answers] == [str(f) for f in files]
    errors = [a for a in answers if "error" in a]
    assert not errors, errors[0]["error"]
    return [a["result"] for a in answers]


@pytest.mark.slow
def test_damage_pi_reads_is_read_as_pi_reads_it(tmp_path):
    files = []
    for seed in range(40):
        data, _ = corrupt_pi_file(seed, n_entries=60, kinds=PI_READS)
        files.append(tmp_path / f"{seed:02d}.jsonl")
        files[-1].write_bytes(data)
    for f, pi in zip(files, pi_load(files)):
        session = Session.from_file(f)
        assert set(pi["ids"]) == {e["id"] for e in session.entries}, f  # Pi lists both copies of a duplicate
        assert pi["leaf"] == session.leaf_id, f
        assert pi["branch"] == [e["id"] for e in session.path()], f
        assert pi["header_id"] == session.header["id"], f
        # what Pi uses of a duplicate id is the last copy; ipyagent keeps the first copy as a set-aside line
        assert len(pi["ids"]) == len(session.entries) + sum(
            "duplicate id" in item["reason"] for item in session.set_aside), f


def test_lines_that_are_not_json_are_skipped_by_both(tmp_path):
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    user = {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1}}
    f = tmp_path / "s.jsonl"
    f.write_text("not json at all\n" + json.dumps(header) + "\n{\"type\":\n" + json.dumps(user) + "\n[REDACTED]\n",
                 encoding="utf-8")
    [pi] = pi_load([f])
    session = Session.from_file(f)
    assert pi == {"entries": 1, "ids": ["aaaaaaaa"], "leaf": "aaaaaaaa", "branch": ["aaaaaaaa"], "header_id": "s"}
    assert [e["id"] for e in session.entries] == ["aaaaaaaa"] and len(session.set_aside) == 3


@pytest.mark.parametrize("damage", ["no_header", "deep", "bad_bytes"])
def test_where_ipyagent_differs_on_purpose(tmp_path, damage):
    data, _ = corrupt_pi_file(7, n_entries=30, kinds=(damage,))
    f = tmp_path / "s.jsonl"
    f.write_bytes(data)
    [pi] = pi_load([f])
    session = Session.from_file(f)
    if damage == "no_header":  # Pi starts an empty session instead; ipyagent makes a header, loads every entry
        assert pi["entries"] == 0 and pi["leaf"] is None
        assert len(session.entries) == 30 and session.load_report.problems[0].kept
    elif damage == "deep":  # Pi indexes the line of nested lists as an entry without an id; ipyagent sets
        # it (and the entry nested 300 levels deep) aside as text
        assert None in pi["ids"] and len(pi["ids"]) == 32
        assert len(session.entries) == 30 and len(session.set_aside) == 2
    else:  # Pi reads a line with a bad byte as U+FFFD; ipyagent sets the line aside and keeps its bytes
        assert pi["entries"] == 30
        lost = [item for item in session.set_aside if "UTF-8" in item["reason"]]
        assert lost and len(session.entries) + len(session.set_aside) >= 30
        assert all("raw_base64" in item for item in lost)


def test_usage_without_cache_fields_counts_them_as_zero_where_pi_gets_nan(tmp_path):
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    rows = [header,
            {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
             "message": {"role": "user", "content": "one two three four", "timestamp": 1}},
            {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "2026-01-01T00:00:02.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "stopReason": "stop",
                         "usage": {"input": 100, "output": 20}, "timestamp": 2}},  # no cacheRead/cacheWrite/total
            {"type": "message", "id": "cccccccc", "parentId": "bbbbbbbb", "timestamp": "2026-01-01T00:00:03.000Z",
             "message": {"role": "user", "content": "and more", "timestamp": 3}}]
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    [pi] = run_oracle([{"file": str(f), "reserveTokens": 1, "keepRecentTokens": 1}])
    assert pi["tokens_before"] is None  # JSON.stringify(NaN): undefined + undefined in Pi's sum
    session = Session.from_file(f)
    assert session.context_tokens() == 120 + 2  # input + output, then "and more" estimated
    plan = session.prepare_compaction(CompactionSettings(reserve_tokens=1, keep_recent_tokens=1))
    assert plan is not None and plan.tokens_before == 122
