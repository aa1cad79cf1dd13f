"""The session tree: append, branch, path, labels (pi.md §5.4)."""

from __future__ import annotations

import pytest

from ipyagent.session.entries import label_entry, message_entry
from ipyagent.session.tree import SessionError, SessionTree
from support.builders import assistant, ids_of, new_session, user


def test_append_chains_under_leaf_and_moves_leaf():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    b = tree.append(message_entry(assistant("b")))
    assert tree.leaf_id == b["id"] and b["parentId"] == a["id"]
    assert ids_of(tree.path()) == [a["id"], b["id"]]
    assert len(tree) == 2 and a["id"] in tree and tree.get(a["id"]) is a


def test_append_copies_the_callers_dict():
    tree = SessionTree()
    message = user("a")
    entry = message_entry(message)
    stored = tree.append(entry)
    message["content"] = "changed"
    assert stored["message"]["content"] == "a"
    assert "id" not in entry


def test_branch_then_append_records_a_new_branch():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    b = tree.append(message_entry(assistant("b")))
    tree.branch(a["id"])
    assert ids_of(tree.path()) == [a["id"]]
    c = tree.append(message_entry(assistant("c")))
    assert c["parentId"] == a["id"]
    assert ids_of(tree.path()) == [a["id"], c["id"]]
    assert ids_of(tree.path(b["id"])) == [a["id"], b["id"]]
    assert ids_of(tree.children(a["id"])) == [b["id"], c["id"]]
    assert len(tree) == 3  # nothing removed


def test_branch_to_none_starts_a_second_root():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    tree.branch(None)
    assert tree.path() == []
    b = tree.append(message_entry(user("b")))
    assert b["parentId"] is None
    assert ids_of(tree.children(None)) == [a["id"], b["id"]]


def test_branch_to_unknown_entry_raises_and_changes_nothing():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    with pytest.raises(SessionError):
        tree.branch("deadbeef")
    assert tree.leaf_id == a["id"]


def test_explicit_parent_and_id():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    tree.append(message_entry(assistant("b")))
    c = tree.append({**message_entry(user("c")), "id": "cccccccc", "parentId": a["id"]})
    assert c["id"] == "cccccccc" and c["parentId"] == a["id"] and tree.leaf_id == "cccccccc"
    assert ids_of(tree.path()) == [a["id"], "cccccccc"]


@pytest.mark.parametrize("bad", [
    {"type": "message"},
    {**message_entry(user("x")), "parentId": "nothere1"},
    {**message_entry(user("x")), "id": ""},
    {**message_entry(user("x")), "id": 7},
])
def test_bad_appends_raise_and_change_nothing(bad):
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    with pytest.raises(SessionError):
        tree.append(bad)
    assert len(tree) == 1 and tree.leaf_id == a["id"]


def test_duplicate_id_rejected():
    tree = SessionTree()
    a = tree.append(message_entry(user("a")))
    with pytest.raises(SessionError, match="already exists"):
        tree.append({**message_entry(user("b")), "id": a["id"]})


def test_leaf_defaults_to_last_entry_in_file_order():
    entries = [
        {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "t", "message": user("a")},
        {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "t", "message": user("b")},
        {"type": "message", "id": "cccccccc", "parentId": "aaaaaaaa", "timestamp": "t", "message": user("c")},
    ]
    assert SessionTree(entries=entries).leaf_id == "cccccccc"
    assert SessionTree(entries=entries, leaf_id="bbbbbbbb").leaf_id == "bbbbbbbb"
    assert SessionTree(entries=entries, leaf_id="zzzzzzzz").leaf_id == "cccccccc"
    assert SessionTree().leaf_id is None and SessionTree().path() == []


def test_labels_last_wins_and_empty_clears():
    session = new_session(user("a"), assistant("b"))
    a, b = session.entries
    session.label(a["id"], "first")
    session.label(a["id"], "second")
    session.label(b["id"], "other")
    assert session.labels() == {a["id"]: "second", b["id"]: "other"}
    session.label(b["id"], None)
    assert session.labels() == {a["id"]: "second"}
    session.append(label_entry(a["id"], ""))
    assert session.labels() == {}
    with pytest.raises(SessionError):
        session.label("nothere1", "x")


