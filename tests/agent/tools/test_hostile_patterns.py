"""Patterns that backtrack do not hang `grep`, `find` or `recall` (issue 19, section 3).

The patterns are the ones the issue found: nested quantifiers the old screen missed, and the
`error(.|\\s)*timeout` that models write by habit, which ran over 20 s on one 1,250-character log
line. Each tool call over 1 MB of text returns within 5 s (the issue's bound), with the result
saying when the pattern was searched for as words instead.
"""

from __future__ import annotations

import time

import pytest

from ipyagent import patterns
from ipyagent.agent.tools import ToolContext, get_tool
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.patterns import (
    MAX_EXPANSION,
    PatternInvalid,
    PatternTooCostly,
    compile_bounded,
    has_words,
    pattern_words,
)
from support.builders import assistant, call, new_session, tool_result, user

HOSTILE = [r"((a+))+b", r"(a|a)+b", r"(a|aa)+b", r"a*a*a*a*a*b", r".*.*.*.*.*b", r"((?:a+))+b",
           r"error(.|\s)*timeout"]
BOUND = 5.0  # seconds: the bound for each call
FELL_BACK = "searched for its words instead"
# what the result says of a pattern that backtracks: the regex engine's timeout, or re's count
TOO_COSTLY = {"regex": "The regular expression took longer than",
              "re": "The regular expression would take over 5,000,000 steps to search one line"}


@pytest.fixture(autouse=True, params=["regex", "re"])
def engine(request, monkeypatch):
    """The engine the tools search with: ``re`` is what a Pyodide kernel has (regex absent)."""
    if request.param == "re":
        monkeypatch.setattr(patterns, "_regex", None)
    return request.param

# one ordinary 1,250-character log line: an error, no timeout
LOG_LINE = ("2026-11-30T12:00:00.123Z ERROR worker-3 job=ingest-7781 status=failed "
            "error=ConnectionResetError(104, 'Connection reset by peer') retry=3 backoff=2.5s "
            "upstream=http://10.0.0.7:8080/api/v2/jobs/7781 " * 10)[:1250]
NEEDLES = ["aaaab", "error: connect timeout after 30 s"]  # what a working search of these finds


def megabyte() -> str:
    """1 MB of lines: the needles first, then runs of `a` and log lines, one after the other."""
    lines = list(NEEDLES)
    while sum(len(line) + 1 for line in lines) < 1 << 20:
        lines += ["a" * 1249, LOG_LINE]
    return "\n".join(lines)


def timed(tool: str, arguments: dict, context: ToolContext):
    """The call's result and the CPU seconds the process spent on it: what a backtracking search
    burns, whatever else the machine runs (a loaded machine stretches the clock, not this)."""
    start = time.process_time()
    out = get_tool(tool).run(arguments, context)
    return out, time.process_time() - start


def expected_needle(pattern: str) -> str:
    return NEEDLES[1] if "timeout" in pattern else NEEDLES[0]


@pytest.mark.parametrize("pattern", HOSTILE)
def test_grep_with_a_backtracking_pattern_returns_within_five_seconds(tmp_path, pattern):
    (tmp_path / "app.log").write_text(megabyte())
    out, seconds = timed("grep", {"pattern": pattern}, ToolContext(cwd=str(tmp_path)))
    assert seconds < BOUND, f"{pattern!r} took {seconds:.1f} s"
    assert not out.is_error
    assert f"app.log:{NEEDLES.index(expected_needle(pattern)) + 1}: {expected_needle(pattern)}" in out.text
    # said so exactly when it fell back
    assert (FELL_BACK in out.text) == ("pattern_fallback" in out.details)


def test_grep_says_it_searched_the_words_of_a_pattern_that_backtracks(tmp_path, engine):
    (tmp_path / "app.log").write_text(megabyte())
    out, seconds = timed("grep", {"pattern": r"error(.|\s)*timeout"}, ToolContext(cwd=str(tmp_path)))
    assert seconds < BOUND
    assert out.text.splitlines()[0] == f"app.log:2: {NEEDLES[1]}"  # the only line holding both words
    assert len([line for line in out.text.splitlines() if line.startswith("app.log:")]) == 1
    assert TOO_COSTLY[engine] in out.text
    assert "searched for its words instead: error, timeout (case-insensitive)" in out.text


def test_grep_refuses_to_compile_repeats_that_unroll_past_the_limit(tmp_path):
    (tmp_path / "notes.txt").write_text("aaaa\nbbbb\n")
    out, seconds = timed("grep", {"pattern": "((?:a{1000}){1000}){1000}"}, ToolContext(cwd=str(tmp_path)))
    assert seconds < BOUND
    assert not out.is_error and "notes.txt:1: aaaa" in out.text
    assert f"repeats expand to over {MAX_EXPANSION:,} characters" in out.text and FELL_BACK in out.text


def test_grep_still_reports_an_invalid_pattern(tmp_path):
    (tmp_path / "notes.txt").write_text("x\n")
    out = get_tool("grep").run({"pattern": "(unclosed"}, ToolContext(cwd=str(tmp_path)))
    assert out.is_error and out.text.startswith("Invalid regular expression '(unclosed'")


def test_find_with_a_backtracking_glob_returns_within_five_seconds(tmp_path):
    (tmp_path / ("a" * 200)).write_text("")
    (tmp_path / "aaaaab").write_text("")
    out, seconds = timed("find", {"pattern": "*a*a*a*a*a*b"}, ToolContext(cwd=str(tmp_path)))
    assert seconds < BOUND
    assert out.text.splitlines()[0] == "aaaaab"


