"""A journal never takes over a recorded session (issue: a failed papermill run's journal replaced
the session's header and moved its leaf onto a system message and three unanswered prompts).

Entries made by a kernel that had not loaded the notebook's session (another session header)
join it as a branch from where they really started, when one hangs from a stored entry; else
they are kept as their own session, named so; the stored session's header, leaf and settings
stay. A journal of the session's own kernel still moves the leaf (the user's own run), and
``ipyagent inspect`` reports a session with two roots (what an older lift made) as a problem."""

from __future__ import annotations

import json

from ipyagent import cli
from ipyagent.store.ipynb import (
    lift_notebook,
    lift_notebook_report,
    new_notebook,
    read_notebook,
    sessions_from_notebook,
    write_notebook,
)
from ipyagent.store.journal import JOURNAL_MIME, journal_payload
from ipyagent.store.validation import foreign_session_name
from support.builders import assistant, new_session, user

STORED = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
OTHER = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


def _recorded():
    session = new_session(user("first"), assistant("one"), user("second"), assistant("two"))
    session.header["id"] = STORED
    return session


def _journal_cell(payload: dict) -> dict:
    return {"cell_type": "code", "id": "journal", "metadata": {}, "execution_count": 1, "source": "%%agent\nx",
            "outputs": [{"output_type": "display_data", "metadata": {}, "data": {JOURNAL_MIME: payload}}]}


def _notebook(tmp_path, payload: dict, session=None, stored: int | None = None):
    """A notebook holding ``session`` (its first ``stored`` entries) and the journal ``payload``."""
    session = session or _recorded()
    entries = session.entries[:stored]
    nb = new_notebook([_journal_cell(payload)])
    nb["metadata"]["ipyagent"] = {"version": 1, "active": "default", "sessions": {"default": {
        "header": session.header, "leaf": entries[-1]["id"], "settings": {"model": "openai:m"},
        "entries": entries}}}
    path = tmp_path / "rec.ipynb"
    write_notebook(path, nb)
    return path, session


def _failed_run_of_another_kernel():
    """What a kernel that did not load the session journals: a new root, its system message, a
    prompt that failed (no answer)."""
    other = new_session({"role": "system", "content": "system prompt"}, user("first"))
    other.header["id"] = OTHER
    return other


def test_a_journal_of_a_kernel_that_had_not_loaded_the_session_is_kept_as_its_own_session(tmp_path):
    other = _failed_run_of_another_kernel()
    payload = journal_payload("default", other.header, other.leaf_id, {"model": "openai:x"}, other.entries)
    path, recorded = _notebook(tmp_path, payload)
    added, report, _, _ = lift_notebook_report(path)
    assert added == 2
    sessions, _ = sessions_from_notebook(read_notebook(path))
    mine = sessions.sessions["default"]
    assert mine.header["id"] == STORED and mine.leaf == recorded.leaf_id and mine.settings == {"model": "openai:m"}
    assert [e["id"] for e in mine.entries] == [e["id"] for e in recorded.entries]
    kept = sessions.sessions[foreign_session_name("default", OTHER)]
    assert kept.header["id"] == OTHER and [e["id"] for e in kept.entries] == [e["id"] for e in other.entries]
    assert sessions.active == "default"
    assert "had not loaded" in report.summary()
    assert lift_notebook(path) == 0  # idempotent


def test_another_kernels_entries_that_start_from_a_stored_entry_join_it_as_a_branch(tmp_path):
    recorded = _recorded()
    fork_from = recorded.entries[1]["id"]
    branch = new_session()
    branch.header["id"] = OTHER
    entry = branch.append({"type": "message", "parentId": None, "message": user("another second")})
    entry = dict(entry, parentId=fork_from)
    payload = journal_payload("default", branch.header, entry["id"], {}, [entry])
    path, _ = _notebook(tmp_path, payload, recorded)
    assert lift_notebook(path) == 1
    sessions, _ = sessions_from_notebook(read_notebook(path))
    mine = sessions.sessions["default"]
    assert list(sessions.sessions) == ["default"]
    assert mine.header["id"] == STORED and mine.leaf == recorded.leaf_id  # the leaf did not move
    assert mine.entries[-1]["id"] == entry["id"] and mine.entries[-1]["parentId"] == fork_from


def test_the_sessions_own_kernels_journal_still_moves_the_leaf(tmp_path):
    recorded = _recorded()
    recorded.append({"type": "message", "message": user("third")})
    new = recorded.entries[-1]
    payload = journal_payload("default", recorded.header, new["id"], {"model": "openai:m"}, [new])
    path, _ = _notebook(tmp_path, payload, recorded, stored=-1)
    assert lift_notebook(path) == 1
    sessions, _ = sessions_from_notebook(read_notebook(path))
    assert sessions.sessions["default"].leaf == new["id"]


def test_inspect_reports_two_roots_in_one_session(tmp_path, capsys):
    recorded, other = _recorded(), _failed_run_of_another_kernel()
    nb = new_notebook()
    nb["metadata"]["ipyagent"] = {"version": 1, "active": "default", "sessions": {"default": {
        "header": recorded.header, "leaf": other.leaf_id, "settings": {},
        "entries": recorded.entries + other.entries}}}  # what an older lift made of it
    path = tmp_path / "merged.ipynb"
    write_notebook(path, nb)
    assert cli.main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any("2 roots" in p for p in report["problems"])
    assert cli.main(["inspect", str(path)]) == 0
    assert "2 roots" in capsys.readouterr().err
