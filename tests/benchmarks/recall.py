"""Benchmark of the ``recall`` tool and of the artifact ledger (no thresholds asserted).

    python tests/benchmarks/recall.py [--entries 2000 16000] [--repeat 20]

Figures, on sessions of N entries (a prompt, a python call, its result and an answer per turn;
one compaction keeping the last ~20,000 tokens, so nearly everything is summarised away):
- recall(query): median time of a words search and of a regex search over the summarised entries;
- recall(entry_id): median time to return one entry in full;
- the ledger: time to build it from every summarised message (ast parsing every python call),
  which compaction pays once per compaction (planning never does).
"""

from __future__ import annotations

import argparse
import statistics
import time

from ipyagent.agent.tools import ToolContext, get_tool
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.core import Session
from ipyagent.hooks import HookRegistry


def build(entries: int) -> Session:
    session = Session(hooks=HookRegistry())
    for k in range(entries // 4):
        session.append_message({"role": "user", "content": f"step {k}: load batch {k} and check its columns",
                                "timestamp": k, "executionCount": k + 1})
        code = f"batch_{k} = load('data/part-{k}.csv')\ncols_{k} = list(batch_{k}.columns)\nprint(cols_{k})"
        session.append_message({"role": "assistant", "content": [
            {"type": "toolCall", "id": f"c{k}", "name": "python", "arguments": {"code": code}}],
            "usage": {"input": 1000, "output": 40, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1040},
            "stopReason": "toolUse", "timestamp": k})
        session.append_message({"role": "toolResult", "toolCallId": f"c{k}", "toolName": "python",
                                "content": [{"type": "text", "text": f"['id', 'value_{k}', 'when']\n" + "row\n" * 30}],
                                "isError": False, "timestamp": k})
        session.append_message({"role": "assistant", "content": [{"type": "text", "text": f"Batch {k} has 3 columns."}],
                                "usage": {"input": 1100, "output": 20, "cacheRead": 0, "cacheWrite": 0,
                                          "totalTokens": 1120}, "stopReason": "stop", "timestamp": k})
    return session


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[2000, 16000])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    recall = get_tool("recall")
    for entries in args.entries:
        session = build(entries)
        started = time.perf_counter()
        session.compact(ScriptedSummarizer(fn=lambda r: "## Goal\nbatches"), CompactionSettings())
        compact_ms = (time.perf_counter() - started) * 1000
        hidden = session.summarized_entries()
        context = ToolContext(history=session)
        middle = hidden[len(hidden) // 2]["id"]
        plan_ledger = session.compactions()[-1]["details"]["artifacts"]
        words = median_ms(lambda: recall.run({"query": f"value_{entries // 8} columns"}, context), args.repeat)
        regex = median_ms(lambda: recall.run({"query": r"part-\d+7\.csv"}, context), args.repeat)
        full = median_ms(lambda: recall.run({"entry_id": middle}, context), args.repeat)
        print(f"{entries:>6,} entries ({len(hidden):,} summarised): recall words {words:7.1f} ms · regex {regex:7.1f} ms"
              f" · entry_id {full:6.1f} ms · compaction with its ledger {compact_ms:7.1f} ms "
              f"({len(plan_ledger['variables'])} variables kept)")


if __name__ == "__main__":
    main()
