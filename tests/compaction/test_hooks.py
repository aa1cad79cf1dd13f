"""Hooks (pi.md §6.1): registration, result rules, failures reported not fatal, and the compaction
hooks as the Session fires them (packages' hooks: tests/plugins/test_plugins.py)."""

from __future__ import annotations

import warnings

import pytest

from ipyagent.compaction.compact import CompactionRejected
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.core import CompactionCancelled
from ipyagent.hooks import (
    SESSION_HOOKS,
    ContextCall,
    ContextResult,
    HookRegistry,
    SessionBeforeCompactCall,
    SessionBeforeCompactResult,
    SessionBeforeTreeCall,
    SessionBeforeTreeResult,
    SuppliedCompaction,
    TurnEndCall,
)
from support.builders import new_session, turn

KEEP = CompactionSettings(keep_recent_tokens=518)


def test_decorator_and_direct_registration(registry):
    @registry.on("turn_end")
    def one(event):
        return None

    registry.on("turn_end", lambda e: None)
    assert registry.has("turn_end") and len(registry.handlers["turn_end"]) == 2
    assert one.__name__ == "one"  # the decorator returns the function
    registry.off("turn_end", one)
    assert len(registry.handlers["turn_end"]) == 1
    registry.clear()
    assert not registry.has("turn_end")


def test_unknown_event_rejected(registry):
    with pytest.raises(ValueError, match="unknown session hook"):
        registry.on("session_before_everything")
    assert set(SESSION_HOOKS) >= {"session_before_compact", "session_compact", "session_before_tree", "session_tree",
                           "context", "before_provider_request", "turn_end", "agent_end"}


def test_a_hook_call_has_its_fields_as_attributes(registry):
    seen = []
    registry.on("context", lambda call: seen.append((call.type, call.messages)))
    registry.emit(ContextCall(messages=[1, 2]))
    assert seen == [("context", [1, 2])]


def test_last_truthy_result_wins(registry):
    order = []
    registry.on("context", lambda e: order.append(1) or {"messages": ["first"]})
    registry.on("context", lambda e: order.append(2) or {"messages": ["second"]})
    registry.on("context", lambda e: order.append(3) or None)
    registry.on("context", lambda e: order.append(4) or {})
    assert registry.emit(ContextCall(messages=[])) == ContextResult(["second"])  # a dict, read as Pi names it
    assert order == [1, 2, 3, 4]
    assert HookRegistry().emit(ContextCall(messages=[])) is None


def test_cancel_returns_at_once(registry):
    ran = []
    registry.on("session_before_compact", lambda e: ran.append("a") or {"compaction": {"summary": "x"}})
    registry.on("session_before_compact", lambda e: ran.append("b") or {"cancel": True})
    registry.on("session_before_compact", lambda e: ran.append("c") or {"compaction": {"summary": "y"}})
    assert registry.emit(SessionBeforeCompactCall()) == SessionBeforeCompactResult(cancel=True)
    assert ran == ["a", "b"]

    registry.clear()
    registry.on("session_before_tree", lambda e: SessionBeforeTreeResult(cancel=True))
    registry.on("session_before_tree", lambda e: ran.append("never"))
    assert registry.emit(SessionBeforeTreeCall()) == SessionBeforeTreeResult(cancel=True) and "never" not in ran


def test_failing_handler_is_reported_not_fatal(registry):
    def broken(event):
        raise KeyError("missing")

    registry.on("turn_end", broken)
    registry.on("turn_end", lambda e: "after")
    with pytest.warns(RuntimeWarning, match="broken failed on turn_end"):
        assert registry.emit(TurnEndCall()) is None  # what an observing hook returns is ignored
    [error] = registry.errors
    assert error.hook == "turn_end" and "broken" in error.handler and "KeyError" in error.error


# ---- the compaction hooks, fired by Session.compact ---------------------------------------------

def session_with(registry):
    s = new_session(hooks=registry)
    for k in range(4):
        turn(s, f"prompt {k}", size=400, tools=2)
    return s


