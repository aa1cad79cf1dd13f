"""``ipyagent run`` never stalls and never loses what the bridge delivered (issue 9 §1).

The stall: jupyter_client's ``Session.send`` writes through a synchronous shadow of nbclient's
asyncio shell socket, which consumed the socket's read edge when an ``execute_reply`` arrived
during the send — nbclient then waited out the whole cell timeout. Every shell message now goes
through :class:`OrderedShell` (the asyncio socket's own send), and :class:`ReplyWatchdog` polls
again once the kernel has been idle for a few seconds without a reply. The watchdog counts
replies only its extra poll found: with the fix that count is 0 in every run, without it the
stress test below sees several (a deterministic signal, where run times would be a flaky one).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty

import pytest

from ipyagent import cli
from ipyagent.bridge.headless import ReplyLost, ReplyWatchdog, execute_notebook
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import SETUP, chatty, fake_provider, notebook, twelve_cells
from support.outputs import outputs_text


@pytest.mark.slow
@pytest.mark.kernel
def test_thirty_headless_runs_in_a_row_never_miss_a_reply(tmp_path, capsys):
    src = tmp_path / "twelve.ipynb"
    write_notebook(src, notebook(*twelve_cells()))
    with fake_provider(policy=chatty) as server:
        for run in range(30):
            out_path = tmp_path / f"out-{run}.ipynb"
            rc = cli.main(["run", str(src), "-o", str(out_path), "--timeout", "120"])
            captured = capsys.readouterr()
            assert rc == 0, captured.err
            assert "watchdog" not in captured.err  # no reply needed the extra poll
            session = assemble(read_notebook(out_path)["metadata"])["sessions"]["default"]
            roles = [e["message"]["role"] for e in session["entries"] if e["type"] == "message"]
            assert roles.count("user") == 10 and roles.count("assistant") == 10
            assert sum(e["type"] == "compaction" for e in session["entries"]) >= 1
        assert server.chat_calls == 300  # the run times: tests/benchmarks/headless.py


@pytest.mark.kernel
def test_every_ack_reaches_the_kernel_before_the_next_cell(tmp_path):
    check = "from ipyagent.bridge.comm import active_bridge\nprint('ALL-ACKED', active_bridge().document.all_acked)"
    cells = [SETUP]
    for i in range(4):
        cells += [f"%%agent\nQuestion {i}.", check]
    with fake_provider(policy=chatty):
        out = execute_notebook(notebook(*cells), timeout=120, cwd=str(tmp_path))
    assert out.ok, out.error
    assert out.replies_recovered == 0
    for index in range(2, len(cells), 2):
        assert "ALL-ACKED True" in outputs_text(out.nb["cells"][index]["outputs"])


@pytest.mark.kernel
def test_headless_kernel_runs_over_ipc_without_the_tcp_warning(tmp_path, capfd):
    out = execute_notebook(notebook("import json, os\nprint(json.load(open(os.environ.get('JPY_CONNECTION_FILE', '')"
                                    " or __import__('ipykernel.connect').connect.get_connection_file()))"
                                    "['transport'])"), timeout=120, cwd=str(tmp_path))
    assert out.ok, out.error
    assert outputs_text(out.nb["cells"][0]["outputs"]).strip() == "ipc"
    assert "without encryption" not in capfd.readouterr().err


@pytest.mark.kernel
def test_a_dead_kernel_still_writes_every_delivered_session(tmp_path, capsys):
    src = tmp_path / "dies.ipynb"
    with fake_provider() as server:
        server.enqueue_text("First answer.")
        write_notebook(src, notebook(SETUP, "%%agent\nFirst.", "import os\nos._exit(1)", "print('never')"))
        rc = cli.main(["run", str(src), "-o", str(tmp_path / "out.ipynb"), "--timeout", "60"])
    err = capsys.readouterr().err
    assert rc == 1
    failure = [line for line in err.splitlines() if line.startswith("ipyagent run: failed")]
    assert failure == [("ipyagent run: failed: cell 3: the kernel died: Kernel died "
                        "(the output notebook holds every delivered session)")]
    session = assemble(read_notebook(tmp_path / "out.ipynb")["metadata"])["sessions"]["default"]
    assert [e["message"]["role"] for e in session["entries"]] == ["system", "user", "assistant"]


@pytest.mark.slow
@pytest.mark.kernel
def test_a_runner_seconds_behind_the_kernel_still_gets_every_message_of_a_cell(tmp_path, monkeypatch):
    """On a loaded machine this process can fall seconds behind the kernel. nbclient reads a cell's
    messages for only 4 s after its ``execute_reply`` by default and drops the rest: here the
    cell's last outputs and its ``insert_cell`` request (notebooks/build.py once failed with
    ``NameError: spent``: the cell the agent had inserted was gone, so the replay pass never
    defined it). The runner now reads until the cell's ``idle`` status."""
    from nbclient import NotebookClient

    plain = NotebookClient.process_message

    def behind(self, msg, cell, cell_index):  # the load: ~0.2 s for each message of the flooding cell
        if cell is not None and cell.get("id") == "cell-1":
            time.sleep(0.2)
        return plain(self, msg, cell, cell_index)

    monkeypatch.setattr(NotebookClient, "process_message", behind)
    flood = ("from IPython.display import display\nfrom ipyagent.kernel.extension import get_runtime\n"
             "for i in range(40):\n    display(f'output {i}')\n"
             "get_runtime(get_ipython()).tool_ports()[1].insert_cell('code', 'inserted = 42')\n"
             "print('after the insert')")
    out = execute_notebook(notebook(SETUP, flood, "print('next cell')"), timeout=120, cwd=str(tmp_path))
    assert out.ok, out.error
    cells = out.nb["cells"]
    assert [c["source"] for c in cells][2:] == ["inserted = 42", "print('next cell')"]  # below its cell
    shown = outputs_text(cells[1]["outputs"])
    assert all(f"output {i}'" in shown for i in range(40)) and "after the insert" in shown


