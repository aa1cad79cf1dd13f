"""Benchmark: what the notebook-activity block adds to each %%agent prompt (no thresholds asserted).

    python tests/benchmarks/notebook_context.py [--repeat 200] [--no-kernel]

Figures:
- after 10 and after 500 executed cells (a mix of assignments, printed values, errors and growing
  namespaces, recorded by the real ``ActivityRecorder`` on an IPython shell): the block's tokens
  (chars/4) and the milliseconds to build it (the namespace diff plus the formatting), median over
  repeats — the per-prompt cost, which must not grow with the notebook's length;
- the per-cell cost of recording (``pre_run_cell`` + ``post_run_cell``), median;
- the output recorder's own cost per write (what sits in ipykernel's ``echo`` slot; a ``print``
  is two writes), in-process;
- in a real kernel: the time of a cell that prints 20,000 lines, without and with the output
  recorder, alternating ``%load_ext`` / ``%unload_ext`` in one kernel (noisy on a busy machine).
Targets: the block within ``Agent.notebook_context_tokens`` (2,000), under 5 ms per prompt.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output

from ipyagent.agent.prompt.activity_block import CHARS_PER_TOKEN, format_activity
from ipyagent.kernel.ports.activity_recorder import ActivityRecorder

CAP = 2000
TARGET_MS = 5.0


def cell_source(i: int) -> str:
    kind = i % 5
    if kind == 0:
        return f"table_{i} = [{{'id': j, 'value': j * {i}}} for j in range(200)]\nlen(table_{i})"
    if kind == 1:
        return f"total_{i} = sum(r['value'] for r in table_{i - 1})\nprint('total', total_{i})"
    if kind == 2:
        return f"def helper_{i}(x):\n    return x / (x - x)\nhelper_{i}({i})"
    if kind == 3:
        return f"text_{i} = 'row ' * 50\ntext_{i}[:40]"
    return f"import math\nmath.sqrt({i})"


def measure(shell: InteractiveShell, cells: int, repeat: int) -> tuple[int, float, float]:
    recorder = ActivityRecorder(shell)
    recorder.start()
    per_cell = []
    try:
        for i in range(cells):
            started = time.perf_counter()
            recorder.pre_run_cell(type("Info", (), {"raw_cell": cell_source(i), "cell_id": None})())
            recorder._running.pop()  # timed alone above; the shell's own events record the cell below
            per_cell.append(time.perf_counter() - started)
            with capture_output():
                shell.run_cell(cell_source(i), store_history=True, silent=False)
        timings = []
        block = ""
        for _ in range(repeat):
            started = time.perf_counter()
            block = format_activity(recorder.activity("bench"), CAP)
            timings.append(time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(repeat):
            recorder.post_run_cell(type("Result", (), {"execution_count": None, "result": None,
                                                       "error_before_exec": None, "error_in_exec": None})())
        post = (time.perf_counter() - started) / repeat
        tokens = (len(block) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        return tokens, statistics.median(timings) * 1000, (statistics.median(per_cell) + post) * 1e6
    finally:
        recorder.stop()


def tee_cost_per_write(writes: int = 200_000) -> float:
    """µs per write of the recorder in the echo slot, with a cell running (its buffer filling)."""
    from ipyagent.kernel.ports.activity_recorder import BoundedText, _EchoTee

    recorder = ActivityRecorder.__new__(ActivityRecorder)
    recorder.sink = BoundedText(4000).write
    tee = _EchoTee(recorder, None)
    line = "12345\n"
    started = time.perf_counter()
    for _ in range(writes):
        tee.write(line)
    return (time.perf_counter() - started) / writes * 1e6


def kernel_print_overhead() -> tuple[float, float]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        code = ("import time as _t\n_s = _t.perf_counter()\nfor _i in range(20000):\n    print(_i)\n"
                "import sys; sys.stdout.flush()\n_elapsed = _t.perf_counter() - _s")

        def timed() -> float:
            runs = []
            for _ in range(3):
                kc.execute_interactive(code, output_hook=lambda msg: None, timeout=120)
                reply = kc.execute_interactive("", user_expressions={"e": "_elapsed"}, timeout=60,
                                               output_hook=lambda msg: None)
                runs.append(float(reply["content"]["user_expressions"]["e"]["data"]["text/plain"]))
            return statistics.median(runs) * 1000

        without, with_recorder = [], []
        for _ in range(3):  # alternate, so a busy machine weighs on both alike
            without.append(timed())
            kc.execute_interactive("%load_ext ipyagent", output_hook=lambda msg: None, timeout=60)
            with_recorder.append(timed())
            kc.execute_interactive("%unload_ext ipyagent", output_hook=lambda msg: None, timeout=60)
        return statistics.median(without), statistics.median(with_recorder)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-kernel", action="store_true", help="skip the real-kernel stdout figure")
    args = parser.parse_args()
    globalipapp.start_ipython()
    shell = InteractiveShell.instance()
    print(f"notebook-activity block, cap {CAP:,} tokens (Agent.notebook_context_tokens); target < {TARGET_MS} ms")
    for cells in (10, 500):
        tokens, ms, per_cell_us = measure(shell, cells, args.repeat)
        print(f"  after {cells:>3} executed cells: {tokens:>5,} tokens ({'within' if tokens <= CAP else 'OVER'} the "
              f"cap), {ms:.3f} ms per prompt (median of {args.repeat}); recording: {per_cell_us:.1f} µs per cell")
        shell.reset(new_session=False)
    print(f"  output recorder: {tee_cost_per_write():.2f} µs per write (a print is two writes)")
    if not args.no_kernel:
        without, with_recorder = kernel_print_overhead()
        print(f"  real kernel, a cell printing 20,000 lines: {without:.1f} ms without, {with_recorder:.1f} ms with "
              f"the output recorder ({100 * (with_recorder - without) / without:+.1f} %)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
