"""buildSessionContext with compactions and branch summaries, and context tokens (pi.md §1.3, §5.5)."""

from __future__ import annotations

from ipyagent.session.context import (
    ContextState,
    build_session_context,
    context_entries,
)
from ipyagent.session.entries import compaction_entry
from ipyagent.session.messages import text_of
from ipyagent.session.tokens import Chars4Estimator
from support.builders import assistant, call, new_session, tool_result, user

chars4 = Chars4Estimator()


def texts(session) -> list[str]:
    return [text_of(m["content"]) if m["role"] != "assistant" else "A:" + text_of(m["content"])
            for m in session.build_context()]


def test_plain_path_is_every_message_in_order():
    s = new_session(user("u1"), assistant("a1"), user("u2"))
    assert texts(s) == ["u1", "A:a1", "u2"]
    assert s.agent_messages() == [e["message"] for e in s.entries]


def test_compaction_summary_first_then_from_first_kept_then_after():
    s = new_session(user("u1"), assistant("a1"), user("u2"), assistant("a2"))
    u1, a1, u2, a2 = s.entries
    s.append(compaction_entry("SUM", u2["id"], 999))
    s.append_message(user("u3"))
    out = texts(s)
    assert out[0] == ("The conversation history before this point was compacted into the following summary:"
                      "\n\n<summary>\nSUM\n</summary>")
    assert out[1:] == ["u2", "A:a2", "u3"]
    agent = s.agent_messages()
    assert agent[0] == {"role": "compactionSummary", "summary": "SUM", "tokensBefore": 999,
                        "timestamp": agent[0]["timestamp"]}


def test_only_the_latest_compaction_counts():
    s = new_session(user("u1"), assistant("a1"), user("u2"), assistant("a2"))
    u1, a1, u2, a2 = s.entries
    s.append(compaction_entry("FIRST", a1["id"], 10))
    u3 = s.append_message(user("u3"))
    s.append(compaction_entry("SECOND", u3["id"], 20))
    s.append_message(assistant("a3"))
    out = texts(s)
    assert "SECOND" in out[0] and not any("FIRST" in t for t in out)
    assert out[1:] == ["u3", "A:a3"]


def test_first_kept_not_on_path_keeps_only_summary_and_after():
    s = new_session(user("u1"), assistant("a1"))
    s.append(compaction_entry("S", "elsewhere", 10))
    s.append_message(user("u2"))
    out = texts(s)
    assert len(out) == 2 and "S" in out[0] and out[1] == "u2"


def test_context_entries_gives_the_position_after_the_compaction():
    s = new_session(user("u1"))
    c = s.append(compaction_entry("S", "placeholder", 10))  # firstKeptEntryId not on the path
    s.append_message(user("u2"))
    ordered, floor = context_entries(s.path())
    assert ordered[0] is c and floor == 1


def test_branch_summary_and_custom_message_become_user_messages():
    s = new_session(user("u1"))
    s.append({"type": "branch_summary", "fromId": s.leaf_id, "summary": "went elsewhere"})
    s.append({"type": "branch_summary", "fromId": s.leaf_id, "summary": ""})  # empty: skipped
    s.append({"type": "custom_message", "customType": "ext", "content": "note", "display": True})
    s.append({"type": "custom", "customType": "state", "data": {"x": 1}})  # never in context
    s.append({"type": "model_change", "provider": "openai", "modelId": "gpt-4.1"})
    s.append_message(user("u2"))
    assert texts(s) == ["u1", ("The following is a summary of a branch that this conversation came back from:"
                              "\n\n<summary>\nwent elsewhere</summary>"), "note", "u2"]


def test_bash_execution_excluded_is_in_agent_messages_but_not_llm():
    s = new_session(user("u1"))
    s.append_message({"role": "bashExecution", "command": "secret", "output": "", "exitCode": 0,
                      "cancelled": False, "truncated": False, "excludeFromContext": True, "timestamp": 1})
    assert len(s.agent_messages()) == 2 and len(s.build_context()) == 1


def test_leaf_none_gives_empty_context():
    s = new_session(user("u1"))
    s.branch(None)
    assert s.build_context() == [] and s.context_tokens() == 0


def test_context_follows_the_leaf():
    s = new_session(user("u1"), assistant("a1"), user("u2"))
    u1, a1, u2 = s.entries
    s.branch(a1["id"])
    s.append_message(user("other"))
    assert texts(s) == ["u1", "A:a1", "other"]
    s.branch(u2["id"])
    assert texts(s) == ["u1", "A:a1", "u2"]


# ---- context tokens ---------------------------------------------------------------------------

def test_context_tokens_last_usage_plus_trailing():
    s = new_session(user("x" * 4000), assistant("a", total=1500))
    assert s.context_tokens() == 1500
    s.append_message(tool_result("c", "r" * 40))
    s.append_message(user("u" * 8))
    assert s.context_tokens() == 1500 + 10 + 2


def test_error_and_aborted_usage_ignored():
    s = new_session(user("x"), assistant("a", total=1000))
    s.append_message(assistant("e" * 4, total=99_000, stop="error"))
    s.append_message(assistant("b" * 4, total=99_000, stop="aborted"))
    assert s.context_tokens() == 1000 + 1 + 1


def test_no_usage_at_all_estimates_everything():
    s = new_session(user("x" * 40), assistant("y" * 40, stop="error"))
    assert s.context_tokens() == 20


def test_usage_from_before_the_latest_compaction_is_ignored():
    s = new_session(user("u1" * 100), assistant("a1", total=150_000), user("u2" * 10),
                    assistant("a2" * 10, total=160_000))
    u1, a1, u2, a2 = s.entries
    c = s.append(compaction_entry("S" * 40, u2["id"], 160_000))
    # kept a2's usage describes the old, larger context: everything is estimated
    expected = chars4.estimate({"role": "compactionSummary", "summary": c["summary"]}) \
        + chars4.estimate(u2["message"]) + chars4.estimate(a2["message"])
    assert s.context_tokens() == expected
    s.append_message(user("q" * 8))
    assert s.context_tokens() == expected + 2
    s.append_message(assistant("fresh", total=12_345))
    assert s.context_tokens() == 12_345


def test_incremental_state_equals_a_full_rebuild():
    s = new_session(user("u1"), assistant("a1", call("c1", "read", path="p"), total=100))
    s.append_message(tool_result("c1", "r" * 30))
    s.append({"type": "custom_message", "customType": "e", "content": "cm", "display": True})
    s.append({"type": "label", "targetId": s.leaf_id, "label": "L"})
    s.append_message(assistant("a2", total=300))
    s.append_message(user("u2" * 7))
    state = s.context_state()
    fresh = ContextState.build(s.path(), s.leaf_id, lambda e, m: chars4.estimate(m))
    assert state.llm_messages == fresh.llm_messages
    assert state.agent_messages == fresh.agent_messages == build_session_context(s.path())
    assert state.estimates == fresh.estimates
    assert state.context_tokens() == fresh.context_tokens() == 300 + 4


def test_set_estimator_recomputes():
    s = new_session(user("x" * 40))
    assert s.context_tokens() == 10

    class Double:
        name = "double"

        def estimate(self, message):
            return 2 * chars4.estimate(message)

    s.set_estimator(Double())
    assert s.context_tokens() == 20
