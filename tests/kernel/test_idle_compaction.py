"""Compaction in the kernel's idle time, in REAL kernels (``kernel/idle.py``).

A page that is a notebook (the test frontend answers ``hello_ack`` under a page's name) gets an
idle compaction after a ``%%agent`` run that leaves the context above the idle share: one entry,
equal in kind to the foreground compaction ``ipyagent run`` makes after the same run, streamed to
the notebook, with the budget widget saying so. A cell started during it waits and then uses the
compacted context; an ordinary cell runs while it runs; an interrupt cancels it (no entry, and the
next ``%%agent`` cell compacts in the foreground); a replay reproduces the recorded idle
compaction byte for byte, without a summary request. Every wait is on an event: an entry arriving,
a request reaching the fake server, a held summary released by the test.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

import pytest

from ipyagent import cli
from ipyagent.bridge.headless import execute_notebook
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from ipyagent.testing.specs import Reply
from kernel_support import SETUP, SMALL_WINDOW, LiveKernel, fake_provider, notebook
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel

PAGE = "jupyterlab-test"  # any frontend but the headless runner's
SUMMARY = "## Goal\nDescribe the measurements.\n\n## Progress\n- [x] the columns (idle summary)"
CELLS = [SETUP + SMALL_WINDOW,
         "%%agent\nDescribe the data set, column by column.",
         "%%agent\nWhich columns have gaps?",
         "%%agent\nWhich are measured, which derived?",
         "%%agent\nAnd the units?"]
LAST = 4  # the cell after the pause
# three of them take the context above the threshold (5,000 of the 6,000-token window, with about
# 1,600 for the system prompt and the tools) at the end of the third run, and not before
ANSWER = "The columns hold measurements with consistent units and few gaps. " * 66


def _run_up_to_the_pause(k: LiveKernel, server, summary) -> None:
    for _ in range(3):
        server.enqueue_text(ANSWER)
    server.enqueue_summary(summary)
    k.run(CELLS[0], "cell-0")
    for i in (1, 2, 3):
        cell = k.run(CELLS[i], f"cell-{i}")
        assert cell.status == "ok", outputs_text(cell.outputs)


def _until(k: LiveKernel, done: Callable[[], bool], timeout: float = 90) -> None:
    """Read the kernel's messages until ``done()`` holds (an event, never a tuned sleep)."""
    deadline = time.time() + timeout
    while not done():
        assert time.time() < deadline, "the awaited event never came"
        k.drain(0.1)


def _compactions(k: LiveKernel) -> list[dict]:
    entries = (k.metadata.get("sessions") or {}).get("default", {}).get("entries", [])
    return [e for e in entries if e["type"] == "compaction"]


def _the_next_cell_compacts_in_the_foreground(k: LiveKernel, server, cell_id: str) -> None:
    """After a cancelled idle compaction: the cell after the pause compacts as it always did."""
    server.enqueue_summary(SUMMARY)
    server.enqueue_text("The units are SI throughout.")
    cell = k.run(CELLS[LAST], cell_id)
    assert cell.status == "ok", outputs_text(cell.outputs)
    compactions = _compactions(k)
    assert len(compactions) == 1 and compactions[0]["trigger"] == "foreground"


def _summary_requested(server) -> Callable[[], bool]:
    return lambda: any(r.kind == "summary" for r in server.requests)


@pytest.fixture(scope="module")
def idle_run(tmp_path_factory):
    """The first two cells on a notebook page, then the pause: the idle compaction's entry."""
    folder = tmp_path_factory.mktemp("idle")
    with fake_provider() as server, LiveKernel(cwd=str(folder), frontend=PAGE) as k:
        _run_up_to_the_pause(k, server, SUMMARY)
        _until(k, lambda: bool(_compactions(k)))
        k.drain(0.5)
        shown = outputs_text(k.cells[-1].outputs)
        summary_calls = server.summary_calls
        metadata = json.loads(json.dumps(k.metadata))
        status = outputs_text(k.run("%agent status", "status").outputs)
    return {"metadata": metadata, "shown": shown, "summary_calls": summary_calls, "folder": folder,
            "status": status}


