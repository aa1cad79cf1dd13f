"""Tree navigation and branch summaries (pi.md §7): leaf placement, fromId, labels, hooks."""

from __future__ import annotations

import pytest

from ipyagent.compaction import prompts
from ipyagent.compaction.branch import (
    NO_CONTENT,
    collect_branch_entries,
    generate_branch_summary,
    prepare_branch_entries,
)
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.session.entries import compaction_entry
from ipyagent.session.messages import text_of
from ipyagent.session.tokens import Chars4Estimator
from ipyagent.session.tree import SessionError
from support.builders import assistant, call, ids_of, new_session, tool_result, user

chars4 = Chars4Estimator()


def two_turns(**kwargs):
    """u1 a1 u2 a2(read x.py) tr2 a2b — returns the session and the entries."""
    s = new_session(user("u1"), assistant("a1"), user("u2"),
                    assistant("", call("c1", "read", path="x.py")), tool_result("c1", "contents"),
                    assistant("a2 done"), **kwargs)
    return s, list(s.entries)


def test_target_user_message_puts_the_leaf_on_its_parent():
    s, (u1, a1, u2, *_rest) = two_turns()
    assert s.navigate(u2["id"]) is None
    assert s.leaf_id == a1["id"] and len(s) == 6  # nothing appended
    s.navigate(u1["id"])
    assert s.leaf_id is None and s.build_context() == []
    fork = s.append_message(user("u1 again"))
    assert fork["parentId"] is None


def test_target_assistant_becomes_the_leaf():
    s, (u1, a1, *_rest) = two_turns()
    s.navigate(a1["id"])
    assert s.leaf_id == a1["id"]


def test_custom_message_target_behaves_like_a_prompt():
    s, entries = two_turns()
    cm = s.append({"type": "custom_message", "customType": "x", "content": "c", "display": True})
    s.append_message(assistant("after"))
    s.navigate(cm["id"])
    assert s.leaf_id == entries[-1]["id"]


def test_navigating_to_the_leaf_does_nothing():
    s, entries = two_turns()
    assert s.navigate(s.leaf_id, summarize=True, summarizer=ScriptedSummarizer([])) is None
    assert len(s) == 6


def test_unknown_target_raises():
    s, _ = two_turns()
    with pytest.raises(SessionError):
        s.navigate("nothere1")


def test_label_without_summary_goes_on_the_target():
    s, (u1, a1, *_rest) = two_turns()
    s.navigate(a1["id"], label="checkpoint")
    assert s.labels() == {a1["id"]: "checkpoint"}
    assert s.get(s.leaf_id)["type"] == "label"  # the label entry was appended at the new position


def test_summary_is_appended_at_the_new_leaf_with_from_id_equal_to_it():
    s, (u1, a1, u2, a2, tr2, a2b) = two_turns()
    summarizer = ScriptedSummarizer(["## Goal\nexplore"])
    entry = s.navigate(u2["id"], summarize=True, summarizer=summarizer, label="explored")
    assert entry["type"] == "branch_summary"
    assert entry["parentId"] == a1["id"] and entry["fromId"] == a1["id"]  # new leaf = parent of u2
    assert entry["summary"] == (prompts.BRANCH_SUMMARY_PREAMBLE + "## Goal\nexplore"
                                + "\n\n<read-files>\nx.py\n</read-files>")
    assert entry["details"] == {"readFiles": ["x.py"], "modifiedFiles": []}
    assert "fromHook" not in entry
    assert s.labels() == {entry["id"]: "explored"}
    [request] = summarizer.requests
    assert request.kind == "branch" and request.max_tokens is None  # the model's output limit (Pi 1.6)
    assert request.prompt.endswith(prompts.BRANCH_PROMPT) and request.reasoning is None
    # Pi collects from the old leaf back to the deepest entry shared with the *target's* path:
    # u2 itself is that entry (its text goes back to the editor), so the span is a2 .. a2b.
    # Tool results are not sent, the calls are.
    assert request.prompt.startswith('<conversation>\n[Assistant tool calls]: read(path="x.py")\n\n'
                                     '[Assistant]: a2 done\n</conversation>')
    assert "contents" not in request.prompt and "[User]: u2" not in request.prompt
    # the context now ends with the summary as a "came back from" user message
    context = s.build_context()
    assert [text_of(m["content"]) for m in context[:2]] == ["u1", "a1"]
    assert text_of(context[2]["content"]) == (
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
        + entry["summary"] + "</summary>")


def test_summary_at_the_root_has_from_id_root():
    s, (u1, *_rest) = two_turns()
    entry = s.navigate(u1["id"], summarize=True, summarizer=ScriptedSummarizer(["S"]))
    assert entry["parentId"] is None and entry["fromId"] == "root"
    assert ids_of(s.path()) == [entry["id"]]


def test_focus_and_replace_instructions():
    s, (u1, a1, *_rest) = two_turns()
    summarizer = ScriptedSummarizer(["S", "T"])
    s.navigate(a1["id"], summarize=True, summarizer=summarizer, focus="the reader")
    assert summarizer.requests[0].prompt.endswith(prompts.BRANCH_PROMPT + "\n\nAdditional focus: the reader")
    s2, (_, b1, *_r) = two_turns()
    s2.navigate(b1["id"], summarize=True, summarizer=summarizer, focus="ONLY THIS", replace_instructions=True)
    assert summarizer.requests[1].prompt.endswith("</conversation>\n\nONLY THIS")