# ---- the watchdog alone, against a shell channel that misses or loses a reply -----------------
# (A real kernel cannot be made to lose a reply on demand; these channels stand in for the two
# failure modes: the read edge was consumed — a poll finds the reply — or it never came.)

def _run(coro_fn):
    """asyncio.run in a thread of its own: an earlier test (nbclient's run_sync) may leave this
    thread marked as running an event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro_fn()).result()


class _Channel:
    def __init__(self, reply_waiting: bool):
        self.reply_waiting = reply_waiting

    async def get_msg(self, timeout: float | None = None) -> dict:
        if timeout == 0 and self.reply_waiting:
            return {"parent_header": {"msg_id": "req"}, "msg_type": "execute_reply"}
        await asyncio.sleep(3600 if timeout is None else timeout)  # a waiting reader that never wakes
        raise Empty


class _Client:
    def __init__(self, reply_waiting: bool):
        self.shell_channel = _Channel(reply_waiting)


@pytest.mark.parametrize("reply_waiting", [True, False])
def test_watchdog_polls_again_once_the_kernel_is_idle_then_fails_clearly(reply_waiting):
    watchdog = ReplyWatchdog(grace=0.3, tick=0.05)
    kc = _Client(reply_waiting)
    watchdog.install(kc)
    watchdog.pending = "req"
    watchdog.saw_idle("req")

    async def wait() -> dict:
        # without the watchdog this read never ends: asyncio's TimeoutError (a safety net, a
        # minute) would fail the test, never the clock
        return await asyncio.wait_for(kc.shell_channel.get_msg(timeout=None), 60)

    if reply_waiting:
        assert _run(wait)["msg_type"] == "execute_reply"
        assert watchdog.recovered == 1
    else:
        with pytest.raises(ReplyLost, match="execute_reply never arrived"):
            _run(wait)


def test_watchdog_leaves_a_running_cell_alone():
    watchdog = ReplyWatchdog(grace=0.1, tick=0.05)
    kc = _Client(reply_waiting=True)
    watchdog.install(kc)
    watchdog.pending = "req"  # the kernel is still busy: no idle seen

    async def wait() -> None:
        with pytest.raises(Empty):
            await kc.shell_channel.get_msg(timeout=0.5)  # nbclient's own timeout decides

    _run(wait)
    assert watchdog.recovered == 0
