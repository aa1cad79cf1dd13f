"""Compaction in the kernel's idle time: how long a cell waits for its reply, and how many cells
wait for a summary, with ``Agent.idle_compaction`` on (the default) and off.

    python tests/benchmarks/idle_compaction.py              # the fake server, a 10 s summary
    python tests/benchmarks/idle_compaction.py --llama      # also the real llama.cpp server

**Fake server** (loopback, every summary streamed over ``--summary-delay`` seconds): three
``%%agent`` cells leave the session just under its threshold (above the idle share), the user
pauses ``--pause`` seconds, then a cell pasting a table pushes it over. Printed for each mode:
the seconds from that cell's start to its reply's first token, and how long the third cell took
(a run that ends over the threshold compacts at its end when the kernel cannot do it later).

**llama.cpp** (``tests/interop/llama_server.py``: llama-cpp-python with SmolLM2-135M at 4,096
tokens, the settings a new user has: the model, the window, short replies): ten cells of the
interop suite's notes, each after a ``--llama-pause`` second pause as a user reading the answer;
printed per mode: how many cells waited for a summary (a foreground summary in the cell, or a
background one it had to join) and the whole run's time. Without idle compaction the pauses change
nothing, so that mode runs its cells without them.

A notebook page is the test frontend of ``tests/kernel_support.py`` answering under a page's name
(under the headless runner's, the kernel never compacts in its idle time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

from ipyagent.bridge.headless import kernel_environment
from ipyagent.testing.specs import Reply
from kernel_support import SETUP, SMALL_WINDOW, LiveKernel, fake_provider
from support.outputs import outputs_text

PAGE = "jupyterlab-benchmark"
SUMMARY = "## Goal\nDescribe the measurements.\n\n## Progress\n- [x] the columns and their gaps, noted"
ANSWER = "The columns hold measurements with consistent units and few gaps. " * 57  # ~950 tokens
TABLE = "%%agent\nHere is the table, what stands out?\n" + "| station | reading | unit |\n" * 110
FIRST_WORD = "Zebra"
WAITED = ("Summarised:", "Summary stopped", "Waiting for the background compaction")


def _until(k: LiveKernel, done: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        k.drain(0.1)


def fake_round(idle: bool, summary_delay: float, pause: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, fake_provider() as server, LiveKernel(cwd=tmp, frontend=PAGE) as k:
        chunk = max(1, len(SUMMARY) // 10)  # ten chunks, summary_delay / 10 apart
        for _ in range(4):  # enough for the compactions of either mode (a deeper cut asks again)
            server.enqueue_summary(Reply(text=SUMMARY, chunk_size=chunk, delay=summary_delay / 10))
        for _ in range(3):
            server.enqueue_text(ANSWER)
        server.enqueue_text(f"{FIRST_WORD} stations read in SI units; two have gaps.")
        k.run(SETUP + SMALL_WINDOW + ("" if idle else "%config Agent.idle_compaction = 0\n"), "setup")
        third = 0.0
        for i in range(3):
            started = time.monotonic()
            k.run(f"%%agent\nTell me about part {i + 1} of the data.", f"cell-{i}", timeout=300)
            third = time.monotonic() - started
        share = k.evaluate("(lambda a: round(a.budget.request_tokens() / a.budget.fitted().threshold, 3))"
                           "(get_ipython()._ipyagent_runtime.slot().agent)")
        time.sleep(pause)  # the user reads the answer
        k.drain(0.2)
        started = time.monotonic()
        msg_id = k.send_execute(TABLE, "cell-table")
        k.wait(msg_id, timeout=300, until=lambda: FIRST_WORD in outputs_text(k.cells[-1].outputs))
        first_token = time.monotonic() - started
        k.wait(msg_id, timeout=300)
        triggers = k.evaluate("[e.get('trigger') for e in get_ipython()._ipyagent_runtime.slot().session.entries"
                              " if e['type'] == 'compaction']")
        return {"first_token": first_token, "third_cell": third, "summaries": server.summary_calls,
                "triggers": triggers, "share": share}


def llama_round(idle: bool, server: Any, pause: float, cells: list[str]) -> dict[str, Any]:
    from interop.test_llama_cpp_server import MAX_OUTPUT, MODEL_ALIAS

    waited, started = 0, time.monotonic()
    with kernel_environment(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="unused", IPYAGENT_REPLAY="off"):
        with tempfile.TemporaryDirectory() as tmp, LiveKernel(cwd=tmp, frontend=PAGE) as k:
            k.run("\n".join(["%load_ext ipyagent", f"%config Agent.model = 'openai:{MODEL_ALIAS}'",
                             f"%config Agent.max_output_tokens = {MAX_OUTPUT}",
                             f"%config Agent.context_window = {server.n_ctx}"]
                            + ([] if idle else ["%config Agent.idle_compaction = 0"])), "setup")
            for i, cell in enumerate(cells):
                if idle and i:
                    time.sleep(pause)
                done = k.run(cell, f"cell-{i}", timeout=1800)
                shown = outputs_text(done.outputs)
                waited += any(mark in shown for mark in WAITED)
            k.drain(0.5)
            compactions = k.evaluate("[e.get('trigger') for e in get_ipython()._ipyagent_runtime.slot()"
                                     ".session.entries if e['type'] == 'compaction']")
    return {"waited": waited, "seconds": time.monotonic() - started, "compactions": compactions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary-delay", type=float, default=10.0)
    parser.add_argument("--pause", type=float, default=40.0, help="the user's pause before the last cell (fake)")
    parser.add_argument("--llama", action="store_true", help="also the ten cells against llama.cpp")
    parser.add_argument("--llama-only", action="store_true")
    parser.add_argument("--llama-pause", type=float, default=20.0)
    args = parser.parse_args()
    if not args.llama_only:
        for idle in (True, False):
            figures = fake_round(idle, args.summary_delay, args.pause)
            print(f"fake server, summary {args.summary_delay:.0f} s, idle compaction {'on ' if idle else 'off'}: "
                  f"first token of the cell after the pause {figures['first_token']:.2f} s; "
                  f"third cell {figures['third_cell']:.2f} s (then at {figures['share']:.0%} of the threshold); "
                  f"summary requests {figures['summaries']}; compactions {figures['triggers']}", flush=True)
    if args.llama or args.llama_only:
        from interop.llama_server import start_server
        from interop.test_llama_cpp_server import prompt

        cells = ["%%agent --no-tools\n" + "\n\n".join(prompt(2 * i + k) for k in range(2)) for i in range(10)]
        with tempfile.TemporaryDirectory() as tmp:
            server = start_server(Path(tmp, "server.log"), n_ctx=4096)
            try:
                for idle in (True, False):
                    figures = llama_round(idle, server, args.llama_pause, cells)
                    print(f"llama.cpp, 4,096 tokens, ten cells, idle compaction {'on ' if idle else 'off'}: "
                          f"{figures['waited']} cells waited for a summary; compactions {figures['compactions']}; "
                          f"{figures['seconds']:.0f} s", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