def test_idle_compaction_writes_one_entry_equal_in_kind_to_a_foreground_one(idle_run, tmp_path):
    idle = [e for e in idle_run["metadata"]["sessions"]["default"]["entries"] if e["type"] == "compaction"]
    assert len(idle) == 1
    assert idle[0]["trigger"] == "idle" and idle[0]["summary"].startswith("## Goal")
    # the budget widget of the run said so, and became the static view with the new budget
    assert "Compacted in the background" in idle_run["shown"]
    assert "last compaction: idle, " in idle_run["shown"]  # the widget's details say what made it
    assert any(line.strip().startswith("last compaction: idle, ")  # and %agent status, in a line of its own
               for line in idle_run["status"].splitlines()), idle_run["status"]

    # ipyagent run never compacts in idle time: the same run compacts in the foreground at its end
    with fake_provider() as server:
        for _ in range(3):
            server.enqueue_text(ANSWER)
        server.enqueue_summary(SUMMARY)
        out = execute_notebook(notebook(*CELLS[:LAST]), timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
        assert server.summary_calls == idle_run["summary_calls"]  # the same requests
    entries = out.nb["metadata"]["ipyagent"]["sessions"]["default"]["entries"]
    foreground = [e for e in entries if e["type"] == "compaction"]
    assert len(foreground) == 1 and foreground[0]["trigger"] == "foreground"
    # the same plan and the same entry: its fields, its cut, its summary
    assert set(foreground[0]) == set(idle[0])
    by_id = {e["id"]: e for e in idle_run["metadata"]["sessions"]["default"]["entries"]}
    kept_idle = by_id[idle[0]["firstKeptEntryId"]]
    kept_fg = {e["id"]: e for e in entries}[foreground[0]["firstKeptEntryId"]]
    assert kept_idle["message"]["role"] == kept_fg["message"]["role"]
    assert json.dumps(kept_idle["message"].get("content")) == json.dumps(kept_fg["message"].get("content"))
    assert foreground[0]["summary"] == idle[0]["summary"]


def test_a_replay_reproduces_the_idle_compaction(idle_run, capsys):
    nb = notebook(*CELLS[:LAST])
    nb["metadata"]["ipyagent"] = idle_run["metadata"]
    src = idle_run["folder"] / "recorded.ipynb"
    write_notebook(src, nb)
    saved = {k: os.environ.pop(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "IPYAGENT_MODEL") if k in os.environ}
    try:  # offline: the recording answers, and there is no summary model to ask
        assert cli.main(["run", str(src), "-o", str(src.with_name("replayed.ipynb")), "--timeout", "120"]) == 0, \
            capsys.readouterr().err
    finally:
        os.environ.update(saved)
    replayed = read_notebook(src.with_name("replayed.ipynb"))
    before, after = idle_run["metadata"]["sessions"]["default"], assemble(replayed["metadata"])["sessions"]["default"]
    assert json.dumps(after["entries"]) == json.dumps(before["entries"])
    assert after["leaf"] == before["leaf"]
    assert "diverged" not in "\n".join(outputs_text(c["outputs"]) for c in replayed["cells"])


def test_a_cell_started_during_it_waits_and_ordinary_cells_run_meanwhile(tmp_path):
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))  # the idle compaction has started; its summary is held
            # the run's live budget widget says so, with the summary's tokens as they arrive
            status = k.evaluate("get_ipython()._ipyagent_runtime.idle.job.view.widget.facts.status")
            assert status.startswith("Compacting in the background… ") and "tokens of summary" in status, status
            # and it ticks while no token comes (issue 37: "0 tokens of summary, 0.0 s" stood still for
            # ~36 s while the server read the conversation): the line changes with the summary held
            seen = [status]
            _until(k, lambda: seen.append(k.evaluate("get_ipython()._ipyagent_runtime.idle.job.view.widget"
                                                     ".facts.status")) or seen[-1] != status, timeout=30)
            assert seen[-1].startswith("Compacting in the background… "), seen[-1]

            plain = k.run("x = 6 * 7\nx", "code-1")  # the kernel answers while the summary is made
            assert plain.status == "ok" and "42" in outputs_text(plain.outputs)

            server.enqueue_text("The units are SI throughout.")
            msg_id = k.send_execute(CELLS[LAST], f"cell-{LAST}")
            waiting = k.wait(msg_id, until=lambda: "Waiting for the background compaction"
                             in outputs_text(k.cells[-1].outputs))
            assert waiting is not None and not _compactions(k)
            hold.set()
            cell = k.wait(msg_id)
            assert cell is not None and cell.status == "ok", outputs_text(cell.outputs)
            k.drain(0.3)
        finally:
            hold.set()
        # never two compactions: the idle one's requests (one compaction may ask more than once: a
        # split turn, or a deeper cut that leaves room), then the cell's own
        kinds = [r.kind for r in server.requests]
        assert kinds[:3] == ["chat"] * 3 and kinds[-1] == "chat" and set(kinds[3:-1]) == {"summary"}, kinds
        compactions = _compactions(k)
        assert len(compactions) == 1 and compactions[0]["trigger"] == "idle"
        # the cell's request was built from the compacted context
        sent = json.dumps([r for r in server.requests if r.kind == "chat"][-1].body["messages"])
        assert "(idle summary)" in sent
        # the waiting cell's progress line became one static line
        assert "Compacted in the background:" in outputs_text(k.cells[-1].outputs)


