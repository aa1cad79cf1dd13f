"""Notebook activity: the block's formatting (a pure function), the namespace diff, and the
recorder on a real IPython shell (in-process; the kernel-side capture of printed output is checked
in tests/kernel/test_kernel_notebook_context.py)."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp

from ipyagent.agent.prompt.activity_block import (
    CLOSE,
    OPEN,
    SHORT_HEADING,
    clip,
    fence,
    format_activity,
    namespace_text,
)
from ipyagent.agent.prompt.notebook_context import CellError, CellRecord, NamespaceChange, NotebookActivity
from ipyagent.kernel.ports import namespace as ns
from ipyagent.kernel.ports.activity_recorder import ActivityRecorder, BoundedText, is_agent_cell


def cell(n: int, source: str = "", **kw) -> CellRecord:
    return CellRecord(n, source or f"value_{n} = {n} * 2", **kw)


# ---- the block -----------------------------------------------------------------------------------


def test_nothing_happened_gives_no_block():
    assert format_activity(NotebookActivity(), 2000) == ""
    assert format_activity(NotebookActivity([cell(1)]), 0) == ""


def test_a_cell_in_full_with_value_output_and_error():
    error = CellError("ZeroDivisionError", "division by zero",
                      ("  Cell In[3], line 2, in <module>\n    1 / 0",))
    block = format_activity(NotebookActivity([
        cell(3, "print('hi')\n1 / 0", output="hi\n", error=error),
        cell(2, "xs = [1, 2]\nxs", value="[1, 2]"),
    ], namespace=[NamespaceChange("xs", "added", "list", "len 2")]), 2000)
    assert block.startswith(OPEN) and block.endswith(CLOSE)
    assert block.index("In [3]") < block.index("In [2]")  # newest first
    assert "```python\nprint('hi')\n1 / 0\n```" in block
    assert "Error: ZeroDivisionError: division by zero" in block and "Cell In[3], line 2" in block
    assert "Out[2]: [1, 2]" in block and "hi" in block
    assert "- added: xs (list, len 2)" in block
    assert "shortened" not in block and "left out" not in block


def test_the_cap_holds_and_the_block_says_what_it_shortened():
    cells = [cell(n, "\n".join(f"line_{n}_{i} = {i}" for i in range(30)), value="x" * 300)
             for n in range(500, 0, -1)]
    for cap in (300, 800, 2000, 5000):
        block = format_activity(NotebookActivity(cells, earlier=40), cap)
        assert len(block) <= cap * 4, cap
        assert "In [500]" in block  # the newest cell always appears
        assert "left out" in block and "Agent.notebook_context_tokens" in block
    block = format_activity(NotebookActivity(cells), 2000)
    assert SHORT_HEADING in block and "shortened to one line" in block
    full, short = block.split(SHORT_HEADING)
    assert "```python" in full and "```python" not in short  # newer in full, older one line each
    first_short = int(short.split("In [")[1].split("]")[0])
    last_full = int(full.rsplit("In [", 1)[1].split("]")[0])
    assert first_short == last_full - 1
    shown = block.count("In [")
    assert f"{500 - shown} older cells left out" in block


def test_a_huge_newest_cell_is_clipped_not_dropped():
    big = cell(9, "data = '" + "y" * 50_000 + "'", output="z" * 50_000,
               error=CellError("ValueError", "bad " * 5000))
    block = format_activity(NotebookActivity([big]), 1000)
    assert len(block) <= 4000 and "In [9]" in block and "characters cut" in block
    assert "ValueError: bad" in block


def test_source_with_backtick_fences_cannot_close_the_block_fence():
    source = "text = '''\n```\nnot the end\n```\n'''"
    block = format_activity(NotebookActivity([cell(1, source)]), 2000)
    assert "````python\n" + source + "\n````" in block
    assert fence("a ````` b").startswith("``````")


def test_namespace_text_stays_within_its_share():
    changes = [NamespaceChange(f"name_{i}", "added", "int") for i in range(400)]
    changes += [NamespaceChange("gone", "removed", "list")]
    text = namespace_text(changes, 300)
    assert len(text) <= 300 + 40 and "… and" in text and "more" in text
    assert namespace_text([], 300) == ""


def test_clip_keeps_head_and_tail():
    text = "HEAD" + "m" * 1000 + "TAIL"
    out = clip(text, 100)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "characters cut" in out
    assert clip("short", 100) == "short"


# ---- the namespace -------------------------------------------------------------------------------


def test_namespace_diff_added_rebound_removed():
    user = {"a": 1, "xs": [1, 2], "_private": 3, "In": []}
    before = ns.snapshot(user, hidden={"In": user["In"]})
    assert set(before) == {"a", "xs"}
    user.update(xs=[1, 2, 3, 4], arr=np.zeros((3, 2)), label="hi")
    del user["a"]
    changes, now = ns.diff(before, user, hidden={"In": user["In"]})
    got = {(c.name, c.change, c.type_name, c.size) for c in changes}
    assert got == {("xs", "rebound", "list", "len 4"), ("arr", "added", "ndarray", "shape (3, 2)"),
                   ("label", "added", "str", "len 2"), ("a", "removed", "int", "")}
    assert ns.diff(now, user, hidden={"In": user["In"]})[0] == []


def test_size_of_never_calls_len_of_arbitrary_objects():
    class Lazy:
        def __len__(self):
            raise AssertionError("len() must not be called")

        @property
        def shape(self):
            return ("not", "ints")

    class Sized:
        def __len__(self):
            raise AssertionError("len() must not be called")

    assert ns.size_of(Lazy()) == "" and ns.size_of(Sized()) == ""


def test_bounded_repr_of_huge_and_broken_values():
    assert len(ns.bounded_repr(list(range(1_000_000)))) < 1000

    class Broken:
        def __repr__(self):
            raise RuntimeError("nope")

    assert "Broken" in ns.bounded_repr(Broken())  # no exception, a readable stand-in


# ---- the recorder --------------------------------------------------------------------------------


def test_agent_cells_are_not_activity():
    assert is_agent_cell("%%agent\nhello")
    assert is_agent_cell("%agent pin Be brief.\n%agent pins")
    assert is_agent_cell("%load_ext ipyagent\n%config Agent.model = 'x'\n# comment")
    assert not is_agent_cell("x = 1\n%agent status")
    assert not is_agent_cell("")


def test_bounded_text_keeps_head_and_tail():
    text = BoundedText(100)
    for i in range(10_000):
        text.write(f"line {i}\n")
    out = text.text()
    assert out.startswith("line 0\n") and out.rstrip().endswith("line 9999") and "not kept" in out
    assert len(out) < 200
    small = BoundedText(100)
    small.write("a" * 60)
    small.write("b" * 30)
    assert small.text() == "a" * 60 + "b" * 30


@pytest.fixture
def shell():
    globalipapp.start_ipython()
    ip = InteractiveShell.instance()
    recorder = ActivityRecorder(ip)
    recorder.start()
    yield ip, recorder
    recorder.stop()


def test_recorder_records_cells_values_errors_since_each_mark(shell):
    ip, recorder = shell
    ip.run_cell("rec_xs = [1, 2, 3]", store_history=True)
    ip.run_cell("def rec_f():\n    return 1 / 0\nrec_f()", store_history=True)
    ip.run_cell("len(rec_xs) * 10", store_history=True)
    ip.run_cell("%%agent\nnot activity", store_history=True)
    activity = recorder.activity("s1")
    first, second, third = activity.cells[2], activity.cells[1], activity.cells[0]
    assert len(activity.cells) == 3  # newest first; the %%agent cell is not there
    assert first.source == "rec_xs = [1, 2, 3]" and first.value is None and first.error is None
    assert second.error is not None and second.error.line == "ZeroDivisionError: division by zero"
    count = second.execution_count
    assert second.error.frames[-1].startswith(f"  Cell In[{count}], line 2, in rec_f")
    assert "return 1 / 0" in second.error.frames[-1]
    assert not any("interactiveshell" in f for f in second.error.frames)
    assert third.value == "30"
    assert recorder.error(count) == second.error
    assert ("rec_xs", "added") in {(c.name, c.change) for c in activity.namespace}

    recorder.mark("s1")
    assert not recorder.activity("s1")
    ip.run_cell("rec_xs = rec_xs + [4]", store_history=True)
    later = recorder.activity("s1")
    assert [c.source for c in later.cells] == ["rec_xs = rec_xs + [4]"]
    assert [(c.name, c.change, c.size) for c in later.namespace] == [("rec_xs", "rebound", "len 4")]
    assert len(recorder.activity("s2").cells) == 4  # another session: since the extension loaded


def test_recorder_ignores_paused_runs_and_syntax_errors_are_recorded(shell):
    ip, recorder = shell
    with recorder.paused():
        ip.run_cell("rec_hidden = 1", store_history=True)
    ip.run_cell("rec_bad = (", store_history=True)
    cells = recorder.activity("p").cells
    assert [c.source for c in cells] == ["rec_bad = ("]
    assert cells[0].error is not None and cells[0].error.type == "SyntaxError"


def test_recorder_log_is_bounded(shell):
    ip, _ = shell
    recorder = ActivityRecorder(ip, keep=5)
    recorder.start()
    try:
        for i in range(12):
            ip.run_cell(f"rec_n = {i}", store_history=True)
        activity = recorder.activity("b")
        assert len(activity.cells) == 5 and activity.earlier == 7
        assert activity.cells[0].source == "rec_n = 11"
    finally:
        recorder.stop()