def test_summary_requested_without_a_summarizer_raises():
    s, (u1, a1, *_rest) = two_turns()
    with pytest.raises(SessionError, match="summarizer"):
        s.navigate(a1["id"], summarize=True)


def test_empty_span_writes_no_summary():
    s, (u1, a1, u2, *_rest) = two_turns()
    s.branch(a1["id"])  # the old leaf is an ancestor of the target: nothing is abandoned
    summarizer = ScriptedSummarizer([])
    assert s.navigate(u2["id"], summarize=True, summarizer=summarizer) is None
    assert summarizer.requests == [] and s.leaf_id == a1["id"]


def test_collect_branch_entries_from_old_leaf_to_common_ancestor():
    s, (u1, a1, u2, a2, tr2, a2b) = two_turns()
    s.branch(a1["id"])
    other = s.append_message(user("other"))
    span = collect_branch_entries(s.path(a2b["id"]), s.path(other["id"]))
    assert span.common_ancestor_id == a1["id"]
    assert ids_of(span.entries) == [u2["id"], a2["id"], tr2["id"], a2b["id"]]
    disjoint = collect_branch_entries(s.path(a2b["id"]), [])
    assert disjoint.common_ancestor_id is None and len(disjoint.entries) == 6


def test_prepare_branch_entries_budget_and_summary_overshoot():
    s = new_session(user("x" * 400), assistant("y" * 400))
    s.append(compaction_entry("S" * 2000, s.leaf_id, 10))
    s.append_message(user("z" * 400))
    entries = s.path()
    # budget 150: z (100) fits; the compaction (500) does not, but 100 < 0.9 * 150 so it is kept
    messages, _ = prepare_branch_entries(entries, 150, chars4.estimate)
    assert [m["role"] for m in messages] == ["compactionSummary", "user"]
    # budget 105: z fits, but then 100 >= 0.9 * 105 -> the summary is not squeezed in
    messages, _ = prepare_branch_entries(entries, 105, chars4.estimate)
    assert [m["role"] for m in messages] == ["user"]
    # a plain message that does not fit stops the walk
    messages, _ = prepare_branch_entries(s.path()[:2], 150, chars4.estimate)
    assert [m["content"][0]["text"][:1] for m in messages] == ["y"]


def test_branch_file_ops_from_non_hook_branch_summaries_and_calls():
    s = new_session(user("u"))
    s.append({"type": "branch_summary", "fromId": "root", "summary": "s",
              "details": {"readFiles": ["old.py"], "modifiedFiles": ["mod.py"]}})
    s.append({"type": "branch_summary", "fromId": "root", "summary": "s2",
              "details": {"readFiles": ["hook.py"], "modifiedFiles": []}, "fromHook": True})
    s.append_message(assistant("", call("c", "edit", path="e.py")))
    _, ops = prepare_branch_entries(s.path(), 10_000, chars4.estimate)
    assert ops.lists() == (["old.py"], ["e.py", "mod.py"])


def test_no_content_to_summarize():
    s = new_session(user("u"))
    s.append_message(tool_result("c", "only a tool result"))
    summarizer = ScriptedSummarizer([])
    text, details = generate_branch_summary(s.path()[1:], summarizer, context_window=None,
                                            estimate=chars4.estimate)
    assert text == NO_CONTENT == "No content to summarize" and summarizer.requests == []
    assert details == {"readFiles": [], "modifiedFiles": []}


def test_tree_hooks(registry):
    s, (u1, a1, u2, *_rest) = two_turns(hooks=registry)
    seen = []
    registry.on("session_before_tree", lambda e: seen.append(e.preparation) and None)
    registry.on("session_tree", lambda e: seen.append((e.new_leaf_id, e.old_leaf_id, e.summary_entry,
                                                       e.from_extension)))
    old_leaf = s.leaf_id
    entry = s.navigate(u2["id"], summarize=True, summarizer=ScriptedSummarizer(["S"]), focus="f", label="L")
    prep, after = seen
    assert prep.target_id == u2["id"] and prep.old_leaf_id == old_leaf
    assert prep.common_ancestor_id == u2["id"] and prep.user_wants_summary is True
    assert ids_of(prep.entries_to_summarize) == ids_of(s.path(old_leaf)[3:])
    assert (prep.custom_instructions, prep.replace_instructions, prep.label) == ("f", False, "L")
    # the label entry follows the summary entry, so the final leaf is the label
    assert after == (s.leaf_id, old_leaf, entry, False)


def test_tree_hook_cancel_and_supplied_summary(registry):
    s, (u1, a1, u2, *_rest) = two_turns(hooks=registry)
    leaf = s.leaf_id
    registry.on("session_before_tree", lambda e: {"cancel": True})
    assert s.navigate(a1["id"]) is None and s.leaf_id == leaf
    registry.clear()
    registry.on("session_before_tree", lambda e: {"summary": {"summary": "FROM HOOK", "details": {"k": 1}},
                                                  "label": "hooked"})
    summarizer = ScriptedSummarizer([])
    entry = s.navigate(a1["id"], summarize=True, summarizer=summarizer)
    assert summarizer.requests == []
    assert entry["summary"] == "FROM HOOK" and entry["fromHook"] is True and entry["details"] == {"k": 1}
    assert s.labels()[entry["id"]] == "hooked"