@pytest.mark.parametrize("stop", ["interrupt", "restart"])
def test_an_interrupt_or_a_restart_cancels_it_and_the_next_cell_compacts_in_the_foreground(stop, tmp_path):
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))
            stored = len(k.metadata["sessions"]["default"]["entries"])
            if stop == "interrupt":
                k.km.interrupt_kernel()  # the kernel is idle: no cell runs
                last = k.evaluate("(lambda rt: (rt.idle.job.done.wait(60) if rt.idle.job else True) and rt.idle.last)"
                                  "(get_ipython()._ipyagent_runtime)")
                assert last.startswith("cancelled"), last
            else:  # the kernel dies with its summary request in flight; the page pushes what it stored
                k.restart()
                k.run(CELLS[0], "cell-0-again")  # the user's setup cell, run again in the new kernel
                assert k.evaluate("get_ipython()._ipyagent_runtime.idle.job") is None
            session = k.evaluate("[e['type'] for e in get_ipython()._ipyagent_runtime.slot().session.entries]")
            assert "compaction" not in session and len(session) == stored  # every completed entry kept
        finally:
            hold.set()
        k.drain(0.3)
        assert not _compactions(k)

        _the_next_cell_compacts_in_the_foreground(k, server, f"cell-{LAST}")


def test_compact_while_it_runs_joins_it(idle_run, tmp_path):
    """``%compact`` during an idle compaction waits for it, showing its progress, and makes no
    compaction of its own: no second summary request, one entry (the idle one)."""
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))  # the idle compaction has started; its summary is held
            msg_id = k.send_execute("%compact", "compact-1")
            waiting = k.wait(msg_id, until=lambda: "Waiting for the background compaction"
                             in outputs_text(k.cells[-1].outputs))
            assert waiting is not None and not _compactions(k)
            live = [o for o in k.cells[-1].outputs if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {})]
            assert live, k.cells[-1].outputs  # the join's progress bar, live while it waits
            hold.set()
            cell = k.wait(msg_id)
            assert cell is not None and cell.status == "ok", outputs_text(cell.outputs)
            k.drain(0.3)
        finally:
            hold.set()
        shown = outputs_text(k.cells[-1].outputs)
        assert "Compacted in the background:" in shown  # the join's line, now static
        assert "the background compaction that was running compacted the session" in shown
        # the same summary requests as the idle compaction alone makes, none of %compact's own
        assert server.summary_calls == idle_run["summary_calls"], [r.kind for r in server.requests]
        compactions = _compactions(k)
        assert len(compactions) == 1 and compactions[0]["trigger"] == "idle"
        assert "widget-view" not in json.dumps(k.cells[-1].outputs)  # the saved output holds no widget


def _idle_last(k: LiveKernel) -> str:
    """How the last job ended; "still running" while one runs (a cancel waits for the job's end,
    so right after a command that cancels, none runs)."""
    return k.evaluate("(lambda rt: 'still running' if rt.idle.job else rt.idle.last)(get_ipython()._ipyagent_runtime)")


