"""Entries, ids and timestamps in Pi's formats (pi.md §5.3)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

import pytest

from ipyagent.session import ids
from ipyagent.session.entries import (
    ENTRY_TYPES,
    branch_summary_entry,
    compaction_entry,
    is_message_entry,
    label_entry,
    message_entry,
    model_change_entry,
    shape_problem,
)
from support.builders import assistant, new_session, user

HEX8 = re.compile(r"^[0-9a-f]{8}$")
ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_entry_id_is_8_hex_and_unique():
    existing: set[str] = set()
    for _ in range(2000):
        new = ids.new_entry_id(existing)
        assert HEX8.match(new)
        assert new not in existing
        existing.add(new)


def test_entry_id_falls_back_to_full_uuid_after_100_collisions(monkeypatch):
    class Everything:
        def __contains__(self, item):
            return len(item) == 8

    new = ids.new_entry_id(Everything())
    assert str(uuid.UUID(new)) == new


def test_iso_now_is_javascript_toisostring_shape():
    stamp = ids.iso_now()
    assert ISO_MS_Z.match(stamp)
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert abs((datetime.now(timezone.utc) - parsed).total_seconds()) < 5


def test_iso_to_ms_round_trip_and_odd_values():
    assert ids.iso_to_ms("2026-01-01T00:00:00.000Z") == 1_767_225_600_000
    assert ids.iso_to_ms("2026-01-01T00:00:01.234Z") == 1_767_225_601_234
    assert ids.iso_to_ms(1234) == 1234
    assert ids.iso_to_ms(None) == 0
    assert ids.iso_to_ms("not a date") == 0


def test_now_ms_is_close_to_iso_now():
    assert abs(ids.now_ms() - ids.iso_to_ms(ids.iso_now())) < 5000


def test_session_id_is_uuid():
    sid = ids.new_session_id()
    assert str(uuid.UUID(sid)) == sid


def test_appended_entry_gets_id_parent_timestamp_in_pi_key_order():
    session = new_session()
    first = session.append_message(user("a"))
    second = session.append_message(user("b"))
    assert list(first)[:4] == ["type", "id", "parentId", "timestamp"]
    assert HEX8.match(first["id"]) and ISO_MS_Z.match(first["timestamp"])
    assert first["parentId"] is None
    assert second["parentId"] == first["id"]
    assert first["message"]["content"] == "a"


def test_constructors_build_pi_shapes():
    assert message_entry(user("x"))["type"] == "message"
    c = compaction_entry("S", "abcd1234", 1000, details={"readFiles": [], "modifiedFiles": []}, from_hook=True)
    assert c == {"type": "compaction", "summary": "S", "firstKeptEntryId": "abcd1234", "tokensBefore": 1000,
                 "details": {"readFiles": [], "modifiedFiles": []}, "fromHook": True}
    assert "fromHook" not in compaction_entry("S", "abcd1234", 1)
    b = branch_summary_entry("root", "sum")
    assert b == {"type": "branch_summary", "fromId": "root", "summary": "sum"}
    assert label_entry("abcd1234", "bookmark") == {"type": "label", "targetId": "abcd1234", "label": "bookmark"}
    assert label_entry("abcd1234", None) == {"type": "label", "targetId": "abcd1234"}
    assert model_change_entry("openai", "gpt-4.1") == {"type": "model_change", "provider": "openai",
                                                       "modelId": "gpt-4.1"}
    assert set(ENTRY_TYPES) >= {"message", "compaction", "branch_summary", "custom", "custom_message", "label",
                                "session_info", "model_change", "thinking_level_change"}


def test_is_message_entry_by_role():
    entry = message_entry(assistant("hi"))
    assert is_message_entry(entry) and is_message_entry(entry, "assistant")
    assert not is_message_entry(entry, "user")
    assert not is_message_entry(label_entry("x", "y"))


@pytest.mark.parametrize("entry, fragment", [
    ([], "JSON object"),
    ({"id": "a"}, "no 'type'"),
    ({"type": "message", "parentId": 5, "message": user()}, "parentId"),
    ({"type": "message"}, "'message'"),
    ({"type": "message", "message": {"content": "x"}}, "role"),
    ({"type": "message", "message": {"role": "user", "content": 5}}, "content"),
    ({"type": "compaction", "summary": "s", "firstKeptEntryId": "a"}, "tokensBefore"),
    ({"type": "compaction", "summary": "s", "firstKeptEntryId": "a", "tokensBefore": True}, "tokensBefore"),
    ({"type": "branch_summary"}, "summary"),
    ({"type": "label"}, "targetId"),
    ({"type": "message", "message": {"role": "toolResult", "toolCallId": ["c"], "content": []}}, "toolCallId"),
])
def test_shape_problems_name_the_field(entry, fragment):
    problem = shape_problem(entry)
    assert problem is not None and fragment in problem


def test_good_shapes_and_unknown_types_pass():
    # what Pi reads, ipyagent reads too
    assert shape_problem(message_entry({"role": "assistant", "content": "a string"})) is None
    assert shape_problem(message_entry({"role": "toolResult", "content": []})) is None
    assert shape_problem({"type": "model_change", "provider": "x"}) is None
    assert shape_problem(message_entry(user())) is None
    assert shape_problem({"type": "session_info", "name": "x"}) is None
    assert shape_problem({"type": "some_future_type", "whatever": 1}) is None  # kept for round trips
