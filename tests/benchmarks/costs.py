"""Benchmark of pricing replies and totalling a session's cost (no thresholds asserted).

    python tests/benchmarks/costs.py [--entries 10000] [--calls 2000]

Figures:
- loading genai-prices and its bundled snapshot, in a fresh interpreter (what ``warm_up`` moves
  off the first reply, into a background thread);
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
