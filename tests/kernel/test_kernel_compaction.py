"""Compaction in a REAL kernel: automatic with a small window (the fake server enforces it),
``%compact`` with a focus, and neither ever changes a visible cell."""

from __future__ import annotations

import json
import time

import pytest

from ipyagent.bridge.headless import execute_notebook
from kernel_support import SETUP, LiveKernel, fake_provider, notebook
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel

SMALL = ("%config Agent.context_window = 3000\n%config Agent.reserve_tokens = 600\n"
         "%config Agent.keep_recent_tokens = 500\n")


def _question(i: int) -> str:
    return f"%%agent\nQuestion {i}: " + "tell me more about the data set and its columns " * 8


def _answer(i: int) -> str:
    return f"Answer {i}: " + "the columns hold measurements that look consistent " * 14


def test_automatic_compaction_with_a_small_window(tmp_path):
    with fake_provider(context_window=3000) as server:
        for i in range(8):
            server.enqueue_text(_answer(i))
        nb = notebook(SETUP + SMALL, *[_question(i) for i in range(8)])
        out = execute_notebook(nb, timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
        assert not [r for r in server.requests if r.outcome == "overflow"], "a request overflowed the window"
        assert server.summary_calls >= 1
    session = out.nb["metadata"]["ipyagent"]["sessions"]["default"]
    compactions = [e for e in session["entries"] if e["type"] == "compaction"]
    assert compactions and all(c["summary"].strip() for c in compactions)
    shown = "\n".join(outputs_text(c["outputs"]) for c in out.nb["cells"])
    assert "Compacted (threshold)" in shown
    # the widget's static view (saved for viewers without a kernel) reports the compactions
    last_widget = [o for o in out.nb["cells"][-1]["outputs"] if "text/html" in (o.get("data") or {})
                   and "ipyagent-budget" in o["data"]["text/html"]]
    assert last_widget and "compaction" in last_widget[-1]["data"]["text/markdown"]


def _without_widget_views(cells: list) -> str:
    for cell in cells:
        for output in cell["outputs"]:
            (output.get("data") or {}).pop("application/vnd.jupyter.widget-view+json", None)
    return json.dumps(cells, sort_keys=True)


def test_compact_with_focus_never_changes_visible_cells(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + SMALL.replace("3000", "6000"), "setup")
        k.run("x = 41\nx + 1", "code-1")
        for i in range(5):
            server.enqueue_text(_answer(i))
            cell = k.run(_question(i), f"agent-{i}")
            assert cell.status == "ok", outputs_text(cell.outputs)
        k.run("print('plain output')", "code-2")
        before = k.snapshot()
        entries_before = len(k.metadata["sessions"]["default"]["entries"])

        server.enqueue_summary("## Goal\nUnderstand the data set.\n\n## Progress\n- [x] columns, with the units")
        cell = k.run("%compact keep the units of every column", "compact")
        assert cell.status == "ok", outputs_text(cell.outputs)
        summary_request = [r for r in server.requests if r.kind == "summary"][-1]
        assert "keep the units of every column" in json.dumps(summary_request.body)
        shown = outputs_text(cell.outputs)
        assert "Compacted:" in shown and "→" in shown
        stored = k.metadata["sessions"]["default"]["entries"]
        assert len(stored) == entries_before + 1 and stored[-1]["type"] == "compaction"

        # an automatic compaction inside a later run, too
        k.run("%config Agent.context_window = 2800", "shrink")  # room for the system prompt and tools
        server.enqueue_text(_answer(9))
        cell = k.run(_question(9), "agent-9")
        assert cell.status == "ok", outputs_text(cell.outputs)
        stored = k.metadata["sessions"]["default"]["entries"]
        # (the trigger counts the system prompt and the tools when no usage is newer than the
        # manual compaction, so with this small window it may compact more than once in this run)
        assert len([e for e in stored if e["type"] == "compaction"]) >= 2
        assert "Compacted (threshold)" in outputs_text(cell.outputs)

        # byte-identical, apart from the widget views of finished runs, which became the static
        # views they carried (one live widget per session: the latest run's)
        after = json.loads(k.snapshot())
        assert _without_widget_views(after[:len(json.loads(before))]) == _without_widget_views(json.loads(before))
        sent = json.dumps([r for r in server.requests if r.kind == "chat"][-1].body["messages"])
        assert "Understand the data set." in sent or "fake summary" in sent


def test_a_summary_server_that_ignores_max_tokens_is_left_at_a_small_multiple_of_it(tmp_path):
    """A server that ignores the summary's ``max_tokens`` (here a 40 MB reply): the client stops
    reading at four times the limit, once, and the compaction fails with a message that says so;
    the session is as it was and the next cell runs."""
    from ipyagent.testing.specs import Reply

    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + SMALL.replace("3000", "6000"), "setup")
        for i in range(4):
            server.enqueue_text(_answer(i))
            assert k.run(_question(i), f"agent-{i}").status == "ok"
        entries_before = len(k.metadata["sessions"]["default"]["entries"])
        endless = "The summary goes on and on without end. " * 1_000_000  # 40 MB
        server.enqueue_summary(Reply(text=endless, chunk_size=4096))
        cell = k.run("%compact", "compact")
        shown = outputs_text(cell.outputs)
        assert "the server went on past what was asked (a limit of " in shown, shown
        summaries = [r for r in server.requests if r.kind == "summary"]
        assert len(summaries) == 1  # not asked again: it would go the same way
        limit = summaries[0].body.get("max_tokens") or summaries[0].body.get("max_completion_tokens")
        assert f"a limit of {limit:,} tokens" in shown
        deadline = time.monotonic() + 60  # the server notices the hang-up at its next write
        while summaries[0].outcome != "client-closed":
            assert time.monotonic() < deadline, (summaries[0].outcome, summaries[0].sent_bytes)
            k.drain(0.1)
        assert summaries[0].sent_bytes < len(endless) // 4
        assert len(k.metadata["sessions"]["default"]["entries"]) == entries_before
        server.enqueue_text("Still here.")
        assert k.run(_question(9), "agent-9").status == "ok"
