"""A summary server that ignores ``max_tokens``: how long the client reads, and how much, before it
refuses the summary.

    python tests/benchmarks/summary_overrun.py              # 2 MB and 40 MB replies

The fake provider over loopback (real HTTP, SSE in 4,096-character chunks) answers a summary
request with a reply of each size, whatever its ``max_tokens``:

* **summariser**: ``ProviderSummarizer`` in this process, a request of ``max_tokens = 256``;
* **%compact**: in a real kernel (``tests/kernel_support.py``), four ``%%agent`` cells on a 6,000
  token window, then ``%compact`` (its limit is the room the window leaves the summary).

Printed per size: the seconds until the summariser returned or raised (the ``%compact`` cell's
wall time), the requests made, the bytes the server managed to send (what the client took before
it hung up, socket buffers included), and the outcome.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))

from ipyagent.agent.provider_summarizer import ProviderSummarizer
from ipyagent.compaction import prompts
from ipyagent.compaction.summarizer import SummarizerError, SummaryRequest
from ipyagent.testing import FakeProviderServer
from ipyagent.testing.specs import Reply

SENTENCE = "The summary goes on and on without end. "  # 40 characters


def _outcome(text: str) -> str:
    read = re.search(r"reading stopped after ([\d,]+) characters", text)
    if read:
        return f"refused after reading {read.group(1)} characters"
    return "refused: " + text[:100] if "failed" in text else text[:100]


def measure(megabytes: float) -> None:
    text = SENTENCE * int(megabytes * 1e6 / len(SENTENCE))
    with FakeProviderServer() as server:
        server.enqueue_summary(Reply(text=text, chunk_size=4096))
        summarizer = ProviderSummarizer("openai:fake-model", max_retries=0,
                                        provider_options={"openai": {"base_url": server.openai_base_url,
                                                                     "api_key": "sk-benchmark"}})
        request = SummaryRequest(system_prompt=prompts.SYSTEM_PROMPT, max_tokens=256, kind="history",
                                 prompt=prompts.summary_request_text("[User]: hello\n\n[Assistant]: hi", prompts.INITIAL_PROMPT))
        start = time.perf_counter()
        try:
            response = summarizer.summarize(request)
            outcome = f"accepted, {len(response.text):,} characters"
        except SummarizerError as exc:
            outcome = _outcome(str(exc))
        seconds = time.perf_counter() - start
        record = server.requests[-1]
        deadline = time.monotonic() + 30
        while record.outcome == "reply" and record.sent_bytes < len(text) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the hang-up at its next write
    print(f"summariser, {megabytes:g} MB reply to max_tokens=256: {seconds:.2f} s, server sent "
          f"{record.sent_bytes:,} bytes ({record.outcome}); {outcome}")


def measure_compact(megabytes: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from kernel_support import SETUP, LiveKernel, fake_provider
    from support.outputs import outputs_text

    text = SENTENCE * int(megabytes * 1e6 / len(SENTENCE))
    window = ("%config Agent.context_window = 6000\n%config Agent.reserve_tokens = 600\n"
              "%config Agent.keep_recent_tokens = 500\n")
    with tempfile.TemporaryDirectory() as tmp, fake_provider() as server, LiveKernel(cwd=tmp) as k:
        k.run(SETUP + window, "setup")
        for i in range(4):
            server.enqueue_text(f"Answer {i}: " + "the columns hold measurements that look consistent " * 14)
            k.run(f"%%agent\nQuestion {i}: " + "tell me more about the data set and its columns " * 8, f"a{i}")
        for _ in range(3):
            server.enqueue_summary(Reply(text=text, chunk_size=4096))
        start = time.perf_counter()
        cell = k.run("%compact", "compact", timeout=1800)
        seconds = time.perf_counter() - start
        summaries = [r for r in server.requests if r.kind == "summary"]
        deadline = time.monotonic() + 30
        while any(r.outcome == "reply" and r.sent_bytes < len(text) for r in summaries) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        shown = [line for line in outputs_text(cell.outputs).splitlines() if line.strip()]
    limit = summaries[0].body.get("max_tokens") or summaries[0].body.get("max_completion_tokens")
    print(f"%compact, {megabytes:g} MB reply to max_tokens={limit}: {seconds:.2f} s, {len(summaries)} summary "
          f"request(s), server sent {sum(r.sent_bytes for r in summaries):,} bytes; "
          f"{_outcome(' '.join(shown))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, nargs="*", default=[2, 40])
    for size in parser.parse_args().megabytes:
        measure(size)
    for size in parser.parse_args().megabytes:
        measure_compact(size)


if __name__ == "__main__":
    main()
