"""Benchmark of the compaction explorer: the time of one slider update (no thresholds asserted).

    python tests/benchmarks/explore.py [--sizes 2000 16000] [--moves 60] [--seed 1]

One update is what moving the keep-recent slider does in the kernel: the slider's value changes,
its observer re-plans with ``prepare_compaction`` (the session's per-entry estimates cached) and
redraws the numbers and the timeline into the widget's HTML. The widgets are real ipywidgets,
without a frontend (their comm sends nothing), so the figure is the kernel's work per move.

Figures per session size, for a generated Pi session (compactions every ~30 turns, as Pi's
sessions have) and for one that was never compacted (the whole path is the context: the
artificial worst case):
- slider update: median and 95th percentile over ``--moves`` moves across the keep-recent range;
- the first display (the path's token sums, the first plan, the static views);
- the summariser's input, computed while its section is open (``planned_requests``);
- switching the estimator to tiktoken (every entry counted once, then cached).
Target (issue 12): one update under 50 ms at 2,000 entries.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for support.sessiongen

import ipywidgets  # noqa: F401

import ipyagent.agent.provider_summarizer  # noqa: F401  (imported here, not inside the first display's timing)
from ipyagent.core import Session
from ipyagent.explorer.plan import ExplorerModel, ExploreSettings
from ipyagent.explorer.widget import CompactionExplorer
from ipyagent.hooks import HookRegistry
from support.sessiongen import generate_session

TARGET_UPDATE_MS = 50.0


def explorer_for(header, entries) -> tuple[CompactionExplorer, float]:
    session = Session(header, entries, hooks=HookRegistry())
    session.context_tokens()  # a live session has its context state already
    t0 = time.perf_counter()
    model = ExplorerModel(session, ExploreSettings(window=200_000, reserve_tokens=16_384, keep_recent_tokens=20_000),
                          name="bench", model="openai:gpt-4.1")
    explorer = CompactionExplorer(model)
    explorer.bundle()
    return explorer, (time.perf_counter() - t0) * 1000


def slider_updates(explorer: CompactionExplorer, moves: int) -> tuple[float, float, int]:
    """Median and p95 (ms) of one keep-recent move, and how many distinct cut points were seen."""
    low, high, step = explorer.keep.min, explorer.keep.max, explorer.keep.step
    values = [low + ((high - low) * k // moves) // step * step for k in range(1, moves + 1)]
    samples, cuts = [], set()
    gc.collect()
    for value in values:
        t0 = time.perf_counter()
        explorer.keep.value = value
        samples.append((time.perf_counter() - t0) * 1000)
        cuts.add(explorer.exploration.cut_index)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))], len(cuts)


def timed_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def scenario(name: str, size: int, args, **options) -> float:
    header, entries = generate_session(args.seed, size, end="turn_end", **options)
    explorer, first = explorer_for(header, entries)
    x = explorer.exploration
    median, p95, cuts = slider_updates(explorer, args.moves)
    for divisor in range(4, 40):  # a plan whose input is not cached yet
        explorer.keep.value = explorer.keep.max // divisor // explorer.keep.step * explorer.keep.step
        if not explorer.model.requests_ready():
            break
    requests = timed_ms(lambda: explorer.model.requests())
    explorer.accordion.selected_index = 0  # open: the input is rebuilt on every update from now on
    chars = sum(len(r.prompt) for r in explorer.summarizer_requests())
    with_input = statistics.median(timed_ms(lambda v=v: setattr(explorer.keep, "value", v))
                                   for v in (explorer.keep.max // 5, explorer.keep.max // 6, explorer.keep.max // 7))
    stale = " (too slow: the open section then offers a button instead of rebuilding)" \
        if explorer.input_button.layout.display != "none" else ""
    explorer.accordion.selected_index = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tiktoken = timed_ms(lambda: setattr(explorer.estimator, "value", "tiktoken"))
    tiktoken_again = timed_ms(lambda: setattr(explorer.keep, "value", explorer.keep.max // 3))
    print(f"\n== {name}: {size:,} entries (path {x.path_length:,}, {len(x.boxes)} boxes, {x.grouping} per box)")
    print(f"slider update:      median {median:7.2f} ms  p95 {p95:7.2f} ms  ({args.moves} keep-recent moves, "
          f"{cuts} distinct cut points)")
    print(f"first display:      {first:7.1f} ms (token sums of the path, first plan, static views)")
    print(f"summariser input:   {requests:7.1f} ms to build ({chars:,} characters); an update with it open "
          f"{with_input:.1f} ms{stale}")
    print(f"estimator→tiktoken: {tiktoken:7.1f} ms the first time (every entry counted), then "
          f"{tiktoken_again:.2f} ms per update")
    return median


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 16_000])
    parser.add_argument("--moves", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"ipyagent explorer benchmark: python {sys.version.split()[0]}, seed {args.seed}, {os.cpu_count()} CPUs, "
          f"load average {load_avg:.1f} (a busy machine inflates every figure)")
    results = []
    for size in args.sizes:
        results.append((size, "generated", scenario("generated Pi session", size, args)))
        results.append((size, "never compacted", scenario(
            "never compacted (artificial worst case)", size, args,
            p_compaction=0.0, p_compaction_midturn=0.0, p_overflow=0.0, p_branch=0.0)))
    print()
    for size, kind, median in results:
        verdict = f" (target < {TARGET_UPDATE_MS:.0f} ms: {'OK' if median < TARGET_UPDATE_MS else 'OVER'})" \
            if size == 2_000 else ""
        print(f"one slider update at {size:>6,} entries, {kind:16}: {median:6.2f} ms{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
