"""convert_to_llm and the wrapper texts, exactly as pi.md §0 gives them."""

from __future__ import annotations

import pytest

from ipyagent.session.messages import (
    BRANCH_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_PREFIX,
    convert_to_llm,
    entry_to_message,
    text_of,
    tool_calls_of,
    tool_result_message,
    user_message,
)
from support.builders import assistant, call, tool_result, user


def llm_text(message) -> str:
    assert message["role"] == "user"
    return text_of(message["content"])


def bash(**fields):
    return {"role": "bashExecution", "command": "ls -la", "output": "a\nb", "exitCode": 0, "cancelled": False,
            "truncated": False, "timestamp": 7, **fields}


def test_user_assistant_tool_result_pass_through_unchanged():
    messages = [user("hi"), assistant("a", call("c1", "read", path="x")), tool_result("c1", "r")]
    out = convert_to_llm(messages)
    assert out == messages
    assert all(a is b for a, b in zip(out, messages))


def test_compaction_summary_wrapper_exact():
    [out] = convert_to_llm([{"role": "compactionSummary", "summary": "SUM", "tokensBefore": 5, "timestamp": 3}])
    assert llm_text(out) == ("The conversation history before this point was compacted into the following summary:"
                             "\n\n<summary>\nSUM\n</summary>")
    assert out["timestamp"] == 3
    assert COMPACTION_SUMMARY_PREFIX.endswith("<summary>\n")


def test_branch_summary_wrapper_exact_with_no_newline_before_closing_tag():
    [out] = convert_to_llm([{"role": "branchSummary", "summary": "B", "fromId": "root", "timestamp": 4}])
    assert llm_text(out) == ("The following is a summary of a branch that this conversation came back from:"
                             "\n\n<summary>\nB</summary>")
    assert BRANCH_SUMMARY_PREFIX.endswith("<summary>\n")


@pytest.mark.parametrize("fields, expected", [
    ({}, "Ran `ls -la`\n```\na\nb\n```"),
    ({"output": ""}, "Ran `ls -la`\n(no output)"),
    ({"cancelled": True, "exitCode": None}, "Ran `ls -la`\n```\na\nb\n```\n\n(command cancelled)"),
    ({"cancelled": True, "exitCode": 1}, "Ran `ls -la`\n```\na\nb\n```\n\n(command cancelled)"),
    ({"exitCode": 2}, "Ran `ls -la`\n```\na\nb\n```\n\nCommand exited with code 2"),
    ({"exitCode": None}, "Ran `ls -la`\n```\na\nb\n```"),
    ({"truncated": True, "fullOutputPath": "/tmp/out.txt"},
     "Ran `ls -la`\n```\na\nb\n```\n\n[Output truncated. Full output: /tmp/out.txt]"),
    ({"truncated": True}, "Ran `ls -la`\n```\na\nb\n```"),
    ({"exitCode": 1, "truncated": True, "fullOutputPath": "/f", "output": ""},
     "Ran `ls -la`\n(no output)\n\nCommand exited with code 1\n\n[Output truncated. Full output: /f]"),
])
def test_bash_execution_text(fields, expected):
    [out] = convert_to_llm([bash(**fields)])
    assert llm_text(out) == expected and out["timestamp"] == 7


def test_bash_execution_excluded_from_context_is_dropped():
    kept = user("x")
    assert convert_to_llm([bash(excludeFromContext=True), kept]) == [kept]
    out = convert_to_llm([bash(excludeFromContext=True)])
    assert out == []


def test_custom_becomes_user_with_the_same_content():
    blocks = [{"type": "text", "text": "t"}, {"type": "image", "data": "AAA", "mimeType": "image/png"}]
    for content in ("plain", blocks):
        [out] = convert_to_llm([{"role": "custom", "customType": "ext", "content": content, "display": False,
                                 "details": {"secret": 1}, "timestamp": 9}])
        # details never sent; a string becomes one text block, as Pi 1.6's convertToLlm does
        expected = [{"type": "text", "text": content}] if isinstance(content, str) else content
        assert out == {"role": "user", "content": expected, "timestamp": 9}


def test_unknown_roles_are_dropped_and_order_kept():
    out = convert_to_llm([user("1"), {"role": "weird"}, user("2")])
    assert [m["content"] for m in out] == ["1", "2"]


def test_entry_to_message_for_each_entry_type():
    cm = entry_to_message({"type": "custom_message", "id": "a", "customType": "t", "content": "c", "display": True,
                           "details": {"d": 1}, "timestamp": "2026-01-01T00:00:00.000Z"})
    assert cm == {"role": "custom", "customType": "t", "content": "c", "display": True, "details": {"d": 1},
                  "timestamp": 1_767_225_600_000}
    bs = entry_to_message({"type": "branch_summary", "fromId": "root", "summary": "s",
                           "timestamp": "2026-01-01T00:00:00.000Z"})
    assert bs == {"role": "branchSummary", "summary": "s", "fromId": "root", "timestamp": 1_767_225_600_000}
    assert entry_to_message({"type": "branch_summary", "fromId": "root", "summary": ""}) is None
    comp = entry_to_message({"type": "compaction", "summary": "s", "firstKeptEntryId": "x", "tokensBefore": 9,
                             "timestamp": "2026-01-01T00:00:00.000Z"})
    assert comp == {"role": "compactionSummary", "summary": "s", "tokensBefore": 9, "timestamp": 1_767_225_600_000}
    for kind in ("model_change", "thinking_level_change", "custom", "label", "session_info"):
        assert entry_to_message({"type": kind}) is None


def test_helpers():
    assert text_of([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]) == "ab"
    assert text_of("s") == "s" and text_of(None) == ""
    m = assistant("x", call("c1", "read", path="p"), call("c2", "bash", command="ls"))
    assert [c["id"] for c in tool_calls_of(m)] == ["c1", "c2"]
    assert tool_calls_of(user("x")) == []
    r = tool_result_message("c1", "read", "out", is_error=True, timestamp=5)
    assert r == {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                 "content": [{"type": "text", "text": "out"}], "isError": True, "timestamp": 5}
    u = user_message("hi", timestamp=6, cellId="c")
    assert u == {"role": "user", "content": "hi", "timestamp": 6, "cellId": "c"}
