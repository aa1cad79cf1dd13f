"""A long streamed reply without newlines: what it costs the kernel (CPU) and the page (bytes).

    python tests/benchmarks/long_reply.py                     # 0.4, 1 and 4 MB replies
    python tests/benchmarks/long_reply.py --megabytes 1

A real kernel (``tests/kernel_support.py``'s :class:`LiveKernel`, answering the bridge as a page
does) and the fake provider streaming one reply of ``--megabytes`` of words without a newline, in
16-character deltas (about four tokens each). Printed per size: the kernel's CPU seconds for the
cell (``time.process_time`` read in the kernel: all its threads), the bytes of IOPub messages the
page received for that cell (their JSON content: every display and update of the reply), the
number of messages, and the cell's wall time.
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

from ipyagent.testing.specs import Reply
from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

SETUP = "%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.show_widget = False"
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit "


def measure(megabytes: float) -> None:
    text = (WORDS * int(megabytes * 1e6 / len(WORDS) + 1))[:int(megabytes * 1e6)]
    with tempfile.TemporaryDirectory() as tmp, fake_provider() as server, LiveKernel(cwd=tmp, frontend="page") as k:
        k.run(SETUP, "setup")
        server.enqueue_text("ready")
        k.run("%%agent\nSay ready.", "warm-up")
        server.enqueue(Reply(text=text, chunk_size=16))
        before = k.evaluate("__import__('time').process_time()")
        seen = k.count_iopub()
        start = time.perf_counter()
        cell = k.run("%%agent\nWrite a lot.", "long", timeout=3600)
        seconds = time.perf_counter() - start
        sent, messages = sum(size for _, size in seen), len(seen)
        cpu = k.evaluate("__import__('time').process_time()") - before
        assert cell.status == "ok", outputs_text(cell.outputs)[-500:]
    print(f"{megabytes:g} MB reply without newlines: kernel CPU {cpu:.1f} s, {sent / 1e6:,.1f} MB in {messages:,} "
          f"IOPub messages to the page, cell {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, nargs="*", default=[0.4, 1, 4])
    for size in parser.parse_args().megabytes:
        measure(size)


if __name__ == "__main__":
    main()
