"""Benchmark of rendering a streamed reply through the untrusted gate (no thresholds asserted).

    python tests/benchmarks/rendering.py [--sizes 2000,20000,100000] [--rate 10] [--delta 6]

A streamed reply is shown as HTML rendered in the kernel: Markdown → HTML with markdown-it-py,
then the nh3 allowlist (``reply_bundle``). Each update renders only the blocks after the last
finished one again (``StreamedMarkdown``); the last renders the whole reply. Figures:
- one render of a reply of each size (median of repeats);
- a whole stream: the reply arriving in ``--delta``-character pieces at 300 characters a second
  (a fast model; the renderer's clock is simulated, the rendering is real), through
  ``RunRenderer`` at ``--rate`` updates a second: how many updates went out and the CPU they
  took, as a share of the stream's duration (what the kernel pays while streaming).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from ipyagent.display.stream import RunRenderer, reply_bundle
from ipyagent.providers.provider import TextDelta

SAMPLE = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def reply_of(size: int) -> str:
    text = SAMPLE
    while len(text) < size:
        text += "\n\n" + SAMPLE
    return text[:size]


def one_render(text: str, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        reply_bundle(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def stream(text: str, rate: float, delta: int, chars_per_second: float = 300.0) -> tuple[int, float, float]:
    """(updates, CPU seconds in rendering, simulated stream seconds)."""
    now = [0.0]
    spent = [0.0]

    class Handle:
        def update(self, data, **kwargs):
            pass

    def display(data, **kwargs):
        return Handle()

    renderer = RunRenderer(display_func=display, clock=lambda: now[0], max_updates_per_second=rate)
    original = renderer.reply.flush

    def timed(force: bool = False) -> None:
        started = time.perf_counter()
        original(force)
        spent[0] += time.perf_counter() - started

    renderer.reply.flush = timed  # type: ignore[method-assign]
    for start in range(0, len(text), delta):
        now[0] = start / chars_per_second
        renderer(TextDelta(text[start:start + delta]))
    renderer.finish()
    return renderer.updates, spent[0], len(text) / chars_per_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--delta", type=int, default=6)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("one render of the whole reply (markdown-it-py + nh3):")
    for size in sizes:
        print(f"  {size:>8,} characters: {one_render(reply_of(size)) * 1000:7.2f} ms")
    print(f"a streamed reply at {args.rate:g} updates/s, {args.delta}-character deltas, 300 characters/s:")
    for size in sizes:
        updates, cpu, wall = stream(reply_of(size), args.rate, args.delta)
        print(f"  {size:>8,} characters: {updates:5d} updates, {cpu:7.3f} s rendering over a {wall:6.1f} s stream "
              f"({100 * cpu / wall:5.2f} % of one core)")


if __name__ == "__main__":
    main()
