"""``ipyagent run`` against plain nbclient: wall time, and run-to-run spread.

    python tests/benchmarks/headless.py [--runs 30]

The notebook: the stress test's 12 cells (``tests/bridge/test_headless_reliability.py``: a setup cell,
ten ``%%agent`` cells and a ``%compact``, against the loopback fake provider). Each round runs,
as separate commands (what a user types):

* ``ipyagent run agent.ipynb`` — the whole notebook, answering the bridge;
* ``jupyter execute plain.ipynb`` — nbclient's own command on the same notebook without its agent
  cells (the setup cell stays).

Printed: the median wall time of each, their ratio (target ≤ 1.2), and the median and maximum of
the ``ipyagent run`` times with the max/median ratio (the stall this guards against made single
runs 60× slower; target: no run above 2× the median).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

from ipyagent.store.ipynb import write_notebook
from kernel_support import chatty, fake_provider, notebook, twelve_cells


def timed(cmd: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    cells = twelve_cells()
    with tempfile.TemporaryDirectory() as tmp, fake_provider(policy=chatty):
        agent_nb, plain_nb = Path(tmp, "agent.ipynb"), Path(tmp, "plain.ipynb")
        write_notebook(agent_nb, notebook(*cells))
        write_notebook(plain_nb, notebook(*[c for c in cells if not c.startswith(("%%agent", "%compact"))]))
        ipyagent = [sys.executable, "-m", "ipyagent", "run", str(agent_nb), "-o", str(Path(tmp, "out.ipynb"))]
        plain = [sys.executable, "-m", "jupyter", "execute", str(plain_nb), "--output=plain-out"]
        timed(ipyagent), timed(plain)  # warm the disk caches
        agent_times, plain_times = [], []
        for _ in range(args.runs):
            agent_times.append(timed(ipyagent))
            plain_times.append(timed(plain))
    a, p = statistics.median(agent_times), statistics.median(plain_times)
    print(f"runs: {args.runs} each, interleaved; {len(cells)} cells, "
          f"{sum(c.startswith('%%agent') for c in cells)} of them %%agent")
    print(f"ipyagent run   median {a:.2f} s   max {max(agent_times):.2f} s   max/median {max(agent_times) / a:.2f}")
    print(f"jupyter execute median {p:.2f} s   max {max(plain_times):.2f} s   (same notebook, no agent cells)")
    print(f"ratio ipyagent run / plain nbclient (medians): {a / p:.2f}   (target <= 1.2)")
    print("ipyagent run times: " + " ".join(f"{t:.2f}" for t in agent_times))


if __name__ == "__main__":
    main()