@pytest.mark.parametrize("engine", ["re"], indirect=True)  # re counts steps; regex's bound is a timeout
def test_find_says_it_matched_the_words_of_a_glob_that_backtracks(tmp_path, engine):
    (tmp_path / ("a" * 200)).write_text("")
    (tmp_path / "aaaaab").write_text("")
    out = get_tool("find").run({"pattern": "*a*a*a*a*a*b"}, ToolContext(cwd=str(tmp_path)))
    assert not out.is_error
    assert FELL_BACK in out.text and FELL_BACK in out.details["pattern_fallback"]


def _compacted_with(text: str):
    s = new_session()
    s.append_message(user("Why did the ingest fail?"))
    s.append_message(assistant("Reading the log.", call("c1", "bash", command="cat app.log")))
    s.append_message(tool_result("c1", text, name="bash"))
    s.append_message(assistant("x" * 800))
    s.append_message(user("y" * 800))
    s.append_message(assistant("z" * 800))
    summarizer = ScriptedSummarizer(fn=lambda request: "## Goal\nwork" if request.kind == "history" else "prefix")
    s.compact(summarizer, CompactionSettings(keep_recent_tokens=60))
    assert s.summarized_entries()
    return s


@pytest.mark.parametrize("pattern", HOSTILE)
def test_recall_with_a_backtracking_pattern_returns_within_five_seconds(pattern):
    session = _compacted_with(megabyte())
    out, seconds = timed("recall", {"query": pattern}, ToolContext(history=session))
    assert seconds < BOUND, f"{pattern!r} took {seconds:.1f} s"
    assert not out.is_error
    assert (FELL_BACK in out.text) == out.text.startswith("The regular expression")


def test_recall_says_it_searched_the_words_of_a_pattern_that_backtracks(engine):
    session = _compacted_with("\n".join([LOG_LINE] * 800))
    session_needle = _compacted_with("\n".join([LOG_LINE] * 800 + [NEEDLES[1]]))  # the log lines come first
    out, seconds = timed("recall", {"query": r"error(.|\s)*timeout"}, ToolContext(history=session_needle))
    assert seconds < BOUND
    assert out.text.startswith(TOO_COSTLY[engine])
    assert "searched for its words instead: error, timeout (case-insensitive)" in out.text
    assert "toolResult bash" in out.text and "connect timeout" in out.text  # the entry holding both words
    out, _ = timed("recall", {"query": r"error(.|\s)*timeout"}, ToolContext(history=session))
    assert out.text.startswith(TOO_COSTLY[engine])  # no entry holds both words
    assert "No entry holds every word" in out.text


def test_an_ordinary_pattern_is_still_a_regular_expression():
    session = _compacted_with(megabyte())
    out = get_tool("recall").run({"query": r"connect \w+ after \d+ s"}, ToolContext(history=session))
    assert "connect timeout after 30 s" in out.text and FELL_BACK not in out.text


# ---- the helper ----------------------------------------------------------------------------------


def test_the_words_of_a_pattern_leave_out_escapes_and_counts():
    assert pattern_words(r"error(.|\s)*timeout") == ["error", "timeout"]
    assert pattern_words(r"((a+))+b") == ["a", "b"]
    assert pattern_words(r"\d{3}-Foo\.py") == ["foo", "py"]
    assert has_words("Error: connect TIMEOUT", ["error", "timeout"])
    assert not has_words("anything", [])


def test_a_backtracking_search_raises_instead_of_running_on():
    pattern = compile_bounded(r"(a|aa)+b")
    with pytest.raises(PatternTooCostly) as raised:
        pattern.search("a" * 5000)
    assert "backtracks" in raised.value.reason
    with pytest.raises(PatternTooCostly):  # the budget of this call is spent: the next search raises at once
        pattern.search("ab")
    assert compile_bounded(r"(a|aa)+b").search("aab") is not None


def test_invalid_and_oversized_patterns():
    with pytest.raises(PatternInvalid):
        compile_bounded("(unclosed")
    with pytest.raises(PatternTooCostly):
        compile_bounded("(a{60000}){60000}")
    assert compile_bounded(r"\d{1,65535}").search("123") is not None


def test_without_regex_a_long_pattern_is_refused_before_it_compiles(engine):
    long = "a" * 1001
    if engine == "regex":
        assert compile_bounded(long).search(long) is not None
        return
    with pytest.raises(PatternTooCostly) as raised:
        compile_bounded(long)
    assert "longer than 1,000 characters" in raised.value.reason


def test_without_regex_the_count_of_ways_decides_before_the_search():
    """The count grows with the line: a nested repeat searches a short line and refuses a long one
    without starting; an ordinary pattern is counted only from where its literal start occurs."""
    import re

    nested = compile_bounded(r"(a|aa)+b", engine=re)
    assert nested.search("aab") is not None
    with pytest.raises(PatternTooCostly):
        nested.search("a" * 60)
    ordinary = compile_bounded(r"connect \w+ after \d+ s", engine=re)
    assert ordinary.search(LOG_LINE + "connect timeout after 30 s") is not None
    assert patterns.search_steps(re._parser.parse(r"a*a*b"), 9) == 100.0
    assert patterns.search_steps(re._parser.parse(r"(a+)+b"), 2000) is None
