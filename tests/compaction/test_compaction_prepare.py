"""prepare_compaction (pi.md §2.1) with ipyagent's fixes: the next compaction starts at the
previous firstKeptEntryId (Pi #2608), nothing to summarise gives None, no spurious split."""

from __future__ import annotations

import dataclasses

from ipyagent.compaction.prepare import prepare_compaction, summarizing_boundary
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.session.context import build_session_context
from ipyagent.session.entries import compaction_entry
from ipyagent.session.tokens import Chars4Estimator, estimate_context_tokens
from support.builders import assistant, call, ids_of, new_session, tool_result, turn, user

KEEP = CompactionSettings(keep_recent_tokens=600)


def four_turns():
    s = new_session()
    for k in range(4):
        turn(s, f"prompt {k}", size=400, tools=2)
    return s


def test_plan_fields_for_a_split_turn():
    s = four_turns()
    path = s.path()
    plan = s.prepare_compaction(KEEP)
    # each turn: user(2) a(107) tr(100) a(107) tr(100) a(102) tokens; the last 600 reach back to
    # the second tool result of the last turn... the cut lands on its assistant (index 17)
    assert plan.boundary_start == 0
    assert plan.first_kept_index == 17 and plan.first_kept_entry_id == path[17]["id"]
    assert path[17]["message"]["role"] == "assistant"
    assert plan.is_split_turn and plan.turn_start_index == 12
    assert plan.summarized_entry_ids == ids_of(path[:12])
    assert plan.turn_prefix_entry_ids == ids_of(path[12:17])
    assert plan.messages_to_summarize == [e["message"] for e in path[:12]]
    assert plan.turn_prefix_messages == [e["message"] for e in path[12:17]]
    assert plan.tokens_before == s.context_tokens() == sum(
        s.estimate_entry(e, e["message"]) for e in path)
    assert plan.previous_summary is None
    assert plan.file_ops.lists() == (["src/app.py"], [])
    assert plan.to_summary_dict() == {
        "first_kept_entry_id": path[17]["id"], "is_split_turn": True, "tokens_before": plan.tokens_before,
        "messages_to_summarize": 12, "turn_prefix_messages": 5, "read_files": ["src/app.py"],
        "modified_files": [], "previous_summary": False}


def test_cut_at_a_user_message_is_not_split():
    s = four_turns()
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=518))  # exactly the last turn
    path = s.path()
    assert path[plan.first_kept_index]["message"]["role"] == "user"
    assert not plan.is_split_turn and plan.turn_prefix_messages == []
    assert plan.summarized_entry_ids == ids_of(path[:plan.first_kept_index])


def test_nothing_to_summarise_gives_none():
    s = four_turns()
    assert s.prepare_compaction(CompactionSettings(keep_recent_tokens=100_000)) is None
    assert prepare_compaction([], KEEP) is None


def test_last_entry_already_a_compaction_gives_none():
    s = four_turns()
    s.append(compaction_entry("S", s.path()[6]["id"], 100))
    assert s.prepare_compaction(KEEP) is None


def test_next_compaction_starts_at_the_previous_first_kept_entry():
    s = four_turns()
    first = s.compact(ScriptedSummarizer(["HIST 1", "PREFIX 1"]), KEEP)
    kept_by_first = [e["id"] for e in s.path()[:-1]]
    kept_by_first = kept_by_first[kept_by_first.index(first["firstKeptEntryId"]):]
    assert kept_by_first  # compaction 1 kept some messages verbatim
    for k in range(4, 8):
        turn(s, f"prompt {k}", size=400, tools=2)
    path = s.path()
    plan = s.prepare_compaction(KEEP)
    assert path[plan.boundary_start]["id"] == first["firstKeptEntryId"]
    # Pi 0.58 started after the compaction entry and lost these (Pi #2608)
    covered = plan.summarized_entry_ids + plan.turn_prefix_entry_ids
    assert set(kept_by_first) <= set(covered)
    assert first["id"] not in covered  # the previous summary goes separately
    assert plan.previous_summary == first["summary"]
    assert all(m.get("role") != "compactionSummary" for m in plan.messages_to_summarize)


def test_boundary_falls_back_after_the_compaction_when_first_kept_is_off_the_path():
    s = four_turns()
    c = s.append(compaction_entry("S", "offpath1", 100))
    for k in range(3):
        turn(s, f"more {k}", size=400, tools=2)
    path = s.path()
    assert summarizing_boundary(path, path.index(c)) == path.index(c) + 1
    plan = s.prepare_compaction(KEEP)
    assert plan.boundary_start == path.index(c) + 1


