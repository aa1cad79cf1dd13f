"""Benchmark of pricing replies and totalling a session's cost (no thresholds asserted).

    python tests/benchmarks/costs.py [--entries 10000] [--calls 2000]

Figures:
- loading genai-prices and its bundled snapshot, in a fresh interpreter (what ``warm_up`` moves
  off the first reply, into a background thread);
- how long the first reply against the fake provider waits to be priced, in a fresh interpreter:
  with the loading started by the provider call (a program without the extension, or Run All
  straight after ``%load_ext``), and started by ``%load_ext`` while the user writes the prompt;
- pricing one reply (``price_usage``) once loaded: median over ``--calls`` calls, known model and
  unknown model;
- ``Session.costs()`` on a generated session: the first call (counts every entry) and the median
  per-turn call after one more entry (counts only the new one; it should not grow with the session).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for support.sessiongen

from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.providers.pricing import price_usage
from support.sessiongen import generate_session

FIRST_REPLY = """
import sys, time
from ipyagent import AgentLoop, Session
from ipyagent.agent.run_config import RunConfig
from ipyagent.providers import pricing
from ipyagent.providers.transport import message
from ipyagent.testing import FakeProviderServer

spent = []
priced = message.price_usage
def timed(*args, **kwargs):
    start = time.perf_counter()
    try:
        return priced(*args, **kwargs)
    finally:
        spent.append(time.perf_counter() - start)
message.price_usage = timed  # a benchmark's probe, never in a test
with FakeProviderServer() as server:
    server.register("openai")
    if sys.argv[1] == "load":  # %load_ext, then the user writes the prompt (longer than the load takes)
        pricing.warm_up()
        pricing._warming.join()
    server.enqueue_text("Hello.")
    agent = AgentLoop(Session(), config=RunConfig(model="openai:gpt-4.1-mini", context_window=100_000), tools=[])
    agent.prompt("hi")
print(spent[0])
"""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    code = ("import time; t = time.perf_counter(); from ipyagent.providers.pricing import calculate; "
            "calculate('openai', 'gpt-4.1', {'input': 1000, 'output': 100}); print(time.perf_counter() - t)")
    cold = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    print(f"load genai-prices + first price (fresh process): {ms(cold)}")

    for when in ("call", "load"):
        spent = float(subprocess.run([sys.executable, "-c", FIRST_REPLY, when], capture_output=True, text=True,
                                     check=True).stdout.split()[-1])
        print(f"the first reply waits to be priced (loading started at the {'provider call' if when == 'call' else '%load_ext'}): "
              f"{ms(spent)}")

    for model in ("gpt-4.1-mini", "not-a-priced-model"):
        times = []
        for i in range(args.calls):
            usage = {"input": 1000 + i, "output": 200, "cacheRead": 4000, "cacheWrite": 0}
            start = time.perf_counter()
            price_usage("openai", model, usage)
            times.append(time.perf_counter() - start)
        print(f"price one reply ({model}): median {ms(statistics.median(times))}")

    header, entries = generate_session(1, args.entries)
    session = Session(header, entries, hooks=HookRegistry())
    start = time.perf_counter()
    totals = session.costs()
    print(f"Session.costs() first call, {len(session)} entries: {ms(time.perf_counter() - start)} "
          f"(total {totals.total:.4f} USD over {totals.priced} priced calls)")
    times = []
    for i in range(200):
        session.append_message({"role": "user", "content": f"turn {i}", "timestamp": i})
        start = time.perf_counter()
        session.costs()
        times.append(time.perf_counter() - start)
    print(f"Session.costs() per turn after that: median {ms(statistics.median(times))}")


if __name__ == "__main__":
    main()