def test_path_cache_follows_appends_and_branches():
    session = new_session(user("a"), assistant("b"), user("c"))
    a, b, c = session.entries
    assert ids_of(session.path()) == [a["id"], b["id"], c["id"]]
    session.branch(b["id"])
    assert ids_of(session.path()) == [a["id"], b["id"]]
    d = session.append_message(user("d"))
    assert ids_of(session.path()) == [a["id"], b["id"], d["id"]]
    session.branch(c["id"])
    assert ids_of(session.path()) == [a["id"], b["id"], c["id"]]
    # path() returns a copy: mutating it does not corrupt the cache
    session.path().clear()
    assert len(session.path()) == 3


def test_follow_moves_along_identical_entries_and_branches_where_they_differ():
    tree = SessionTree()
    recorded = [tree.append(message_entry(user("q"))), tree.append(message_entry(assistant("a"))),
                tree.append(message_entry(user("q2"))), tree.append(message_entry(assistant("a2")))]
    tree.branch(None)
    tree.follow(tree.path(recorded[-1]["id"]))
    # the same words written again (new timestamps, an execution count): the recorded entries themselves
    first = tree.append(message_entry(dict(user("q"), timestamp=99, executionCount=7)))
    second = tree.append(message_entry(assistant("a")))
    assert first is recorded[0] and second is recorded[1]
    assert len(tree) == 4 and tree.leaf_id == recorded[1]["id"]
    # the first entry that differs starts a branch; after it nothing is followed
    other = tree.append(message_entry(user("another question")))
    again = tree.append(message_entry(assistant("a2")))
    assert len(tree) == 6 and other["parentId"] == recorded[1]["id"] and again["parentId"] == other["id"]
    tree.follow(None)
    tree.branch(None)
    assert tree.append(message_entry(user("q")))["id"] not in ids_of(recorded)  # not following: a copy


def test_followed_next_is_what_the_followed_path_did_after_the_leaf():
    tree = SessionTree()
    recorded = [tree.append(message_entry(user("q"))), tree.append(message_entry(assistant("a"))),
                tree.append(message_entry(user("q2")))]
    assert not tree.on_followed_path() and tree.followed_next() is None  # nothing followed
    tree.branch(None)
    tree.follow(tree.path(recorded[-1]["id"]))
    assert tree.on_followed_path() and tree.followed_next() is recorded[0]
    tree.append(message_entry(user("q")))
    assert tree.on_followed_path() and tree.followed_next() is recorded[1]
    tree.branch(recorded[-1]["id"])
    assert tree.on_followed_path() and tree.followed_next() is None  # at the path's end
    tree.branch(recorded[0]["id"])
    tree.append(message_entry(assistant("something else")))  # departs: a new branch
    assert not tree.on_followed_path() and tree.followed_next() is None
    tree.follow(None)
    tree.branch(recorded[0]["id"])
    assert not tree.on_followed_path() and tree.followed_next() is None


def test_follow_never_reuses_an_entry_given_its_own_id_or_parent():
    tree = SessionTree()
    q = tree.append(message_entry(user("q")))
    tree.branch(None)
    tree.follow([q])
    assert tree.append({**message_entry(user("q")), "id": "cafe0001"})["id"] == "cafe0001"
    tree.branch(None)
    assert tree.append({**message_entry(user("q")), "parentId": "cafe0001"})["id"] != q["id"]


def test_same_content_ignores_place_time_and_measured_figures():
    from ipyagent.session.entries import compaction_entry, same_content

    a = {"id": "a", "parentId": None, "timestamp": "t1", **compaction_entry("S", "k1", 100, usage={"input": 1})}
    b = {"id": "b", "parentId": "x", "timestamp": "t2", **compaction_entry("S", "k1", 120, details={"readFiles": []})}
    assert same_content(a, b)
    assert not same_content(a, {**b, "firstKeptEntryId": "k2"})
    assert not same_content(a, {**b, "summary": "T"})
    assert not same_content(message_entry(user("q")), message_entry(dict(user("q"), cellId="c2")))
    assert not same_content(message_entry(user("q")), label_entry("x", "q"))


def test_follow_takes_the_followers_own_idea_of_the_same_entry():
    tree = SessionTree()
    q = tree.append(message_entry(dict(user("q"), cellId="c1")))
    tree.branch(None)
    tree.follow([q], same=lambda old, new: old["message"].get("cellId") == new["message"].get("cellId"))
    assert tree.append(message_entry(dict(user("worded differently"), cellId="c1"))) is q
    assert len(tree) == 1
