"""The notebook store: metadata["ipyagent"] ∪ journal outputs, checked, merged, written back."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipyagent.core import Session
from ipyagent.display.journal_view import journal_bundle, transcript_markdown
from ipyagent.session.intake import MAX_ENTRY_CHARS, LoadReport
from ipyagent.session.jsonl import dump_pi_jsonl, parse_pi_jsonl
from ipyagent.store.ipynb import (
    NotebookError,
    dumps_notebook,
    lift_notebook,
    new_notebook,
    read_notebook,
    save_session_to_notebook_file,
    session_from_notebook_file,
    sessions_from_notebook,
    write_notebook,
    write_sessions_into_notebook,
)
from ipyagent.store.journal import JOURNAL_MIME, journal_outputs
from ipyagent.store.schema import NotebookSessions, SessionNotFound, StoredSession
from support.builders import REPO, chain
from support.sessiongen import generate_session

HEADER = {"type": "session", "version": 3, "id": "3f0c2b9e-0000-4000-a000-000000000001",
          "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/work"}


def metadata(entries, leaf=..., name="default", settings=None) -> dict:
    return {"version": 1, "active": name, "sessions": {name: {
        "header": HEADER, "leaf": entries[-1]["id"] if leaf is ... and entries else (None if leaf is ... else leaf),
        "settings": settings or {"model": "openai:gpt-4.1-mini"}, "entries": entries}}}


def notebook_with(md=None, journals=()) -> dict:
    nb = new_notebook()
    if md is not None:
        nb["metadata"]["ipyagent"] = md
    for payload in journals:
        data, meta = journal_bundle(payload["session"], payload.get("header"), payload.get("leaf"),
                                    payload.get("settings"), payload["entries"])
        nb["cells"].append({"cell_type": "code", "execution_count": 1, "id": f"c{len(nb['cells'])}",
                            "metadata": {}, "source": "%%agent\nhi",
                            "outputs": [{"output_type": "stream", "name": "stdout", "text": "working\n"},
                                        {"output_type": "display_data", "data": data, "metadata": meta}]})
    return nb


def problems(report) -> str:
    return "\n".join(str(p) for p in report.problems)


# ---- round trips ---------------------------------------------------------------------------------


def test_pi_jsonl_to_notebook_to_pi_jsonl_is_identical(tmp_path):
    header, entries = generate_session(7, 600)
    text = dump_pi_jsonl(header, entries)
    h, e, report = parse_pi_jsonl(text)
    assert report.ok
    sessions = NotebookSessions("default", {"default": StoredSession(h, e[-1]["id"], {}, e)})
    path = tmp_path / "nb.ipynb"
    write_notebook(path, write_sessions_into_notebook(new_notebook(), sessions))
    session = session_from_notebook_file(path)
    assert session.to_pi_jsonl() == text
    assert session.leaf_id == e[-1]["id"]
    assert session.load_report.ok



NOTEBOOK_LAYER = ("notebook", "kernel", "display", "explorer", "store", "bridge")


def test_session_from_file_reads_a_notebook_in_plain_python(tmp_path):
    """The core reads .ipynb through the reader ipyagent/__init__.py registers: no import of the
    notebook layer in core.py, nothing of IPython loaded."""
    e = chain(3)
    sessions = NotebookSessions("one", {"one": StoredSession(dict(HEADER), e[-1]["id"], {}, e),
                                        "two": StoredSession(dict(HEADER), e[0]["id"], {}, e[:1])})
    path = tmp_path / "nb.ipynb"
    write_notebook(path, write_sessions_into_notebook(new_notebook(), sessions))
    code = ("import sys\n"
            f"NOTEBOOK_LAYER = {NOTEBOOK_LAYER!r}\n"
            "from ipyagent.core import Session\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'ipyagent' and m.split('.')[1:2] and "
            "m.split('.')[1] in NOTEBOOK_LAYER]\n"
            f"one, two = Session.from_file({str(path)!r}), Session.from_file({str(path)!r}, session='two')\n"
            "print(len(one), one.leaf_id, len(two), two.leaf_id, 'IPython' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", e[-1]["id"], "1", e[0]["id"], "False"]
    core = (REPO / "extension/ipyagent/core.py").read_text()
    assert not [layer for layer in NOTEBOOK_LAYER if f"ipyagent.{layer}" in core]

def test_round_trip_through_nbformat_keeps_the_data(tmp_path):
    header, entries = generate_session(8, 40)
    sessions = NotebookSessions("s", {"s": StoredSession(header, entries[-1]["id"], {}, entries)})
    path = tmp_path / "nb.ipynb"
    write_notebook(path, write_sessions_into_notebook(new_notebook(), sessions))
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)  # what we write is a valid nbformat 4.5 notebook
    nbformat.write(nb, str(path))  # a Jupyter save: keys sorted everywhere
    again = session_from_notebook_file(path, "s")
    assert [json.loads(line) for line in again.to_pi_jsonl().splitlines()] == [header, *entries]


def test_our_writer_matches_nbformat_outside_the_session_data(tmp_path):
    nb = notebook_with(metadata(chain(3)))
    nb["cells"] += [
        {"cell_type": "markdown", "id": "m1", "metadata": {"tags": ["b", "a"]}, "source": "# Title\n\ntext"},
        {"cell_type": "code", "execution_count": 2, "id": "c9", "metadata": {}, "source": "x = 1\nx",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
                     {"output_type": "execute_result", "execution_count": 2, "metadata": {},
                      "data": {"text/plain": "1\n2", "application/json": {"b": 1, "a": 2}}}]}]
    path = tmp_path / "nb.ipynb"
    write_notebook(path, nb)
    ours = path.read_text(encoding="utf-8")
    nbformat.write(nbformat.reads(ours, as_version=4), str(path))
    theirs = path.read_text(encoding="utf-8")
    cut = '\n "metadata": {'
    assert ours.split(cut)[0] == theirs.split(cut)[0]  # the cells, byte for byte


def test_metadata_is_not_larger_than_the_entries_own_json():
    header, entries = generate_session(9, 1000)
    sessions = NotebookSessions("default", {"default": StoredSession(header, entries[-1]["id"], {"model": "m"}, entries)})
    md = sessions.to_dict()
    compact = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    envelope = len(compact(md)) - len(compact(entries))
    assert 0 < envelope < 600
    text = dumps_notebook(write_sessions_into_notebook(new_notebook(), sessions))
    assert text.count(entries[500]["id"]) == compact(entries).count(entries[500]["id"])  # no duplication


# ---- merging -------------------------------------------------------------------------------------


def test_merge_adds_by_id_keeps_order_and_is_idempotent():
    a, _ = NotebookSessions.from_metadata(metadata(chain(5)))
    b, _ = NotebookSessions.from_metadata(metadata(chain(8)))  # the same 5, then 3 more
    assert a.merge(b) == 3
    assert [e["id"] for e in a.sessions["default"].entries] == [f"{i:08x}" for i in range(8)]
    assert a.sessions["default"].leaf == "00000007"
    snapshot = copy.deepcopy(a.to_dict())
    assert a.merge(b) == 0
    assert a.merge(copy.deepcopy(a)) == 0
    assert a.to_dict() == snapshot


def test_merge_takes_leaf_and_settings_only_from_newer_entries():
    base = chain(4, day=5)
    newer = chain(2, 10, "00000003", day=6)
    older = chain(2, 20, "00000003", day=2)
    a, _ = NotebookSessions.from_metadata(metadata(base, settings={"model": "a"}))
    b, _ = NotebookSessions.from_metadata(metadata(base + older, settings={"model": "old"}))
    assert a.merge(b) == 2
    assert a.sessions["default"].leaf == "00000003"  # older entries: the leaf stays
    assert a.sessions["default"].settings == {"model": "a"}
    c, _ = NotebookSessions.from_metadata(metadata(base + newer, settings={"model": "new"}))
    assert a.merge(c) == 2
    assert a.sessions["default"].leaf == "0000000b"
    assert a.sessions["default"].settings == {"model": "new"}


def test_merge_adds_unknown_sessions_and_keeps_the_active_one():
    a, _ = NotebookSessions.from_metadata(metadata(chain(2), name="one"))
    b, _ = NotebookSessions.from_metadata(metadata(chain(3, 10), name="two"))
    assert a.merge(b) == 3
    assert set(a.sessions) == {"one", "two"}
    assert a.active == "two"  # the other side's active session, now present


def test_from_session_on_the_class_and_on_an_instance():
    session = Session(dict(HEADER), chain(3))
    made = NotebookSessions.from_session("x", session, {"model": "m", "api_key": "sk-secret"})
    assert made.active == "x" and made.sessions["x"].settings == {"model": "m"}
    stored, _ = NotebookSessions.from_metadata(metadata(chain(5), name="x"))
    session.append({"type": "message", "message": {"role": "user", "content": "more", "timestamp": 1}})
    returned = stored.from_session("x", session, None)
    assert returned is stored
    ids = [e["id"] for e in stored.sessions["x"].entries]
    assert ids[:5] == [f"{i:08x}" for i in range(5)] and len(ids) == 6  # nothing held is lost
    assert stored.sessions["x"].leaf == session.leaf_id
    assert stored.sessions["x"].settings == {"model": "openai:gpt-4.1-mini"}  # kept when None


def test_to_session_uses_the_stored_leaf_and_names():
    entries = chain(5)
    sessions, report = NotebookSessions.from_metadata(metadata(entries, leaf="00000002"))
    assert report.ok
    session = sessions.to_session()
    assert session.leaf_id == "00000002" and len(session.path()) == 3
    with pytest.raises(SessionNotFound, match="no session named 'nope'.*'default'"):
        sessions.to_session("nope")
    with pytest.raises(SessionNotFound, match="no ipyagent session"):
        NotebookSessions.from_metadata(None)[0].to_session()


# ---- the journal ---------------------------------------------------------------------------------


def test_journal_bundle_is_the_protocol_output():
    entries = chain(3)
    data, meta = journal_bundle("default", HEADER, "00000002", {"model": "m", "OPENAI_API_KEY": "sk-x"}, entries)
    assert set(data) == {JOURNAL_MIME, "text/markdown", "text/plain"}
    assert data[JOURNAL_MIME] == {"version": 1, "session": "default", "header": HEADER, "leaf": "00000002",
                                  "settings": {"model": "m"}, "entries": entries}
    assert meta == {"ipyagent": {"entry_ids": ["00000000", "00000001", "00000002"], "final": True}}
    markdown = data["text/markdown"]
    assert "| entry | text |" in markdown and "| user | prompt 1 |" in markdown
    assert "3 new entries" in data["text/plain"]
    assert "sk-x" not in json.dumps(data)


def test_journal_markdown_is_short_and_escaped():
    entries = chain(30)
    entries[0]["message"]["content"] = "a | b <script>\nsecond line"
    data, _ = journal_bundle("default", HEADER, None, {}, entries)
    markdown = data["text/markdown"]
    assert "a \\| b \\<script\\>" in markdown and "second line" not in markdown
    assert "10 more" in markdown and markdown.count("\n| ") < 25


def test_journal_outputs_in_cell_order_and_json_string_payloads():
    nb = notebook_with(None, journals=[{"session": "default", "entries": chain(1)},
                                       {"session": "default", "entries": chain(1, 1, "00000000")}])
    nb["cells"][1]["outputs"][1]["data"][JOURNAL_MIME] = json.dumps(nb["cells"][1]["outputs"][1]["data"][JOURNAL_MIME])
    found = list(journal_outputs(nb))
    assert [index for index, _ in found] == [1, 2]
    assert all(isinstance(payload, dict) for _, payload in found)


def test_sessions_from_notebook_merges_metadata_and_journals_in_cell_order():
    md = metadata(chain(3))
    j1 = {"session": "default", "header": HEADER, "leaf": "00000004", "entries": chain(2, 3, "00000002")}
    j2 = {"session": "default", "header": HEADER, "leaf": "00000006", "entries": chain(2, 5, "00000004")}
    replay = {"session": "default", "entries": chain(3)}  # already stored: harmless
    nb = notebook_with(md, journals=[j1, replay, j2])
    sessions, report = sessions_from_notebook(nb)
    assert report.ok, problems(report)
    stored = sessions.sessions["default"]
    assert [e["id"] for e in stored.entries] == [f"{i:08x}" for i in range(7)]
    assert stored.leaf == "00000006"
    assert stored.entries[3]["parentId"] == "00000002"  # a journal entry's parent in the metadata: not an orphan


def test_a_journal_without_header_or_settings_keeps_the_stored_ones():
    nb = notebook_with(metadata(chain(2), settings={"model": "kept"}),
                       journals=[{"session": "default", "header": None, "settings": None, "leaf": "00000002",
                                  "entries": chain(1, 2, "00000001")}])
    sessions, report = sessions_from_notebook(nb)
    assert report.ok, problems(report)
    stored = sessions.sessions["default"]
    assert stored.header == HEADER and stored.settings == {"model": "kept"} and stored.leaf == "00000002"


def test_journal_alone_makes_a_session():
    nb = notebook_with(None, journals=[{"session": "work", "header": HEADER, "leaf": "00000001",
                                        "settings": {"model": "m"}, "entries": chain(2)}])
    sessions, report = sessions_from_notebook(nb)
    assert report.ok and sessions.active == "work" and sessions.sessions["work"].header == HEADER


def test_lift_keeps_outputs_byte_identical_and_is_idempotent(tmp_path):
    nb = notebook_with(metadata(chain(2)), journals=[{"session": "default", "leaf": "00000004",
                                                      "entries": chain(3, 2, "00000001")}])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.from_dict(nb), str(path))  # as a Jupyter frontend saved it
    before = path.read_text(encoding="utf-8")
    assert lift_notebook(path) == 3
    after = path.read_text(encoding="utf-8")
    cut = '\n "metadata": {'
    assert before.split(cut)[0] == after.split(cut)[0]  # every cell and output, byte for byte
    lifted = read_notebook(path)["metadata"]["ipyagent"]["sessions"]["default"]
    assert [e["id"] for e in lifted["entries"]] == [f"{i:08x}" for i in range(5)]
    assert lifted["leaf"] == "00000004"
    mtime = os.stat(path).st_mtime_ns
    assert lift_notebook(path) == 0
    assert path.read_text(encoding="utf-8") == after and os.stat(path).st_mtime_ns == mtime  # nothing rewritten


def test_lift_to_another_file_leaves_the_source_alone(tmp_path):
    src, dst = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    write_notebook(src, notebook_with(None, journals=[{"session": "default", "entries": chain(2)}]))
    before = src.read_bytes()
    assert lift_notebook(src, dst) == 2
    assert src.read_bytes() == before
    assert len(read_notebook(dst)["metadata"]["ipyagent"]["sessions"]["default"]["entries"]) == 2


def test_writing_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.ipynb"
    write_notebook(real, notebook_with(None, journals=[{"session": "default", "entries": chain(2)}]))
    link = tmp_path / "link.ipynb"
    link.symlink_to(real)
    assert lift_notebook(link) == 2
    assert link.is_symlink() and "ipyagent" in read_notebook(real)["metadata"]


def test_write_sessions_touches_nothing_else():
    nb = notebook_with(metadata(chain(2)), journals=[{"session": "default", "entries": chain(1, 2, "00000001")}])
    nb["metadata"]["custom"] = {"keep": [1, 2]}
    original = copy.deepcopy(nb)
    sessions, _ = sessions_from_notebook(nb)
    write_sessions_into_notebook(nb, sessions)
    assert nb["cells"] == original["cells"]
    assert {k: v for k, v in nb["metadata"].items() if k != "ipyagent"} == \
        {k: v for k, v in original["metadata"].items() if k != "ipyagent"}


def test_save_session_to_notebook_file_keeps_the_rest(tmp_path):
    src = tmp_path / "a.ipynb"
    nb = notebook_with(metadata(chain(3)))
    nb["cells"][0]["source"] = "print('keep me')"
    write_notebook(src, nb)
    session = session_from_notebook_file(src)
    session.append({"type": "message", "message": {"role": "user", "content": "new", "timestamp": 2}})
    save_session_to_notebook_file(session, src, src)
    again = read_notebook(src)
    assert "".join(again["cells"][0]["source"]) == "print('keep me')"
    assert len(again["metadata"]["ipyagent"]["sessions"]["default"]["entries"]) == 4
    assert again["metadata"]["kernelspec"]["name"] == "python3"
    fresh = tmp_path / "new.ipynb"
    save_session_to_notebook_file(session, tmp_path / "missing.ipynb", fresh, name="other")
    assert read_notebook(fresh)["metadata"]["ipyagent"]["active"] == "other"


# ---- hostile or broken metadata ------------------------------------------------------------------


def test_metadata_that_is_not_an_object_is_reported_and_kept_aside():
    for bad in (["a", "list"], "__import__('os').system('echo pwned')", 42):
        sessions, report = NotebookSessions.from_metadata(bad, source="nb.ipynb")
        assert sessions.sessions == {}
        assert "must be a JSON object" in problems(report)
        assert sessions.to_dict()["set_aside"][0]["raw"] == bad  # written back, never dropped


def test_entries_not_a_list_and_sessions_not_an_object():
    md = metadata(chain(1))
    md["sessions"]["default"]["entries"] = {"0": "x"}
    sessions, report = NotebookSessions.from_metadata(md)
    assert "entries: must be a list of entries, not dict" in problems(report)
    assert sessions.sessions["default"].entries == []
    sessions, report = NotebookSessions.from_metadata({"version": 1, "sessions": ["x"]})
    assert "sessions: must be an object mapping names to sessions, not list" in problems(report)
    sessions, report = NotebookSessions.from_metadata({"sessions": {"s": "not a session"}})
    assert "a session must be a JSON object, not str" in problems(report)


def test_a_10_mb_entry_is_set_aside_with_a_clear_message():
    entries = chain(3)
    entries[1]["message"]["content"] = "x" * 10_000_000
    sessions, report = NotebookSessions.from_metadata(metadata(entries))
    text = problems(report)
    assert "entries[1]: entry is 10,000,1" in text and f"over the {MAX_ENTRY_CHARS:,} limit (set aside)" in text
    kept = sessions.sessions["default"].entries
    assert [e["id"] for e in kept] == ["00000000", "00000002"]
    assert kept[1]["parentId"] == "00000001"  # its parent was set aside: a root, its parentId as written
    assert "parent '00000001' is missing" in text
    assert sessions.set_aside[0]["raw"]["id"] == "00000001"


def test_cycles_duplicates_and_dangling_parents_are_reported():
    entries = chain(4)
    entries[0]["parentId"] = "00000001"  # 0 -> 1 -> 0: a cycle
    twin = copy.deepcopy(entries[2])
    twin["message"]["content"] = "a different entry with the same id"
    orphan = chain(1, 9, "deadbeef")[0]
    sessions, report = NotebookSessions.from_metadata(metadata(entries + [twin, copy.deepcopy(entries[3]), orphan]))
    text = problems(report)
    assert "loops back to itself (a cycle)" in text
    assert "another entry with this id is already stored" in text
    assert "an identical copy of an earlier entry" in text
    assert "parent 'deadbeef' is missing; the entry is kept as a root" in text
    ids = [e["id"] for e in sessions.sessions["default"].entries]
    assert "00000000" not in ids and "00000001" not in ids and ids.count("00000003") == 1
    aside = sessions.to_dict()["set_aside"]
    assert {item["raw"]["id"] for item in aside} == {"00000000", "00000001", "00000002"}
    assert all(item["session"] == "default" and item["reason"] for item in aside)


def test_hostile_strings_stay_data(tmp_path):
    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    entries = chain(2)
    entries[1]["message"]["content"] = payload
    md = metadata(entries, settings={"model": payload})
    md["active"] = payload
    md["sessions"][payload] = {"header": {"type": "session", "id": payload}, "leaf": payload, "entries": []}
    nb = notebook_with(md)
    path = tmp_path / "nb.ipynb"
    write_notebook(path, nb)
    sessions, report = sessions_from_notebook(read_notebook(path))
    session = sessions.to_session("default")
    assert session.get("00000001")["message"]["content"] == payload
    assert sessions.active == payload
    assert "leaf" in problems(report)  # the hostile leaf names no entry: reported, last entry used
    assert not marker.exists()


def test_leaf_header_and_settings_problems():
    md = metadata(chain(3), leaf="ffffffff")
    md["sessions"]["default"]["header"] = "not a header"
    md["sessions"]["default"]["settings"] = {"model": "m", "api_key": "sk-abc", "context_window": 8000}
    sessions, report = NotebookSessions.from_metadata(md)
    text = problems(report)
    assert "leaf 'ffffffff' is not among the loaded entries" in text
    assert "header: must be a JSON object" in text
    assert "credentials were removed" in text
    stored = sessions.sessions["default"]
    assert stored.leaf is None or stored.leaf == "00000002"
    assert stored.settings == {"model": "m", "context_window": 8000}
    assert isinstance(stored.header["id"], str)


def test_set_aside_survives_a_lift_and_a_second_load(tmp_path):
    entries = chain(3)
    entries.append({"type": "message", "id": "0000000a", "parentId": "00000002"})  # no 'message'
    path = tmp_path / "nb.ipynb"
    write_notebook(path, notebook_with(metadata(entries)))
    lift_notebook(path)
    md = read_notebook(path)["metadata"]["ipyagent"]
    assert md["set_aside"][0]["raw"]["id"] == "0000000a"
    assert "needs 'message'" in md["set_aside"][0]["reason"]
    # the stored leaf named the entry set aside: replaced by the last entry, and kept here
    assert md["set_aside"][1]["raw"] == "0000000a" and md["set_aside"][1]["where"].endswith(".leaf")
    assert md["sessions"]["default"]["leaf"] == "00000002"
    sessions, report = sessions_from_notebook(read_notebook(path))
    assert sessions.set_aside == md["set_aside"]
    assert [p.where for p in report.problems] == ["metadata.ipyagent.set_aside"]  # said once, not again per entry
    assert "2 item(s) an earlier load could not use are kept here" in problems(report)
    assert lift_notebook(path) == 0


def test_newer_version_and_unknown_keys_are_kept():
    md = metadata(chain(2))
    md["version"] = 2
    md["future"] = {"x": 1}
    md["sessions"]["default"]["future_field"] = [1]
    sessions, report = NotebookSessions.from_metadata(md)
    assert "newer than this ipyagent reads" in problems(report)
    out = sessions.to_dict()
    assert out["future"] == {"x": 1} and out["sessions"]["default"]["future_field"] == [1]


def test_a_journal_that_disagrees_with_the_metadata_is_set_aside():
    stored = chain(2)
    forged = copy.deepcopy(stored[1])
    forged["message"]["content"] = "rewritten history"
    nb = notebook_with(metadata(stored), journals=[{"session": "default", "entries": [forged]}, {"session": 5, "entries": []}])
    nb["cells"][1]["outputs"][1]["data"][JOURNAL_MIME] = ["not", "an", "object", 1]
    sessions, report = sessions_from_notebook(nb)
    text = problems(report)
    assert "cell 2 output 2 (journal)" in text and "a journal payload must be a JSON object" in text
    assert "the journal names no session" in text
    assert sessions.sessions["default"].entries[1]["message"]["content"] == "prompt 1"


def test_read_notebook_refuses_what_is_not_a_notebook(tmp_path):
    cases = {"a.ipynb": "{not json", "b.ipynb": "[1, 2]", "c.ipynb": '{"cells": 5}',
             "d.ipynb": '{"nbformat": 3, "worksheets": []}', "e.ipynb": "[" * 100_000 + "]" * 100_000}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(NotebookError):
            read_notebook(tmp_path / name)


def test_transcript_shows_compactions():
    session = Session(dict(HEADER), chain(4))
    session.append({"type": "compaction", "summary": "## Goal\nTest things.", "firstKeptEntryId": "00000002",
                    "tokensBefore": 12345})
    session.append({"type": "message", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Done."}, {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}],
        "stopReason": "toolUse", "timestamp": 1}})
    markdown = transcript_markdown(session, "default", {"model": "openai:gpt-4.1-mini"})
    assert "### Compaction · 12,345 tokens summarised" in markdown
    assert "> ## Goal\n> Test things." in markdown
    assert "**kept**" in markdown and "`00000002` on" in markdown
    assert "**tool call** `read`" in markdown and "Done." in markdown


def test_stored_session_from_dict_and_back():
    data = {"header": HEADER, "leaf": "00000001", "settings": {"model": "m"}, "entries": chain(3)}
    report = LoadReport()
    stored = StoredSession.from_dict(data, report, "x")
    assert report.ok and stored.to_dict() == data
    broken = StoredSession.from_dict({"entries": "nope"}, report, "y")
    assert broken.entries == [] and "must be a list of entries" in problems(report)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_split_into_metadata_and_journals_lifts_to_the_whole_session(data):
    header, entries = generate_session(data.draw(st.integers(0, 50)), 60)
    cut = data.draw(st.integers(0, len(entries)))
    rest = entries[cut:]
    bounds = sorted(data.draw(st.lists(st.integers(0, len(rest)), max_size=5)))
    runs = [rest[a:b] for a, b in zip([0, *bounds], [*bounds, len(rest)]) if rest[a:b]]
    replays = data.draw(st.lists(st.integers(0, len(entries) - 1), max_size=3))  # journals repeating stored entries
    journals = [{"session": "default", "header": header, "leaf": run[-1]["id"], "entries": run} for run in runs]
    journals += [{"session": "default", "entries": [entries[i]]} for i in replays]
    order = data.draw(st.permutations(range(len(journals))))
    stored = metadata(entries[:cut]) if cut else None
    if stored is not None:  # one session: the journals' header is the stored one
        stored["sessions"]["default"]["header"] = header
    nb = notebook_with(stored, journals=[journals[i] for i in order])
    sessions, report = sessions_from_notebook(nb)
    assert report.ok, problems(report)
    stored = sessions.sessions["default"]
    assert sorted(e["id"] for e in stored.entries) == sorted(e["id"] for e in entries)
    by_id = {e["id"]: e for e in stored.entries}
    assert all(by_id[e["id"]] == e for e in entries)  # nothing re-rooted or altered
    again, _ = sessions_from_notebook(write_sessions_into_notebook(copy.deepcopy(nb), sessions))
    assert again.to_dict() == sessions.to_dict()  # lifting a lifted notebook changes nothing
    assert again.merge(copy.deepcopy(sessions)) == 0


# ---- nested too deeply for Python ----------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_notebook_with_parts_nested_100000_deep_loads_and_is_written_back_whole(tmp_path):
    entries = chain(3)
    placeholder = "@@deep@@"
    entries[1]["details"] = placeholder
    nb = notebook_with(metadata(entries))
    nb["cells"][0]["outputs"] = [{"output_type": "display_data", "data": {"application/json": placeholder},
                                  "metadata": {}}]
    text = dumps_notebook(nb).replace(json.dumps(placeholder), DEEP)  # two values nested 100,000 deep
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    sessions, report = sessions_from_notebook(read_notebook(path))
    kept = sessions.sessions["default"].entries
    assert [e["id"] for e in kept] == ["00000000", "00000002"] and kept[1]["parentId"] == "00000001"
    [item] = [i for i in sessions.set_aside if "levels deep" in i["reason"]]
    assert DEEP in item["raw"] and json.loads(item["raw"].replace(DEEP, "0"))["id"] == "00000001"
    assert lift_notebook(path) == 0  # rewrites the metadata with the entry set aside as text
    written = path.read_text(encoding="utf-8")
    assert "$ipyagent.too_deep" not in written
    # the entry kept as its text, and the cell output as it was (re-indented, as every write does)
    assert written.count(DEEP) == 1 and written.replace("\n", "").replace(" ", "").count(DEEP) == 2
    stored = read_notebook(path)["metadata"]["ipyagent"]["sessions"]["default"]["entries"]
    assert "00000001" not in [e["id"] for e in stored]
