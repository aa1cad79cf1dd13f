"""The chunked layouts of the session store (2, and 3 whose chunks hold their entries as JSON
text; docs/protocol.md): written, read back, read next to the old layout, malformed chunks kept
aside, and kept by every rewrite."""

from __future__ import annotations

import json

from ipyagent.store.chunks import CHUNK_ENTRIES, assemble, chunk_keys, layout_of, store_value
from ipyagent.store.hydration import hydrate_from_disk
from ipyagent.store.ipynb import (
    lift_notebook,
    new_notebook,
    read_notebook,
    sessions_from_notebook,
    write_notebook,
    write_sessions_into_notebook,
)
from support.sessiongen import generate_session


def _value(n: int, name: str = "default") -> dict:
    header, entries = generate_session(7, n)
    return {"version": 1, "active": name, "sessions": {name: {
        "header": header, "leaf": entries[-1]["id"], "settings": {"model": "openai:m"}, "entries": entries}}}


def test_written_chunked_and_read_back():
    value = _value(250)
    nb = new_notebook()
    store_value(nb["metadata"], value, 2)
    meta = nb["metadata"]
    assert layout_of(meta) == 2
    assert meta["ipyagent"]["version"] == 2
    assert "entries" not in meta["ipyagent"]["sessions"]["default"]
    keys = chunk_keys(meta)
    assert keys == ["ipyagent/000000", "ipyagent/000001", "ipyagent/000002"]
    assert [len(meta[k]["entries"]) for k in keys] == [CHUNK_ENTRIES, CHUNK_ENTRIES, 50]
    assert assemble(meta) == value
    sessions, report = sessions_from_notebook(nb)
    assert not report.problems
    assert [e["id"] for e in sessions.sessions["default"].entries] == \
        [e["id"] for e in value["sessions"]["default"]["entries"]]


def test_the_old_layout_is_read_and_kept():
    value = _value(30)
    nb = new_notebook()
    nb["metadata"]["ipyagent"] = value
    assert layout_of(nb["metadata"]) == 1 and assemble(nb["metadata"]) is value
    sessions, _ = sessions_from_notebook(nb)
    write_sessions_into_notebook(nb, sessions)
    assert layout_of(nb["metadata"]) == 1 and not chunk_keys(nb["metadata"])


def test_a_rewrite_of_a_chunked_notebook_writes_layout_4_and_keeps_its_chunks(tmp_path):
    value = _value(120)
    nb = new_notebook()
    store_value(nb["metadata"], value, 2)
    nb["metadata"]["ipyagent/000007"] = {"session": "default", "entries": []}  # a writer's later chunk
    path = tmp_path / "x.ipynb"
    write_notebook(path, nb)
    sessions, report = hydrate_from_disk(path)
    assert not report.problems
    assert len(sessions.sessions["default"].entries) == 120
    chunks = {key: nb["metadata"][key] for key in ("ipyagent/000000", "ipyagent/000001")}
    write_sessions_into_notebook(nb, sessions)
    assert layout_of(nb["metadata"]) == 4
    # the chunks that hold entries stay as they were (a rewrite's diff is what changed); the empty one goes
    assert chunk_keys(nb["metadata"]) == ["ipyagent/000000", "ipyagent/000001"]
    assert {key: nb["metadata"][key] for key in chunks} == chunks
    assert nb["metadata"]["ipyagent"]["next_chunk"] == 2  # the numbered chunks' leaves are the index's past
    assert assemble(nb["metadata"])["sessions"]["default"]["entries"] == value["sessions"]["default"]["entries"]
    assert lift_notebook(path) == 0  # nothing to lift: the file stays as it is
    assert layout_of(read_notebook(path)["metadata"]) == 2


def test_chunks_of_two_sessions_and_entries_in_chunk_order():
    a, b = _value(3, "a"), _value(2, "b")
    meta = {"ipyagent": {"version": 2, "active": "b", "sessions": {
        "a": {k: v for k, v in a["sessions"]["a"].items() if k != "entries"},
        "b": {k: v for k, v in b["sessions"]["b"].items() if k != "entries"}}},
        "ipyagent/000010": {"session": "a", "entries": a["sessions"]["a"]["entries"][2:]},
        "ipyagent/000002": {"session": "b", "entries": b["sessions"]["b"]["entries"]},
        "ipyagent/000001": {"session": "a", "entries": a["sessions"]["a"]["entries"][:2]}}
    out = assemble(meta)
    assert out["active"] == "b"
    assert out["sessions"]["a"]["entries"] == a["sessions"]["a"]["entries"]
    assert out["sessions"]["b"]["entries"] == b["sessions"]["b"]["entries"]


def test_a_malformed_chunk_is_kept_aside_and_reported():
    value = _value(5)
    nb = new_notebook()
    store_value(nb["metadata"], value, 2)
    nb["metadata"]["ipyagent/000003"] = ["not", "a", "chunk"]
    sessions, report = sessions_from_notebook(nb)
    assert len(sessions.sessions["default"].entries) == 5
    assert [item["where"] for item in sessions.set_aside] == ["ipyagent/000003"]
    assert report.problems
    write_sessions_into_notebook(nb, sessions)
    assert json.dumps(["not", "a", "chunk"]) in json.dumps(nb["metadata"]["ipyagent"]["set_aside"])


def test_a_leaf_in_a_chunk_written_after_the_index_wins():
    value = _value(4)
    nb = new_notebook()
    store_value(nb["metadata"], value, 2)
    meta = nb["metadata"]
    ids = [e["id"] for e in value["sessions"]["default"]["entries"]]
    assert meta["ipyagent"]["next_chunk"] == 1
    meta["ipyagent/000000"]["leaf"] = ids[0]  # older than the index: ignored
    assert assemble(meta)["sessions"]["default"]["leaf"] == ids[-1]
    meta["ipyagent/000001"] = {"session": "default", "entries": [], "leaf": ids[1]}  # a later turn's
    assert assemble(meta)["sessions"]["default"]["leaf"] == ids[1]