def test_a_model_change_and_a_branch_switch_cancel_it(tmp_path):
    """A running idle compaction is cancelled, with no entry written, by ``%config Agent.model``
    and by ``%agent checkout`` (each while its summary is held)."""
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))
            k.run("%config Agent.model = 'openai:fake-model-2'", "model")
            assert _idle_last(k).startswith("cancelled")
            hold.set()
            k.drain(0.3)
            assert not _compactions(k)
            assert "compaction" not in k.evaluate(
                "[e['type'] for e in get_ipython()._ipyagent_runtime.slot().session.entries]")

            # one more run that leaves the context between the idle share and the threshold (the
            # window set just above what the session holds), so the kernel arms a job again
            tokens = k.evaluate("get_ipython()._ipyagent_runtime.agent_for(get_ipython()._ipyagent_runtime.slot(),"
                                " get_ipython()._ipyagent_runtime.run_config()).budget.request_tokens()")
            k.run(f"%config Agent.context_window = {tokens + 1600}", "window")
            hold = threading.Event()
            server.enqueue_text("Mostly SI units.")
            server.enqueue_summary(Reply(text=SUMMARY, hold=hold))
            before = server.summary_calls
            cell = k.run("%%agent\nWhich units?", "cell-units")
            assert cell.status == "ok", outputs_text(cell.outputs)
            assert server.summary_calls == before  # not compacted in the foreground
            _until(k, lambda: server.summary_calls > before)
            target = k.evaluate("[e['id'] for e in get_ipython()._ipyagent_runtime.slot().session.entries"
                                " if e['type'] == 'message' and e['message']['role'] == 'user'][-1]")
            checkout = k.run(f"%agent checkout {target}", "checkout")
            assert checkout.status == "ok", outputs_text(checkout.outputs)
            assert _idle_last(k).startswith("cancelled")
        finally:
            hold.set()
        k.drain(0.3)
        assert not _compactions(k)
        assert "compaction" not in k.evaluate(
            "[e['type'] for e in get_ipython()._ipyagent_runtime.slot().session.entries]")


def test_a_re_run_of_an_earlier_cell_cancels_it(tmp_path):
    """Re-running an earlier ``%%agent`` cell forks the session (a branch switch): the running idle
    compaction of the branch it leaves is cancelled, not waited for, and no entry is written."""
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))
            server.enqueue_text("Two columns have gaps.")
            cell = k.run(CELLS[2], "cell-2")  # the same cell id: a re-run
            assert cell.status == "ok", outputs_text(cell.outputs)
            assert _idle_last(k) == "cancelled (a re-run of an earlier %%agent cell forked the session): no entry written"
            assert "Re-run of an earlier cell" in outputs_text(cell.outputs)
        finally:
            hold.set()
        k.drain(0.3)
        assert not _compactions(k)
        assert "compaction" not in k.evaluate(
            "[e['type'] for e in get_ipython()._ipyagent_runtime.slot().session.entries]")


def test_an_interrupt_of_the_cell_that_waits_for_it_cancels_it(tmp_path):
    """A ``%%agent`` cell waiting for the running idle compaction, interrupted: the compaction is
    cancelled (no entry), the cell says so, and the next cell compacts in the foreground."""
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            _run_up_to_the_pause(k, server, Reply(text=SUMMARY, hold=hold))
            _until(k, _summary_requested(server))
            msg_id = k.send_execute(CELLS[LAST], f"cell-{LAST}")
            cell = k.interrupt_when(lambda: "Waiting for the background compaction"
                                    in outputs_text(k.cells[-1].outputs), msg_id)
            assert cell.status == "error" and cell.error and cell.error["ename"] == "KeyboardInterrupt"
            assert "cancelled by the interrupt; no entry was written" in outputs_text(cell.outputs)
            assert _idle_last(k).startswith("cancelled")
        finally:
            hold.set()
        k.drain(0.3)
        assert not _compactions(k)
        assert [r.kind for r in server.requests if r.kind == "chat"] == ["chat"] * 3  # the cell asked nothing

        _the_next_cell_compacts_in_the_foreground(k, server, f"cell-{LAST}-again")


def test_a_replay_on_a_notebook_page_starts_none(idle_run, tmp_path):
    """``Agent.replay = "on"`` on a notebook page (not ``ipyagent run``): the cells replay their
    recorded responses, the context ends above the idle share as it did, and the kernel arms no
    idle compaction (nor asks the server anything)."""
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        k.frontend.metadata = json.loads(json.dumps(idle_run["metadata"]))
        k.push()
        k.run(CELLS[0] + "%config Agent.replay = 'on'\n", "cell-0")
        for i in (1, 2, 3):
            cell = k.run(CELLS[i], f"cell-{i}")
            assert cell.status == "ok" and "Replaying" in outputs_text(cell.outputs), outputs_text(cell.outputs)
        job = k.evaluate("(lambda rt: [rt.idle.job is None, rt.idle.last])(get_ipython()._ipyagent_runtime)")
        assert job == [True, ""], job
        assert server.requests == []