def test_no_spurious_split_when_the_cut_lands_after_a_settings_entry():
    s = new_session()
    for k in range(3):
        turn(s, f"prompt {k}", size=400, tools=1)
    s.append({"type": "model_change", "provider": "openai", "modelId": "gpt-4.1"})
    s.append({"type": "thinking_level_change", "thinkingLevel": "high"})
    last = turn(s, "last", size=400, tools=1)
    path = s.path()
    settings = CompactionSettings(keep_recent_tokens=sum(
        s.estimate_entry(e, e["message"]) for e in path if e["id"] in last))
    plan = s.prepare_compaction(settings)
    assert path[plan.first_kept_index]["type"] == "model_change"
    assert not plan.is_split_turn and plan.turn_prefix_messages == []
    assert plan.summarized_entry_ids == ids_of([e for e in path[:plan.first_kept_index] if e["type"] == "message"])


def test_file_ops_from_previous_details_and_summarised_calls_only():
    s = new_session(user("go"),
                    assistant("", call("c1", "read", path="a.py"), call("c2", "write", path="b.py"),
                              call("c3", "edit", path="a.py"), call("c4", "bash", command="ls"),
                              call("c5", "read", path=7)),
                    tool_result("c1"), tool_result("c2"), tool_result("c3"), tool_result("c4"), tool_result("c5"),
                    user("u" * 4000),
                    assistant("", call("c6", "read", path="tail_only.py")), tool_result("c6", "x" * 4000))
    s.append(compaction_entry("S", s.path()[7]["id"], 10,
                              details={"readFiles": ["old_read.py"], "modifiedFiles": ["old_mod.py"]}))
    for k in range(2):
        turn(s, f"t{k}", size=4000, tools=1, path="new.py")
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=2100))
    read, modified = plan.file_ops.lists()
    assert "tail_only.py" in read  # was kept by compaction 1, summarised now
    assert "old_read.py" in read and "old_mod.py" in modified
    assert "new.py" in read


def test_from_hook_previous_details_are_ignored():
    s = new_session(user("u" * 4000), assistant("a" * 4000))
    s.append(compaction_entry("S", s.path()[1]["id"], 10, details={"readFiles": ["hook.py"], "modifiedFiles": []},
                              from_hook=True))
    turn(s, "t", size=4000, tools=1, path="mine.py")
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1000))
    read, modified = plan.file_ops.lists()
    assert "hook.py" not in read and "mine.py" in read


def test_read_and_modified_lists_are_disjoint_and_sorted():
    s = new_session(user("go"),
                    assistant("", call("c1", "read", path="z.py"), call("c2", "read", path="b.py"),
                              call("c3", "edit", path="b.py"), call("c4", "write", path="a.py")),
                    tool_result("c1"), tool_result("c2"), tool_result("c3"), tool_result("c4"),
                    user("u" * 4000), assistant("a" * 4000))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    assert plan.file_ops.lists() == (["z.py"], ["a.py", "b.py"])
    assert plan.file_ops.details() == {"readFiles": ["z.py"], "modifiedFiles": ["a.py", "b.py"]}


def test_standalone_prepare_estimates_tokens_before_from_the_context():
    s = four_turns()
    path = s.path()
    plan = prepare_compaction(path, KEEP)
    assert plan.tokens_before == estimate_context_tokens(build_session_context(path), Chars4Estimator())
    session_plan = s.prepare_compaction(KEEP)
    assert plan.first_kept_entry_id == session_plan.first_kept_entry_id


def test_tokens_before_uses_reported_usage():
    s = new_session()
    turn(s, "a", size=4000, tools=1)
    turn(s, "b", size=4000, tools=1, total=150_000)
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=1500))
    assert plan.tokens_before == 150_000


def test_a_given_first_kept_entry_fixes_the_cut_whatever_the_settings_say():
    s = four_turns()
    path = s.path()
    live = s.prepare_compaction(KEEP)
    assert live.first_kept_index == 17 and live.is_split_turn
    # the same cut given back under other settings: the same plan, split turn and all
    other = CompactionSettings(keep_recent_tokens=50)
    assert s.prepare_compaction(other, first_kept_entry_id=path[17]["id"]) == dataclasses.replace(live, settings=other)
    # another recorded cut, at a prompt: nothing split, everything before it summarised
    plan = s.prepare_compaction(KEEP, first_kept_entry_id=path[6]["id"])
    assert plan.first_kept_index == 6 and not plan.is_split_turn
    assert plan.summarized_entry_ids == ids_of(path[:6]) and plan.turn_prefix_entry_ids == []


def test_a_given_first_kept_entry_off_the_summarisable_part_gives_none():
    s = four_turns()
    first = s.compact(ScriptedSummarizer(["HIST 1", "PREFIX 1"]), KEEP)
    turn(s, "more", size=400, tools=2)
    path = s.path()
    before_boundary = path[path.index(s.get(first["firstKeptEntryId"])) - 1]["id"]
    assert s.prepare_compaction(KEEP, first_kept_entry_id=before_boundary) is None
    assert s.prepare_compaction(KEEP, first_kept_entry_id="notthere") is None
