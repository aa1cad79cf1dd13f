"""The summariser's transcript (pi.md §3.1) and file-operation tracking (§4)."""

from __future__ import annotations

from ipyagent.compaction.file_ops import FileOps, format_file_lists
from ipyagent.compaction.serialize import cut_tool_result, serialize_conversation
from support.builders import assistant, call, tool_result, user

IMAGE = {"type": "image", "data": "AAA", "mimeType": "image/png"}


def test_roles_and_joining():
    messages = [
        user([{"type": "text", "text": "look "}, IMAGE, {"type": "text", "text": "here"}]),
        assistant("line1", call("c1", "read", path="a.py", limit=5), call("c2", "bash", command="ls -l"),
                  thinking="ponder"),
        tool_result("c1", "contents"),
        user(""),  # empty: skipped
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 1},
        {"role": "bashExecution", "command": "pwd", "output": "/p", "exitCode": 0, "cancelled": False,
         "truncated": False, "timestamp": 1},
    ]
    assert serialize_conversation(messages) == "\n\n".join([
        "[User]: look here",
        "[Assistant]: line1",  # thinking is left out (Pi 1.6)
        '[Assistant tool calls]: read(path="a.py", limit=5); bash(command="ls -l")',
        "[Tool result]: contents",
        ("[User]: The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nS\n</summary>"),
        "[User]: Ran `pwd`\n```\n/p\n```",
    ])


def test_text_blocks_join_with_newlines_and_thinking_is_left_out():
    m = assistant("")
    m["content"] = [{"type": "thinking", "thinking": "t1"}, {"type": "text", "text": "a"},
                    {"type": "thinking", "thinking": "t2"}, {"type": "text", "text": "b"}]
    assert serialize_conversation([m]) == "[Assistant]: a\nb"
    m["content"] = [{"type": "thinking", "thinking": "only thinking"}]
    assert serialize_conversation([m]) == ""


def test_tool_call_arguments_are_not_truncated_and_use_js_json():
    long = "x" * 5000
    out = serialize_conversation([assistant("", call("c", "write", path="é.py", content=long, n=0.000015))])
    assert out == f'[Assistant tool calls]: write(path="é.py", content="{long}", n=0.000015)'


def test_tool_result_head_of_2000_utf16_units_without_splitting_a_pair():
    assert cut_tool_result("a" * 2000) == "a" * 2000
    assert cut_tool_result("H" * 2000 + "m") == "H" * 2000 + "\n\n[... 1 more characters truncated]"
    out = serialize_conversation([tool_result("c", "b" * 10_000)])
    assert out == "[Tool result]: " + "b" * 2000 + "\n\n[... 8000 more characters truncated]"
    # the 2000th unit is the first half of an emoji: the whole emoji stays out (Pi's sliceHead)
    assert cut_tool_result("x" * 1999 + "😀" + "y") == "x" * 1999 + "\n\n[... 2 more characters truncated]"
    assert cut_tool_result("😀" * 1001) == "😀" * 1000 + "\n\n[... 2 more characters truncated]"


def test_tool_result_images_dropped_and_empty_results_skipped():
    r = tool_result("c", "")
    r["content"] = [IMAGE]
    assert serialize_conversation([r]) == ""
    r["content"] = [{"type": "text", "text": "a"}, IMAGE, {"type": "text", "text": "b"}]
    assert serialize_conversation([r]) == "[Tool result]: ab"


def test_file_ops_from_tool_calls():
    ops = FileOps()
    ops.add_tool_calls([
        assistant("", call("1", "read", path="r.py"), call("2", "write", path="w.py"),
                  call("3", "edit", path="e.py"), call("4", "grep", path="g.py"), call("5", "read", path=None),
                  call("6", "read", file="x.py")),
        user("not an assistant"),
    ])
    assert (ops.read, ops.written, ops.edited) == ({"r.py"}, {"w.py"}, {"e.py"})
    assert ops.lists() == (["r.py"], ["e.py", "w.py"])


def test_file_ops_details_carry_forward():
    ops = FileOps()
    ops.add_details({"readFiles": ["a", 5], "modifiedFiles": ["b"]})
    ops.add_details(None)
    ops.add_details("junk")
    assert ops.details() == {"readFiles": ["a"], "modifiedFiles": ["b"]}


def test_format_file_lists():
    assert format_file_lists([], []) == ""
    assert format_file_lists(["a", "b"], []) == "\n\n<read-files>\na\nb\n</read-files>"
    assert format_file_lists([], ["m"]) == "\n\n<modified-files>\nm\n</modified-files>"
    assert format_file_lists(["a"], ["m"]) == ("\n\n<read-files>\na\n</read-files>\n\n"
                                               "<modified-files>\nm\n</modified-files>")
