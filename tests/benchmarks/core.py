"""Benchmark of the core's per-turn and compaction-preparation costs (no thresholds asserted).

    python tests/benchmarks/core.py [--entries 16000] [--turns 400] [--seed 1]

Figures:
- per turn: append one entry + build_context() + context_tokens(), median over the turns, on a
  generated ~16,000-entry Pi session and on a 100-entry one (the cost should be flat);
- prepare_compaction: median over repeated calls on the 16,000-entry session (with the
  session's per-entry estimate cache, as the agent uses it) and cold (the first call on a freshly
  loaded session, which also walks the path and builds the context);
- loading: time and tracemalloc peak of parsing the JSONL text into a Session;
- Pi in the same run: Pi 1.6.0's (and 0.73.1's) own SessionManager and prepareCompaction on the
  same file (tests/oracle/pi_bench.mjs; needs ``npm ci --prefix tests/oracle``), and the ratios.
Targets (DESIGN.md): under 2 ms per turn, under 24 ms to prepare a compaction; issue 18: at 16,000
entries the never-compacted plan takes at most half of Pi 1.6.0's time, a turn at most 0.05×.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for support.sessiongen

from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.session.tokens import js_json
from support.sessiongen import generate_session

TARGET_TURN_MS = 2.0
TARGET_PREPARE_MS = 24.0
ORACLE = Path(__file__).resolve().parents[1] / "oracle"


def pi_figures(text: str, version: str) -> dict | None:
    """Pi's own load, prepareCompaction and per-turn times on the same session (None: no node or
    no oracle packages)."""
    if not shutil.which("node") or not (ORACLE / "node_modules").exists():
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        f.write(text)
    try:
        proc = subprocess.run(["node", str(ORACLE / "pi_bench.mjs"), f.name, "--pi", version],
                              capture_output=True, text=True, timeout=900, check=False)
    finally:
        os.unlink(f.name)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def pi_text(header, entries) -> str:
    return "".join(js_json(x) + "\n" for x in [header, *entries])


def turn_messages():
    """An endless cycle of realistic appends: prompt, tool call, tool result, answer with usage."""
    n = itertools.count()
    while True:
        k = next(n)
        yield {"role": "user", "content": f"step {k}: run the tests again and fix what fails", "timestamp": k}
        yield {"role": "assistant", "content": [
            {"type": "text", "text": "Running the test suite."},
            {"type": "toolCall", "id": f"bench_{k}", "name": "bash", "arguments": {"command": "pytest -q"}}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 1000 + k, "output": 40, "cacheRead": 50_000, "cacheWrite": 0, "totalTokens": 0},
            "stopReason": "toolUse", "timestamp": k}
        yield {"role": "toolResult", "toolCallId": f"bench_{k}", "toolName": "bash",
               "content": [{"type": "text", "text": "....F..\n1 failed, 6 passed in 0.4s\n" * 20}],
               "isError": False, "timestamp": k}
        yield {"role": "assistant", "content": [{"type": "text", "text": "One test still fails; fixing it."}],
               "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
               "usage": {"input": 1200 + k, "output": 60, "cacheRead": 51_000, "cacheWrite": 0, "totalTokens": 0},
               "stopReason": "stop", "timestamp": k}


def load(text: str) -> Session:
    return Session.from_pi_jsonl(text, hooks=HookRegistry())


def per_turn_ms(session: Session, turns: int) -> tuple[float, float]:
    """Median and 95th percentile (ms) of append + build_context + context_tokens."""
    session.build_context()
    session.context_tokens()  # the context state is built once, outside the timing
    messages = turn_messages()
    samples = []
    gc.collect()
    for _ in range(turns):
        message = next(messages)
        t0 = time.perf_counter()
        session.append_message(message)
        session.build_context()
        session.context_tokens()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def prepare_ms(session: Session, repeats: int) -> tuple[float, object]:
    settings = CompactionSettings()
    plan = session.prepare_compaction(settings)  # warm the per-entry estimate cache
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = session.prepare_compaction(settings)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), plan


def prepare_cold_ms(text: str, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        session = load(text)
        t0 = time.perf_counter()
        session.prepare_compaction(CompactionSettings())
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def scenario(name: str, args, **options) -> dict:
    header, entries = generate_session(args.seed, args.entries, end="turn_end", **options)
    text = pi_text(header, entries)
    small_header, small_entries = generate_session(args.seed, 100, end="turn_end", **options)
    small_text = pi_text(small_header, small_entries)

    gc.collect()
    t0 = time.perf_counter()
    session = load(text)
    load_ms = (time.perf_counter() - t0) * 1000
    assert session.load_report.ok, session.load_report.summary()
    del session
    gc.collect()
    tracemalloc.start()
    session = load(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"\n== {name}")
    print(f"session: {len(session):,} entries ({len(text) / 1e6:.1f} MB of JSONL), path {len(session.path()):,} "
          f"entries, context {len(session.build_context()):,} messages / {session.context_tokens():,} tokens, "
          f"{len(session.compactions())} compactions on the path")
    print(f"load:               {load_ms:9.1f} ms        peak memory while loading (tracemalloc) "
          f"{peak / 2**20:.1f} MiB")

    big_median, big_p95 = per_turn_ms(session, args.turns)
    small_median, small_p95 = per_turn_ms(load(small_text), args.turns)
    print(f"turn @ {len(entries):>6,} entries: median {big_median:6.3f} ms  p95 {big_p95:6.3f} ms   "
          f"(append 1 entry + build_context + context_tokens; {args.turns} turns)")
    print(f"turn @ {len(small_entries):>6,} entries: median {small_median:6.3f} ms  p95 {small_p95:6.3f} ms   "
          f"(16k/100 ratio {big_median / small_median:.2f}x)")

    session = load(text)
    warm, plan = prepare_ms(session, 30)
    cold = prepare_cold_ms(text, 3)
    if plan is None:
        print("prepare_compaction: nothing to compact on this session")
    else:
        print(f"prepare_compaction: median {warm:6.2f} ms (session's estimate cache warm), {cold:.2f} ms cold "
              f"(first call after loading: path walk, context build, estimates); {len(plan.messages_to_summarize):,} messages to summarise, "
              f"{len(plan.turn_prefix_messages)} in the turn prefix, split={plan.is_split_turn}")
    for version, label in (("1.6", "Pi 1.6.0"), ("0.73", "Pi 0.73.1")):
        pi = pi_figures(text, version)
        if pi is None:
            print(f"{label}: not measured (node or tests/oracle/node_modules missing: npm ci --prefix tests/oracle)")
            continue
        print(f"{label:9}: load {pi['load_ms']:7.1f} ms, prepareCompaction median {pi['prepare_ms']:6.2f} ms, turn "
              f"(appendMessage + buildSessionContext + estimateContextTokens) median {pi['turn_ms']:6.3f} ms")
        print(f"{'':9}  ipyagent/Pi: prepare {warm / pi['prepare_ms']:.2f}x (cold {cold / pi['prepare_ms']:.2f}x), "
              f"turn {big_median / pi['turn_ms']:.3f}x, load {load_ms / pi['load_ms']:.2f}x")
    return {"turn": big_median, "prepare": warm, "prepare_cold": cold}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=16_000)
    parser.add_argument("--turns", type=int, default=400, help="appends timed per session size (>= 200)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"ipyagent core benchmark: python {sys.version.split()[0]}, seed {args.seed}, "
          f"{os.cpu_count()} CPUs, load average {load_avg:.1f} (a busy machine inflates every figure)")
    results = [
        scenario("generated session, Pi's mix (branches, compactions every ~30 turns)", args),
        # Not a session a real model could hold (15k messages in one context), but it bounds the
        # O(context) parts: the list copy in build_context and a plan that summarises everything.
        scenario("no compaction ever: the whole path is the context (artificial worst case)", args,
                 p_compaction=0.0, p_compaction_midturn=0.0, p_overflow=0.0, p_branch=0.0),
    ]
    for label, r in zip(("realistic", "worst case"), results):
        print(f"targets ({label}): per turn {r['turn']:.3f} ms (< {TARGET_TURN_MS} ms: "
              f"{'OK' if r['turn'] < TARGET_TURN_MS else 'OVER'}), "
              f"prepare {r['prepare']:.2f} ms (< {TARGET_PREPARE_MS} ms: "
              f"{'OK' if r['prepare'] < TARGET_PREPARE_MS else 'OVER'}; cold {r['prepare_cold']:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