def test_layout_3_chunks_hold_their_entries_as_ascii_text_and_read_back(tmp_path):
    value = _value(150)
    value["sessions"]["default"]["entries"][3]["note"] = "café ☕ 日本"  # kept through the text
    nb = new_notebook()
    store_value(nb["metadata"], value, 3)
    meta = nb["metadata"]
    assert layout_of(meta) == 3 and meta["ipyagent"]["version"] == 3
    first = meta["ipyagent/000000"]
    assert isinstance(first["entries"], str) and first["entries"].isascii()
    assert first["ids"] == [e["id"] for e in value["sessions"]["default"]["entries"][:CHUNK_ENTRIES]]
    assert assemble(meta) == value
    path = tmp_path / "three.ipynb"
    write_notebook(path, nb)
    sessions, report = hydrate_from_disk(path)
    assert not report.problems
    assert [e for e in sessions.sessions["default"].entries] == value["sessions"]["default"]["entries"]
    write_sessions_into_notebook(nb, sessions)  # a rewrite writes layout 4 and keeps the text chunks
    assert layout_of(nb["metadata"]) == 4 and isinstance(nb["metadata"]["ipyagent/000001"]["entries"], str)


def test_layout_2_and_3_chunks_read_together_and_a_bad_text_is_set_aside():
    value = _value(6)
    entries = value["sessions"]["default"]["entries"]
    meta = {"ipyagent": {"version": 3, "active": "default", "next_chunk": 0, "sessions": {"default": {
        k: v for k, v in value["sessions"]["default"].items() if k != "entries"}}},
        "ipyagent/000000": {"session": "default", "entries": entries[:3]},  # layout 2's list
        "ipyagent/000001": {"session": "default", "ids": [e["id"] for e in entries[3:]],
                            "entries": json.dumps(entries[3:])},
        "ipyagent/000002": {"session": "default", "ids": ["x"], "entries": '[{"id": "x", '},  # cut short
        "ipyagent/000003": {"session": "default", "ids": [], "entries": '{"not": "a list"}'}}
    out = assemble(meta)
    assert out["sessions"]["default"]["entries"] == entries
    aside = {item["where"]: item for item in out["set_aside"]}
    assert set(aside) == {"ipyagent/000002", "ipyagent/000003"}
    assert "not valid JSON" in aside["ipyagent/000002"]["reason"]
    assert "not a list" in aside["ipyagent/000003"]["reason"]
    assert aside["ipyagent/000002"]["raw"] == meta["ipyagent/000002"]  # kept as it was
    nb = {**new_notebook(), "metadata": meta}
    sessions, report = sessions_from_notebook(nb)
    assert len(sessions.sessions["default"].entries) == 6 and report.problems


def test_a_huge_or_too_deep_entry_in_a_text_chunk_is_set_aside_the_rest_loads(tmp_path):
    from ipyagent.session.intake import MAX_ENTRY_CHARS

    value = _value(4)
    entries = value["sessions"]["default"]["entries"]
    deep: list = []
    for _ in range(230):
        deep = [deep]
    entries[1] = {**entries[1], "message": {**entries[1]["message"], "deep": deep}}  # a small chunk's
    nb = new_notebook()
    store_value(nb["metadata"], value, 3)
    small = tmp_path / "small.ipynb"  # every chunk small: only nesting is walked
    write_notebook(small, nb)
    sessions, report = hydrate_from_disk(small)
    assert [e["id"] for e in sessions.sessions["default"].entries] == [e["id"] for e in entries if e is not entries[1]]
    assert "levels deep" in report.summary()
    huge = dict(entries[3], id="hugehuge", parentId=entries[3]["id"])
    huge["message"] = {**huge["message"], "content": [{"type": "text", "text": "x" * (MAX_ENTRY_CHARS + 10)}]}
    nb["metadata"]["ipyagent/000001"] = {"session": "default", "ids": ["hugehuge"], "entries": json.dumps([huge])}
    path = tmp_path / "hostile.ipynb"
    write_notebook(path, nb)
    sessions, report = hydrate_from_disk(path)
    loaded = [e["id"] for e in sessions.sessions["default"].entries]
    assert entries[1]["id"] not in loaded and "hugehuge" not in loaded
    assert [e["id"] for e in entries if e["id"] != entries[1]["id"]] == [i for i in loaded if i in
                                                                           {e["id"] for e in entries}]
    text = report.summary()
    assert "levels deep" in text and "over the" in text


def test_every_chunked_writer_keeps_a_malformed_session_in_the_index_and_writes_no_chunk_for_it():
    value = _value(30)
    value["sessions"]["junk"] = "not a session"
    value["sessions"]["bare"] = {"leaf": None, "entries": "not a list"}
    for layout in (2, 3, 4):
        nb = new_notebook()
        store_value(nb["metadata"], value, layout)
        meta = nb["metadata"]
        index = meta["ipyagent"]
        assert index["version"] == layout
        assert list(index["sessions"]) == ["default", "junk", "bare"]
        assert index["sessions"]["junk"] == "not a session"
        assert index["sessions"]["bare"] == {"leaf": None}
        chunks = [meta[k] for k in chunk_keys(meta)]
        assert chunks and {c["session"] for c in chunks} == {"default"}
        back = assemble(meta)
        assert back["sessions"]["default"] == value["sessions"]["default"]
        assert back["sessions"]["bare"] == {"leaf": None, "entries": []}
        assert [(a["session"], a["raw"]) for a in back["set_aside"]] == [("junk", "not a session")]