def test_before_compact_event_fields_and_after_event(registry):
    seen = {}
    registry.on("session_before_compact", lambda e: seen.setdefault("before", e) and None)
    registry.on("session_compact", lambda e: seen.setdefault("after", e) and None)
    s = session_with(registry)
    entry = s.compact(ScriptedSummarizer(["S"]), KEEP, focus="tests", reason="threshold")
    before, after = seen["before"], seen["after"]
    assert before.preparation.first_kept_entry_id == entry["firstKeptEntryId"]
    assert [e["id"] for e in before.branch_entries] == [e["id"] for e in s.path()[:-1]]
    assert before.custom_instructions == "tests" and before.reason == "threshold" and before.session is s
    assert after.compaction_entry == entry and after.from_extension is False


def test_cancel_from_hook_leaves_session_unchanged(registry):
    registry.on("session_before_compact", lambda e: {"cancel": True})
    s = session_with(registry)
    n, leaf = len(s), s.leaf_id
    summarizer = ScriptedSummarizer(["S"])
    with pytest.raises(CompactionCancelled):
        s.compact(summarizer, KEEP)
    assert (len(s), s.leaf_id) == (n, leaf) and summarizer.requests == []


def test_hook_supplied_compaction_is_stored_verbatim_from_hook(registry):
    s = session_with(registry)
    custom_first = s.path()[6]["id"]
    registry.on("session_before_compact", lambda e: {"compaction": {
        "summary": "MY SUMMARY", "firstKeptEntryId": custom_first, "tokensBefore": 1234,
        "details": {"readFiles": ["own.py"], "modifiedFiles": []}}})
    after = []
    registry.on("session_compact", lambda e: after.append(e.from_extension))
    summarizer = ScriptedSummarizer([])
    entry = s.compact(summarizer, KEEP)
    assert summarizer.requests == []
    assert entry["summary"] == "MY SUMMARY"  # no file lists appended
    assert entry["firstKeptEntryId"] == custom_first and entry["tokensBefore"] == 1234
    assert entry["fromHook"] is True and entry["details"] == {"readFiles": ["own.py"], "modifiedFiles": []}
    assert after == [True]


def test_hook_supplied_empty_summary_rejected(registry):
    registry.on("session_before_compact", lambda e: {"compaction": {"summary": "  "}})
    s = session_with(registry)
    n = len(s)
    with pytest.raises(CompactionRejected):
        s.compact(ScriptedSummarizer([]), KEEP)
    assert len(s) == n


def test_failing_compaction_hook_falls_back_to_default(registry):
    def broken(event):
        raise RuntimeError("hook bug")

    registry.on("session_before_compact", broken)
    s = session_with(registry)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entry = s.compact(ScriptedSummarizer(["DEFAULT"]), KEEP)
    assert entry["summary"].startswith("DEFAULT") and registry.errors


# ---- results as dataclasses ----------------------------------------------------------------------


def test_a_hook_may_return_its_result_dataclass(registry):
    s = session_with(registry)
    first = s.path()[6]["id"]
    registry.on("session_before_compact", lambda call: SessionBeforeCompactResult(compaction=SuppliedCompaction(
        "DATACLASS SUMMARY", first_kept_entry_id=first, tokens_before=99)))
    summarizer = ScriptedSummarizer([])
    entry = s.compact(summarizer, KEEP)
    assert summarizer.requests == [] and entry["fromHook"] is True
    assert (entry["summary"], entry["firstKeptEntryId"], entry["tokensBefore"]) == ("DATACLASS SUMMARY", first, 99)


def test_a_dict_result_is_read_with_pis_field_names_only(registry):
    # Pi writes firstKeptEntryId; a result that spells it otherwise is reported and left aside, as a
    # handler that raised would be: the compaction goes ahead as planned
    s = session_with(registry)
    registry.on("session_before_compact", lambda call: {"compaction": {"summary": "MINE",
                                                                      "first_kept_entry_id": s.path()[6]["id"]}})
    with pytest.warns(RuntimeWarning, match="unknown field 'first_kept_entry_id'"):
        entry = s.compact(ScriptedSummarizer(["DEFAULT"]), KEEP)
    assert entry["summary"].startswith("DEFAULT") and not entry.get("fromHook")
    [error] = registry.errors
    assert error.hook == "session_before_compact" and "firstKeptEntryId" in error.error


def test_a_steering_hook_that_returns_something_else_is_reported(registry):
    registry.on("context", lambda call: ["not", "a", "result"])
    with pytest.warns(RuntimeWarning, match="returned a list, not a ContextResult or a dict"):
        assert registry.emit(ContextCall(messages=[])) is None
    assert registry.errors[0].hook == "context"
