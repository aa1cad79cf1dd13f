"""A first cell that must not run away, and an idle compaction that is worth its time (issue 37,
items 1 and 6), in real kernels against the real llama-cpp-python server (SmolLM2-135M) started as
the docs say for tools: ``--chat_format chatml-function-calling``, ``--n_ctx 4096``.

* Item 1: with the default settings (no ``Agent.max_tool_rounds`` set), a tool that fails the
  same way each time: the model calls it again with the same arguments, the second result tells
  it so, the third stops the run — one plain line, no "Model error".
* Item 6: a notebook page (not ``ipyagent run``, where idle compaction never runs), the window as
  the issue's user set it (``Agent.context_window = 4096``), cells with long pasted notes: once the
  kernel is idle after the second cell, the idle compaction either leaves room for a turn of the
  typical size or does not start; the third cell, of that size, does not compact again.

The model is tiny and writes poor text: the tests assert mechanics, never wording.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from ipyagent.agent.tools.repeats import REPEAT_NOTE
from kernel_support import LiveKernel, notebook
from support.outputs import outputs_text

from .llama_server import MODEL_ALIAS, TOOLS_FORMAT, LlamaServer, start_server
from .test_llama_cpp_server import MAX_OUTPUT, NOTES, SENTENCES, run, session_of

N_CTX = 4096  # the server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    started = start_server(tmp_path_factory.mktemp("llama-server-rounds") / "server.log", n_ctx=N_CTX,
                           extra=TOOLS_FORMAT)
    print(f"\n[interop] llama-cpp-python server (chatml-function-calling, n_ctx {N_CTX}) ready in "
          f"{started.started_in:.1f} s")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def env(server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """What kernels started in the test inherit: ``OPENAI_BASE_URL`` at the server, no key, no
    default model, no replay."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("IPYAGENT_REPLAY", "off")
    for name in ("OPENAI_API_KEY", "IPYAGENT_MODEL", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return server


STOCK_TOOL = '''\
from ipyagent.agent.tools import register_tool, read_only

@register_tool
@read_only
def stock(item: int) -> str:
    """How many units of an item are in stock.

    Args:
        item: the item's number
    """
    raise LookupError(f"no item {item} in the stock list (the list is empty)")
'''


def test_the_same_failing_call_stops_the_first_cell_in_one_line(env: LlamaServer, tmp_path):
    setup = "\n".join(["%load_ext ipyagent", f"%config Agent.model = 'openai:{MODEL_ALIAS}'",
                       f"%config Agent.max_output_tokens = {MAX_OUTPUT}", "%config Agent.tool_approval = 'auto'"])
    nb = notebook(STOCK_TOOL, setup, "%%agent\nUse the stock tool to tell me how many units of item 7 are in stock.")
    outcome = run(nb, tmp_path, "a tool that always fails, default settings")
    shown = outputs_text(outcome.nb["cells"][2]["outputs"])
    messages = [e["message"] for e in session_of(outcome)["entries"] if e["type"] == "message"]
    results = [m for m in messages if m["role"] == "toolResult"]
    print(f"\n[interop] {len(results)} tool results; the cell's last lines:\n" + "\n".join(shown.splitlines()[-3:]))
    assert "Model error" not in shown, shown
    failed = [r for r in results if r["isError"] and r["toolName"] == "stock"]
    assert len(failed) >= 3, shown  # this model calls the tool again and again
    # the same call, the same error: said to the model in the second result, stopped at the third
    assert REPEAT_NOTE not in failed[0]["content"][0]["text"]
    assert sum(REPEAT_NOTE in r["content"][0]["text"] for r in failed) == 1
    assert "Stopped: the model made the same failing call 3 times (stock with the same arguments" in shown, shown
    assert len(results) <= 25


PAGE = "jupyterlab-test"  # a notebook page: the kernel compacts in its idle time


def pasted(i: int) -> str:
    """A long prompt of plain notes (about 5,000 characters) ending in a short question."""
    notes = " ".join(f"Note {n + 1}: {NOTES[(i + n) % len(NOTES)]}." for n in range(10))
    return (f"%%agent --no-tools\nHere are my notes for part {i + 1}. {notes} {' '.join(SENTENCES)} {notes} "
            "In one short sentence: what should I look at first?")


def _compactions(k: LiveKernel) -> list[dict]:
    entries = (k.metadata.get("sessions") or {}).get("default", {}).get("entries", [])
    return [e for e in entries if e["type"] == "compaction"]


CELL_TIMEOUT = 1200  # a loaded two-core machine: the model reads each long prompt slowly


def _idle_settled(k: LiveKernel) -> str:
    """Wait (on the job's own event, in the kernel) until no idle job is armed or running; how the
    last one ended ("" when none was armed). The job starts once no cell has run for a moment, so
    between two looks the kernel is left idle for longer than that."""
    code = ("import json as _j\n"
            "_rt = get_ipython()._ipyagent_runtime\n"
            "_job = _rt.idle.job\n"
            "print(_j.dumps([_job is None, _rt.idle.last]))")
    while True:
        cell = k.run(code, "idle-wait", timeout=CELL_TIMEOUT)
        assert cell.status == "ok", cell.outputs
        text = "".join(o["text"] for o in cell.outputs if o.get("output_type") == "stream")
        settled, last = json.loads(text.strip().splitlines()[-1])
        if settled:
            return str(last)
        k.drain(5.0)  # the kernel idle again (longer than idle_compaction_delay): the job starts, and ends


def test_an_idle_compaction_leaves_the_next_cell_room_or_does_not_start(env: LlamaServer, tmp_path):
    setup = "\n".join(["%load_ext ipyagent", f"%config Agent.model = 'openai:{MODEL_ALIAS}'",
                       f"%config Agent.max_output_tokens = {MAX_OUTPUT}", f"%config Agent.context_window = {N_CTX}"])
    with LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        assert k.run(setup, "setup").status == "ok"
        for i in range(2):
            cell = k.run(pasted(i), f"cell-{i}", timeout=CELL_TIMEOUT)
            assert cell.status == "ok", outputs_text(cell.outputs)
        started = time.monotonic()
        last = _idle_settled(k)
        idle = [c for c in _compactions(k) if c["trigger"] == "idle"]
        print(f"\n[interop] after the second cell: {len(idle)} idle compaction(s); the idle job: {last!r} "
              f"({time.monotonic() - started:.1f} s)")
        status = outputs_text(k.run("%agent status", "status").outputs)
        before = len(_compactions(k))
        cell = k.run(pasted(2), "cell-2", timeout=CELL_TIMEOUT)
        assert cell.status == "ok", outputs_text(cell.outputs)
        shown = outputs_text(cell.outputs)
        foreground = [c for c in _compactions(k)[before:] if c["trigger"] != "idle"]
        print(f"[interop] the third cell: {len(foreground)} foreground compaction(s)")
    if idle:  # it ran: the third cell, a turn of the typical size, found room
        assert not foreground, shown
        assert "Compacted (threshold)" not in shown
    else:  # it did not start, and said why
        assert last.startswith("not started after the last run: no compaction leaves room"), last
        assert "not started after the last run" in status, status
