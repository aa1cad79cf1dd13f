"""Cut points (pi.md §2.2): never at a tool result, settings entries kept with the tail, split
turns, and ipyagent's fix of Pi's spurious split."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipyagent.compaction.cut_point import (
    CutPoint,
    cut_at,
    find_cut_point,
    find_turn_start,
    is_cut_point,
    is_turn_start,
)
from ipyagent.session.context import Projected
from ipyagent.session.messages import entry_messages


def est(entry, message):
    return entry.get("_t", 0)


def msg(role, tok=10):
    content = [] if role in ("assistant", "toolResult") else "x"
    m = {"role": role, "content": content}
    if role == "toolResult":
        m["toolCallId"] = "c"
    if role == "bashExecution":
        m = {"role": role, "command": "ls", "output": ""}
    return {"type": "message", "message": m, "_t": tok}


def other(kind, tok=10):
    base = {"type": kind, "_t": tok}
    if kind == "custom_message":
        base.update(customType="x", content="c", display=True)
    if kind == "branch_summary":
        base.update(fromId="root", summary="s")
    if kind == "compaction":
        base.update(summary="s", firstKeptEntryId="x", tokensBefore=1)
    return base


def path_of(*entries):
    out = []
    for i, e in enumerate(entries):
        out.append({**e, "id": f"{i:08x}", "parentId": f"{i - 1:08x}" if i else None})
    return out


def project(path):
    """Every entry in path order, a compaction contributing nothing (as an older compaction inside
    the kept range does), so that indexes are path indexes."""
    return [Projected(e, [] if e["type"] == "compaction" else entry_messages(e), i) for i, e in enumerate(path)]


def cut(path, keep, start=0):
    projection = project(path)
    return find_cut_point(projection, start, len(path), keep,
                          lambda i: sum(est(projection[i].entry, m) for m in projection[i].messages))


def test_valid_cut_points():
    for role in ("user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"):
        assert is_cut_point(msg(role))
    assert not is_cut_point(msg("toolResult"))
    assert is_cut_point(other("custom_message")) and is_cut_point(other("branch_summary"))
    for kind in ("thinking_level_change", "model_change", "compaction", "custom", "label", "session_info"):
        assert not is_cut_point({"type": kind})


def test_turn_starts():
    assert is_turn_start(msg("user")) and is_turn_start(msg("bashExecution"))
    assert is_turn_start(other("custom_message")) and is_turn_start(other("branch_summary"))
    assert not is_turn_start(msg("assistant")) and not is_turn_start(msg("toolResult"))


def test_cut_at_a_user_message_is_not_split():
    p = path_of(msg("user"), msg("assistant"), msg("user"), msg("assistant"))
    c = cut(p, 15)
    assert (c.first_kept_index, c.is_split_turn, c.turn_start_index) == (2, False, -1)


def test_budget_crossed_on_a_tool_result_moves_the_cut_forward():
    p = path_of(msg("user"), msg("assistant"), msg("toolResult"), msg("assistant"))
    c = cut(p, 15)  # crossed at index 2 (a tool result): the cut moves to the assistant at 3
    assert c.first_kept_index == 3
    assert c.is_split_turn and c.turn_start_index == 0


def test_never_cuts_at_a_tool_result_in_a_long_tool_loop():
    entries = [msg("user")]
    for _ in range(30):
        entries += [msg("assistant", 7), msg("toolResult", 13)]
    p = path_of(*entries)
    for keep in range(1, 600, 7):
        c = cut(p, keep)
        assert p[c.first_kept_index]["message"]["role"] != "toolResult"


def test_budget_never_reached_keeps_everything():
    p = path_of(msg("user"), msg("assistant"), msg("toolResult"), msg("assistant"))
    c = cut(p, 1000)
    assert (c.first_kept_index, c.is_split_turn) == (0, False)


def test_no_valid_cut_points_returns_start():
    p = path_of(msg("toolResult"), msg("toolResult"))
    assert cut(p, 5).first_kept_index == 0
    p = path_of(msg("user"), msg("toolResult"), msg("toolResult"))
    assert cut(p, 5, start=1).first_kept_index == 1


def test_settings_entries_before_the_cut_stay_with_the_tail_without_a_spurious_split():
    p = path_of(msg("user"), msg("assistant"), other("model_change", 0), other("thinking_level_change", 0),
                msg("user"), msg("assistant"))
    c = cut(p, 15)
    assert c.first_kept_index == 2  # moved back over the two settings entries
    # Pi 0.58 looked at the model_change, found u0 as turn start and split the turn; the turn
    # really starts at the user message at 4, so nothing is split.
    assert not c.is_split_turn and c.turn_start_index == -1


def test_backward_inclusion_stops_at_a_message_or_compaction():
    p = path_of(msg("user"), other("compaction", 0), other("label", 0), msg("user"), msg("assistant"))
    c = cut(p, 15)
    assert c.first_kept_index == 2


def test_split_turn_with_settings_entry_before_an_assistant_landing():
    p = path_of(msg("user"), msg("assistant"), msg("toolResult"), other("label", 0), msg("assistant"))
    c = cut(p, 5)  # lands on the assistant at 4, the label moves with it
    assert c.first_kept_index == 3 and c.is_split_turn and c.turn_start_index == 0


def test_custom_message_and_branch_summary_count_toward_the_kept_budget():
    p = path_of(msg("user"), msg("assistant"), other("custom_message", 50), msg("assistant", 10))
    c = cut(p, 55)  # 10 + 50 >= 55 at the custom message (Pi 0.58 skipped it and kept everything)
    assert c.first_kept_index == 2 and not c.is_split_turn
    p = path_of(msg("user"), msg("assistant"), other("branch_summary", 50), msg("assistant", 10))
    assert cut(p, 55).first_kept_index == 2


def test_bash_execution_starts_a_turn():
    p = path_of(msg("user"), msg("assistant"), msg("bashExecution"), msg("assistant"), msg("toolResult"),
                msg("assistant"))
    c = cut(p, 15)  # crossed at the tool result (4): cut moves to 5
    assert c.first_kept_index == 5 and c.is_split_turn and c.turn_start_index == 2


def test_turn_start_is_searched_only_from_start():
    p = path_of(msg("user"), msg("assistant"), msg("assistant"), msg("assistant"))
    c = cut(p, 10, start=1)
    assert c.first_kept_index == 3 and not c.is_split_turn
    assert find_turn_start(project(p), 3, 1) == -1 and find_turn_start(project(p), 3, 0) == 0


# ---- a cut chosen before (a replay reproducing a recorded compaction) ----------------------------

def test_cut_at_a_recorded_cut_decides_the_split_as_find_cut_point_did():
    p = path_of(msg("user"), msg("assistant"), msg("toolResult"), other("label", 0), msg("assistant"))
    assert cut_at(project(p), 0, 3) == cut(p, 5) == CutPoint(3, 0, True)  # the label before the landing
    p = path_of(msg("user"), msg("assistant"), other("model_change", 0), other("thinking_level_change", 0),
                msg("user"), msg("assistant"))
    assert cut_at(project(p), 0, 2) == cut(p, 15) == CutPoint(2, -1, False)  # no spurious split
    p = path_of(msg("user"), msg("assistant"), msg("assistant"), msg("assistant"))
    assert cut_at(project(p), 1, 3) == CutPoint(3, -1, False)  # the turn started before ``start``
    assert cut_at(project(p), 0, 3) == CutPoint(3, 0, True)


KINDS = [("message", "user"), ("message", "assistant"), ("message", "toolResult"), ("message", "bashExecution"),
         ("other", "model_change"), ("other", "label"), ("other", "custom_message"), ("other", "branch_summary"),
         ("other", "compaction")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 40)), min_size=1, max_size=30),
       keep=st.integers(0, 300), start_at=st.floats(0, 1))
def test_cut_at_reproduces_every_cut_find_cut_point_makes(kinds, keep, start_at):
    p = path_of(*[msg(name, tok) if kind == "message" else other(name, tok) for (kind, name), tok in kinds])
    start = int(start_at * (len(p) - 1))
    found = cut(p, keep, start)
    assert cut_at(project(p), start, found.first_kept_index) == found
