"""Pi JSONL import/export: byte-identical round trips and the v1 → v2 → v3 migrations (pi.md §5)."""

from __future__ import annotations

import itertools
import json

import pytest

from ipyagent.core import Session
from ipyagent.session.jsonl import (
    dump_pi_jsonl,
    parse_pi_jsonl,
    read_pi_jsonl,
    write_pi_jsonl,
)
from ipyagent.session.messages import convert_to_llm
from ipyagent.session.tokens import js_json, js_number
from support.builders import assistant, new_session, user
from support.sessiongen import generate_session

HEADER = '{"type":"session","version":3,"id":"0b5d3b7e-6a0b-4e7b-9d3c-1f2e3d4c5b6a","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/home/u/p"}\n'


def line(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def pi_text(header, entries) -> str:
    """The file as Pi writes it: one JSON.stringify line per object (numbers in JavaScript's
    text, which ``test_js_number_matches_javascript`` pins against node's output)."""
    return "".join(js_json(x) + "\n" for x in [header, *entries])


# String(x) in node 20 for each float.
JS_NUMBERS = [(0.000015, "0.000015"), (1.5e-7, "1.5e-7"), (1e21, "1e+21"), (1e16, "10000000000000000"),
              (2e20, "200000000000000000000"), (-0.00001, "-0.00001"), (0.0000465, "0.0000465"),
              (123.456, "123.456"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
              (1e-6, "0.000001"), (0.1 + 0.2, "0.30000000000000004"), (1.0, "1"), (-0.0, "0")]


@pytest.mark.parametrize("value, text", JS_NUMBERS)
def test_js_number_matches_javascript(value, text):
    assert js_number(value) == text
    assert js_json({"v": [value]}) == '{"v":[%s]}' % text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_pi_file_round_trips_byte_identical(seed):
    header, entries = generate_session(seed, 1500, p_unicode=0.3, p_image=0.05)
    text = pi_text(header, entries)
    h, e, report = parse_pi_jsonl(text)
    assert report.ok, report.summary()
    assert dump_pi_jsonl(h, e) == text
    assert Session(h, e).to_pi_jsonl() == text


def test_round_trip_through_files(tmp_path):
    header, entries = generate_session(7, 300)
    src = tmp_path / "a.jsonl"
    src.write_text(pi_text(header, entries), encoding="utf-8")
    h, e, report = read_pi_jsonl(src)
    assert report.ok and report.source == str(src)
    write_pi_jsonl(tmp_path / "b.jsonl", h, e)
    assert (tmp_path / "b.jsonl").read_bytes() == src.read_bytes()
    session = Session.from_file(src)
    session.to_pi_jsonl(tmp_path / "c.jsonl")
    assert (tmp_path / "c.jsonl").read_bytes() == src.read_bytes()


def test_unknown_fields_and_types_survive_in_order():
    text = HEADER + (
        '{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1772359201000,"cellId":"c-1"},"notebook":{"exec":3}}\n'
        '{"type":"future_kind","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-03-01T10:00:02.000Z","z":1,"a":[true,null]}\n'
    )
    h, e, report = parse_pi_jsonl(text)
    assert report.ok
    assert dump_pi_jsonl(h, e) == text


def test_pi_number_formatting_round_trips():
    # JSON.stringify writes 0.000015 (not 1.5e-05) and 1e+21; Pi files carry such costs.
    entry = ('{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z",'
             '"message":{"role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"input":5,"output":1,'
             '"cacheRead":100,"cacheWrite":0,"totalTokens":106,"cost":{"input":0.000015,"output":0.0000015,'
             '"cacheRead":0.00003,"cacheWrite":0,"total":0.0000465}},"stopReason":"stop","timestamp":1772359201000,'
             '"big":1e+21,"huge":1.5e+300,"tiny":1e-7,"mid":123456789012345680000,"neg":-0.00001}}\n')
    text = HEADER + entry
    h, e, report = parse_pi_jsonl(text)
    assert report.ok
    assert dump_pi_jsonl(h, e) == text


def test_line_separators_inside_strings_are_not_line_breaks():
    # JSON.stringify leaves U+2028, U+2029 and U+0085 unescaped; only "\n" ends a JSONL line.
    text = HEADER + line({"type": "message", "id": "aaaaaaaa", "parentId": None,
                          "timestamp": "2026-03-01T10:00:01.000Z",
                          "message": {"role": "user", "content": "a\u2028b\u2029c\x85d", "timestamp": 1}})
    h, e, report = parse_pi_jsonl(text)
    assert report.ok, report.summary()
    assert e[0]["message"]["content"] == "a\u2028b\u2029c\x85d"
    assert dump_pi_jsonl(h, e) == text


def test_blank_lines_and_crlf_are_tolerated():
    body = line({"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "t",
                 "message": {"role": "user", "content": "x", "timestamp": 1}})
    h, e, report = parse_pi_jsonl(HEADER + "\n   \n" + body.replace("\n", "\r\n"))
    assert report.ok and [x["id"] for x in e] == ["aaaaaaaa"]


def test_session_created_in_python_exports_as_pi_v3():
    session = new_session(user("hello"), assistant("hi", total=10))
    text = session.to_pi_jsonl()
    rows = [json.loads(x) for x in text.splitlines()]
    assert rows[0]["type"] == "session" and rows[0]["version"] == 3
    assert [r["id"] for r in rows[1:]] == [e["id"] for e in session.entries]
    again = Session.from_pi_jsonl(text)
    assert again.entries == session.entries and again.load_report.ok
    assert again.to_pi_jsonl() == text


V1 = [
    {"type": "session", "id": "v1-session", "timestamp": "2025-06-01T00:00:00.000Z", "cwd": "/p",
     "provider": "anthropic", "modelId": "claude-3-5-sonnet", "thinkingLevel": "off"},
    {"type": "message", "timestamp": "2025-06-01T00:00:01.000Z", "message": {"role": "user", "content": "one", "timestamp": 1}},
    {"type": "message", "timestamp": "2025-06-01T00:00:02.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "two"}], "stopReason": "stop", "timestamp": 2}},
    {"type": "message", "timestamp": "2025-06-01T00:00:03.000Z", "message": {"role": "user", "content": "three", "timestamp": 3}},
    # v1 indexes count the file's entries with the header at 0: index 3 is the "three" message.
    {"type": "compaction", "timestamp": "2025-06-01T00:00:04.000Z", "summary": "S", "firstKeptEntryIndex": 3,
     "tokensBefore": 50},
    {"type": "message", "timestamp": "2025-06-01T00:00:05.000Z",
     "message": {"role": "hookMessage", "customType": "ext", "content": "hook text", "display": True, "timestamp": 5}},
]


def test_v1_migrates_to_v3_with_a_linear_chain_and_kept_id():
    text = "".join(line(x) for x in V1)
    header, entries, report = parse_pi_jsonl(text)
    assert report.migrated_from == 1 and report.ok, report.summary()
    assert header["version"] == 3 and header["id"] == "v1-session"
    assert len(entries) == 5
    assert entries[0]["parentId"] is None
    for previous, entry in itertools.pairwise(entries):
        assert entry["parentId"] == previous["id"]
        assert len(entry["id"]) == 8
    compaction = entries[3]
    assert "firstKeptEntryIndex" not in compaction
    assert compaction["firstKeptEntryId"] == entries[2]["id"]  # the "three" message
    assert entries[4]["message"]["role"] == "custom"
    session = Session(header, entries)
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
             for m in session.build_context()]
    assert texts[0].startswith("The conversation history before this point was compacted")
    assert texts[1:] == ["three", "hook text"]
    # Exported as v3, re-imported without further migration.
    again_h, again_e, again_r = parse_pi_jsonl(session.to_pi_jsonl())
    assert again_r.migrated_from is None and again_e == entries


def test_v2_migrates_hook_message_to_custom_only():
    v2 = [
        {"type": "session", "version": 2, "id": "v2", "timestamp": "2025-06-01T00:00:00.000Z", "cwd": "/p"},
        {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "t",
         "message": {"role": "hookMessage", "customType": "x", "content": "c", "display": False, "timestamp": 1}},
        {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "t",
         "message": {"role": "user", "content": "u", "timestamp": 2}},
    ]
    header, entries, report = parse_pi_jsonl("".join(line(x) for x in v2))
    assert report.migrated_from == 2 and header["version"] == 3
    assert [e["id"] for e in entries] == ["aaaaaaaa", "bbbbbbbb"]
    assert entries[0]["message"]["role"] == "custom"
    assert convert_to_llm([entries[0]["message"]])[0] == {"role": "user", "content": [{"type": "text", "text": "c"}],
                                                          "timestamp": 1}


def test_v3_file_is_not_migrated():
    header, entries = generate_session(3, 50)
    _, _, report = parse_pi_jsonl(pi_text(header, entries))
    assert report.migrated_from is None
