"""What each test costs in CPU seconds, a unit that does not depend on how busy the machine is.

    python tests/benchmarks/cpu_seconds.py [--out FILE] [--top N] -- PYTEST ARGS
    python tests/benchmarks/cpu_seconds.py -- tests/interop -p no:xdist      # the interop tests, one process
    python tests/benchmarks/cpu_seconds.py -- -n 3 --dist loadgroup          # the README's command, per worker

It runs pytest with this module as a plugin (in every xdist worker too). Around each test's whole
protocol (setup, call, teardown: a session fixture's server start is billed to the first test that
asks for it) the plugin reads, with psutil, the CPU seconds (user + system) of:

* ``test``: the pytest process itself;
* ``llama``: every live llama.cpp server below it (``python -m llama_cpp.server``);
* ``other``: every other live process below it (kernels, JupyterLab, chromium, ``ipyagent run``),
  and what the processes that ended during the test used (the children a process has waited for
  are added to its own ``children_user``/``children_system``; a process is counted with those).

A test's figure is the difference of the sums after and before it. For the llama.cpp servers it also
counts, from what each server wrote to its log (its stdout) during the test, the prompt tokens it
evaluated (``prompt_tokens``: what its prompt cache did not already hold) and the tokens it
generated (``generated``): exact counts, whatever the load (on a busy machine llama.cpp's threads
spin while they wait for each other, which adds CPU seconds that a quiet machine does not spend). A server that stops during a
test (the last test of its fixture's scope) moves from ``llama`` into its parent's reaped children,
so that test's ``llama`` column shows less than the server did and ``other`` more; the total is
right. Processes that outlive their parent and are re-parented elsewhere are lost (none should).

Printed: the ``--top`` costliest tests, then each xdist group's and each worker's sum. On a quiet
machine a worker is one core, so its sum of CPU seconds is about the time it needs when its
processes do not overlap; the busiest worker's sum (plus collection and startup) estimates the run.
The records go to ``--out`` (JSON lines) as well.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import psutil
import pytest

OUT = "IPYAGENT_CPU_PER_TEST_OUT"
SERVERS_AT_TEARDOWN = pytest.StashKey[dict[str, int]]()
HERE = Path(__file__).resolve().parent
PROMPT = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
GENERATED = re.compile(r"^\S+\s+eval time =\s*[\d.]+ ms /\s*(\d+) runs", re.MULTILINE)


def _seconds(process: psutil.Process) -> float:
    """User + system CPU of ``process`` and of its children it has waited for."""
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _is_llama(process: psutil.Process) -> bool:
    try:
        return "llama_cpp.server" in process.cmdline()
    except psutil.Error:
        return False


def sample() -> dict[str, float]:
    """The CPU seconds so far of this process, its live llama.cpp servers and its other descendants."""
    me = psutil.Process()
    own = me.cpu_times()
    counts = {"test": own.user + own.system, "llama": 0.0, "other": own.children_user + own.children_system}
    for child in me.children(recursive=True):
        try:
            counts["llama" if _is_llama(child) else "other"] += _seconds(child)
        except psutil.Error:  # it ended meanwhile: its time is in its parent's reaped children
            continue
    return counts


def server_logs() -> dict[str, int]:
    """The log file (stdout) of each live llama.cpp server below this process, and its size now."""
    logs = {}
    for child in psutil.Process().children(recursive=True):
        try:
            if _is_llama(child):
                path = os.readlink(f"/proc/{child.pid}/fd/1")
                logs[path] = os.path.getsize(path)
        except (OSError, psutil.Error):
            continue
    return logs


def tokens_since(logs: dict[str, int]) -> tuple[int, int]:
    """Prompt tokens evaluated and tokens generated, in the servers' logs after the given sizes
    (a log not among them, a server started meanwhile, from its start)."""
    prompt = generated = 0
    for path in {*logs, *server_logs()}:
        try:
            with open(path, encoding="utf-8", errors="replace") as log:
                log.seek(logs.get(path, 0))
                text = log.read()
        except OSError:
            continue
        prompt += sum(map(int, PROMPT.findall(text)))
        generated += sum(map(int, GENERATED.findall(text)))
    return prompt, generated


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker and marker.args else "-"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    path = os.environ.get(OUT)
    if not path:
        return (yield)
    before, logs, started = sample(), server_logs(), time.monotonic()
    try:
        return (yield)
    finally:
        after = sample()
        record: dict[str, Any] = {key: round(after[key] - before[key], 3) for key in after}
        # a server its setup started (new: read from the start) and its teardown stopped is in neither
        seen = {path: 0 for path in item.stash.get(SERVERS_AT_TEARDOWN, {}) if path not in logs}
        record["prompt_tokens"], record["generated"] = tokens_since({**logs, **seen})
        record.update(nodeid=item.nodeid, group=_group(item), wall=round(time.monotonic() - started, 3),
                      worker=os.environ.get("PYTEST_XDIST_WORKER", "main"))
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The servers live before the test's fixtures end (a session fixture's may stop now)."""
    if os.environ.get(OUT):
        item.stash[SERVERS_AT_TEARDOWN] = server_logs()


def total(record: dict[str, Any]) -> float:
    return float(record["test"] + record["llama"] + record["other"])


def report(records: list[dict[str, Any]], top: int) -> None:
    print(f"\n{'CPU s':>8} {'test':>7} {'llama':>8} {'other':>8} {'prompt':>7} {'gen':>6} {'wall s':>8}  test")
    for r in sorted(records, key=total, reverse=True)[:top]:
        print(f"{total(r):8.1f} {r['test']:7.1f} {r['llama']:8.1f} {r['other']:8.1f} {r.get('prompt_tokens', 0):7} "
              f"{r.get('generated', 0):6} {r['wall']:8.1f}  {r['nodeid']}")
    for key in ("group", "worker"):
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in records:
            sums[r[key]][0] += total(r)
            sums[r[key]][1] += r["wall"]
            sums[r[key]][2] += 1
        print(f"\nby {key}:")
        for name, (cpu, wall, count) in sorted(sums.items(), key=lambda kv: -kv[1][0]):
            print(f"  {name:12} {int(count):5} tests  {cpu:8.1f} CPU s  {wall:8.1f} wall s")
    print(f"\nall: {len(records)} tests, {sum(map(total, records)):.1f} CPU s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="JSON lines, one per test (default: a temporary file)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkstemp(suffix=".jsonl")[1])
    out.write_text("")
    env = dict(os.environ, **{OUT: str(out)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "pytest", "-p", "cpu_seconds", "-p", "no:cacheprovider",
                            *args.pytest_args], env=env)
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    report(records, args.top)
    print(f"pytest exited with {code} after {time.monotonic() - started:.0f} s wall; records in {out}")


if __name__ == "__main__":
    main()
