"""Layout 4 (docs/protocol.md): chunks under keys derived from the entries they hold, so two git
branches that each add turns never take one key for different entries, and the union of their
metadata reads every entry of both; a rewrite keeps what it can, and writes the same bytes when
nothing changed."""

from __future__ import annotations

import copy
import json

from ipyagent.store.chunks import assemble, chunk_keys, layout_of, store_value
from ipyagent.store.ipynb import new_notebook, sessions_from_notebook, write_sessions_into_notebook
from ipyagent.store.keyed_chunks import fnv1a64, is_keyed_key, keyed_key
from support.sessiongen import generate_session


def _value(n: int, name: str = "default") -> dict:
    header, entries = generate_session(11, n)
    return {"version": 1, "active": name, "sessions": {name: {
        "header": header, "leaf": entries[-1]["id"], "settings": {"model": "openai:m"}, "entries": entries}}}


def _turn(parent: str, prefix: str, n: int = 3) -> list[dict]:
    out = []
    for i in range(n):
        entry_id = f"{prefix}{i:07d}"
        out.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-12-02T10:00:00.000Z",
                    "message": {"role": "user" if i == 0 else "assistant", "content": f"{prefix} {i}"}})
        parent = entry_id
    return out


def test_fnv1a64_is_the_published_function():
    # the FNV-1a 64 test values (offset basis; "a"; "foobar")
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8
    assert keyed_key("s", ["a", "b"]) == "ipyagent/%016x" % fnv1a64(b"s\na\nb")
    assert is_keyed_key(keyed_key("s", ["a"])) and not is_keyed_key("ipyagent/000001")


def test_written_in_layout_4_and_read_back():
    value = _value(250)
    nb = new_notebook()
    store_value(nb["metadata"], value, 4)
    meta = nb["metadata"]
    assert layout_of(meta) == 4 and meta["ipyagent"]["version"] == 4
    keys = chunk_keys(meta)
    assert len(keys) == 3 and all(is_keyed_key(k) for k in keys)
    ids = [e["id"] for e in value["sessions"]["default"]["entries"]]
    for key in keys:  # the key is the entries' own
        assert key == keyed_key("default", meta[key]["ids"])
        assert "leaf" not in meta[key] and "at" not in meta[key]
    assert assemble(meta) == value
    assert [e["id"] for e in sessions_from_notebook(nb)[0].sessions["default"].entries] == ids


def test_a_rewrite_keeps_every_chunk_and_adds_one_for_new_entries_and_nothing_else_changes():
    value = _value(120)
    nb = new_notebook()
    store_value(nb["metadata"], value, 4)
    before = copy.deepcopy(nb["metadata"])
    sessions, _ = sessions_from_notebook(nb)
    write_sessions_into_notebook(nb, sessions)
    assert json.dumps(nb["metadata"]) == json.dumps(before)  # nothing changed: the same bytes
    entries = value["sessions"]["default"]["entries"]
    grown = copy.deepcopy(value)
    grown["sessions"]["default"]["entries"] += _turn(entries[-1]["id"], "n")
    grown["sessions"]["default"]["leaf"] = "n0000002"
    store_value(nb["metadata"], grown)
    added = set(chunk_keys(nb["metadata"])) - set(chunk_keys(before))
    assert set(chunk_keys(before)) <= set(chunk_keys(nb["metadata"])) and len(added) == 1
    assert all(nb["metadata"][k] == before[k] for k in chunk_keys(before))
    assert assemble(nb["metadata"]) == grown


def test_two_branches_new_chunks_never_share_a_key_and_their_union_reads_both():
    """What git merge of two branches that each added a turn does to the metadata keys: the union
    of the new chunk keys (the index is either side's). Every entry of both is read, the tree has
    two leaves, and the latest chunk written after the index gives the leaf."""
    value = _value(40)
    base = new_notebook()
    store_value(base["metadata"], value, 4)
    index_at = base["metadata"]["ipyagent"]["at"]
    leaf = value["sessions"]["default"]["leaf"]
    ours, theirs = copy.deepcopy(base["metadata"]), copy.deepcopy(base["metadata"])
    for side, prefix, at in ((ours, "a", index_at + 5), (theirs, "b", index_at + 9)):
        turn = _turn(leaf, prefix)
        key = keyed_key("default", [e["id"] for e in turn])
        side[key] = {"session": "default", "ids": [e["id"] for e in turn], "entries": json.dumps(turn),
                     "leaf": turn[-1]["id"], "at": at}
    new_ours = set(ours) - set(base["metadata"])
    new_theirs = set(theirs) - set(base["metadata"])
    assert new_ours and new_theirs and not new_ours & new_theirs
    merged = {**theirs, **ours}
    read = assemble(merged)["sessions"]["default"]
    ids = [e["id"] for e in read["entries"]]
    assert ids[:40] == [e["id"] for e in value["sessions"]["default"]["entries"]]
    assert sorted(ids[40:]) == sorted(["a0000000", "a0000001", "a0000002", "b0000000", "b0000001", "b0000002"])
    assert read["leaf"] == "b0000002"  # the latest turn (a larger ``at``) when nothing else decides
    leaves = {e["id"] for e in read["entries"]} - {e["parentId"] for e in read["entries"]}
    assert leaves == {"a0000002", "b0000002"}


def test_keyed_chunks_are_read_parents_first_whatever_their_keys_and_old_leaves_do_not_count():
    entries = _turn(None, "r", 6)
    meta: dict = {"ipyagent": {"version": 4, "active": "s", "at": 100, "sessions": {"s": {"leaf": "r0000001"}}}}
    for part, extra in ((entries[4:], {"leaf": "r0000005", "at": 50}), (entries[2:4], {}), (entries[:2], {})):
        ids = [e["id"] for e in part]
        meta[keyed_key("s", ids)] = {"session": "s", "ids": ids, "entries": json.dumps(part), **extra}
    read = assemble(meta)["sessions"]["s"]
    assert [e["id"] for e in read["entries"]] == [e["id"] for e in entries]
    assert read["leaf"] == "r0000001"  # the chunk's leaf is older than the index (at 50 < 100)
    later = dict(meta[keyed_key("s", ["r0000004", "r0000005"])], at=101)
    meta[keyed_key("s", ["r0000004", "r0000005"])] = later
    assert assemble(meta)["sessions"]["s"]["leaf"] == "r0000005"