def test_an_agent_command_before_it_starts_leaves_it_armed(tmp_path):
    """``%agent status`` (or any ``%agent`` command that does not cancel it) run before the kernel
    has been idle long enough leaves the job armed: the status says so, and the compaction follows
    once the kernel is idle. (The delay is set long while the command runs, then to 0, so that the
    command surely comes before the start.)"""
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        for _ in range(3):
            server.enqueue_text(ANSWER)
        server.enqueue_summary(SUMMARY)
        k.run(CELLS[0] + "%config Agent.idle_compaction_delay = 3600\n", "cell-0")
        for i in (1, 2, 3):
            assert k.run(CELLS[i], f"cell-{i}").status == "ok"
        status = outputs_text(k.run("%agent status", "status").outputs)
        assert "idle compaction: armed" in status, status
        k.run("%config Agent.idle_compaction_delay = 0", "delay")
        _until(k, lambda: bool(_compactions(k)))
        compactions = _compactions(k)
        assert len(compactions) == 1 and compactions[0]["trigger"] == "idle"


def test_turning_it_off_while_a_job_waits_drops_the_job(tmp_path):
    """``%config Agent.idle_compaction = 0`` after a run, before the kernel has been idle long
    enough: the armed job does not start (no summary request, no entry)."""
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        for _ in range(3):
            server.enqueue_text(ANSWER)
        k.run(CELLS[0] + "%config Agent.idle_compaction_delay = 3600\n", "cell-0")
        for i in (1, 2, 3):
            assert k.run(CELLS[i], f"cell-{i}").status == "ok"
        k.run("%config Agent.idle_compaction = 0\n%config Agent.idle_compaction_delay = 0", "off")
        last = k.evaluate("(lambda rt: (rt.idle.job.done.wait(60) if rt.idle.job else True) and rt.idle.last)"
                          "(get_ipython()._ipyagent_runtime)")
        assert last == "dropped: Agent.idle_compaction was turned off", last
        assert server.summary_calls == 0 and not _compactions(k)
        # the run's line said it would compact when idle: it says why it did not (issue 37)
        said = "Idle compaction dropped: Agent.idle_compaction was turned off."
        _until(k, lambda: said in outputs_text(k.cells[3].outputs))
        assert "The kernel compacts the context when it is idle" not in outputs_text(k.cells[3].outputs)


def _journals(outputs: list) -> list[dict]:
    return [o["data"]["application/vnd.ipyagent.entries+json"] for o in outputs
            if "application/vnd.ipyagent.entries+json" in (o.get("data") or {})]


def test_a_journal_it_writes_goes_into_the_run_that_armed_it_never_into_the_cell_running(tmp_path):
    """The page stops acknowledging while the idle compaction runs, and the compaction ends while
    the user's own cell runs: the journal (the compaction and the entries the page did not
    acknowledge) goes into the output of the run that armed the job, not into the user's cell,
    which one could clear or re-run."""
    hold = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        try:
            for _ in range(3):
                server.enqueue_text(ANSWER)
            server.enqueue_summary(Reply(text=SUMMARY, hold=hold))
            for i in range(3):
                assert k.run(CELLS[i], f"cell-{i}").status == "ok"
            k.frontend.on_comm_msg = lambda comm_id, msg: None  # the page no longer stores nor acknowledges
            assert k.run(CELLS[3], "cell-3").status == "ok"  # its entries go out, unacknowledged
            _until(k, _summary_requested(server))
            # the user's cell runs until the background compaction has ended (an event, not a sleep)
            msg_id = k.send_execute("rt = get_ipython()._ipyagent_runtime\njob = rt.idle.job\n"
                                    "ended = job.done.wait(120)\nprint('ended:', ended, rt.idle.last)", "user-cell")
            k.wait(msg_id, until=lambda: bool(server.requests) and k.cells[-1].cell_id == "user-cell")
            hold.set()
            user = k.wait(msg_id)
            assert user is not None and user.status == "ok"
            k.drain(0.5)
        finally:
            hold.set()
        printed = outputs_text(user.outputs)
        assert "ended: True compacted in the background" in printed, printed
        assert not _journals(user.outputs), user.outputs  # nothing of the session in the user's cell
        armed = next(c for c in k.cells if c.cell_id == "cell-3")
        [journal] = _journals(armed.outputs)
        kinds = [e["type"] for e in journal["entries"]]
        assert "compaction" in kinds and kinds.count("message") >= 2 and journal["session"] == "default", kinds
        assert "Compacted in the background" in outputs_text(armed.outputs)  # the view it carries
