"""What a ``python`` tool call that prints a lot costs the kernel: its peak memory and the time.

    python tests/benchmarks/python_tool_output.py                  # 3,000,000 lines of 100 characters
    python tests/benchmarks/python_tool_output.py --lines 300000

A real kernel (``tests/kernel_support.py``'s :class:`LiveKernel`) against the fake provider: the
model asks for one ``python`` call that prints ``--lines`` lines of 100 characters (300 MB at the
default), then answers. Printed: the kernel's peak resident memory before and after the run
(``ru_maxrss``, read in the kernel), the run's wall time, and the first line of the tool result's
notice (what the model was told about the part left out).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

SETUP = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.tool_approval = 'auto'\n"
         "%config Agent.show_widget = False")
PEAK = "__import__('resource').getrusage(__import__('resource').RUSAGE_SELF).ru_maxrss // 1024"


def measure(lines: int) -> None:
    code = f"line = 'x' * 99\nfor _ in range({lines}):\n    print(line)"
    with tempfile.TemporaryDirectory() as tmp, fake_provider() as server, LiveKernel(cwd=tmp) as k:
        k.run(SETUP, "setup")
        before = k.evaluate(PEAK)
        server.enqueue_tool_call("python", {"code": code})
        server.enqueue_text("Done.")
        start = time.perf_counter()
        cell = k.run("%%agent\nPrint the lines.", "c1", timeout=1800)
        seconds = time.perf_counter() - start
        assert cell.status == "ok", outputs_text(cell.outputs)
        after = k.evaluate(PEAK)
        results = [e["message"] for e in k.metadata["sessions"]["default"]["entries"]
                   if e["type"] == "message" and e["message"]["role"] == "toolResult"]
        text = results[0]["content"][0]["text"]
        notice = [line for line in text.splitlines() if line.startswith("[")][-2:]
        print(f"{lines:,} lines of 100 characters ({lines * 100 / 1e6:,.0f} MB): kernel peak RSS "
              f"{before:,} -> {after:,} MB, run {seconds:.1f} s; result {len(text):,} characters")
        for line in notice:
            print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3_000_000)
    measure(parser.parse_args().lines)


if __name__ == "__main__":
    main()
