"""A long scripted session against the fake server enforcing its window.

Prints: requests served, overflow errors served, compactions, summariser calls per compaction,
and two prompt-cache figures between consecutive requests: the cached share of each request's
prompt (which new tool output lowers in a small window), and the share of the previous request's
prompt that the next one reuses unchanged as its prefix (which only rewriting history lowers).

    python tests/benchmarks/long_session.py [--calls 600] [--window 8000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--protocol", default="anthropic", choices=["openai", "anthropic"])
    args = parser.parse_args()
    rng = random.Random(11)
    workdir = Path(tempfile.mkdtemp())
    for i in range(8):
        (workdir / f"module_{i}.py").write_text("".join(f"def f{i}_{j}(x):\n    return x * {j}\n" for j in range(150)))
    with FakeProviderServer(context_window=args.window) as server:
        server.register("fake", args.protocol)
        reserve = max(1024, args.window // 5)
        config = RunConfig(model="fake:bench", context_window=args.window, tool_approval="auto",
                           compaction=CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=args.window // 4))
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, cwd=str(workdir), namespace={},
                          sleep=lambda s: None)
        marks: list[int] = []  # summariser calls seen when each compaction started
        compactions: list[ev.CompactionEnd] = []
        agent.subscribe(lambda e: marks.append(server.summary_calls) if isinstance(e, ev.CompactionStart) else None)
        agent.subscribe(lambda e: compactions.append(e) if isinstance(e, ev.CompactionEnd) else None)
        chat_after_compaction: set[int] = set()
        agent.subscribe(lambda e: chat_after_compaction.add(server.chat_calls) if isinstance(e, ev.CompactionEnd) else None)
        prompts = 0
        while server.chat_calls < args.calls:
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    server.enqueue_tool_call("read", {"path": f"module_{rng.randint(0, 7)}.py"})
                else:
                    server.enqueue_tool_call("bash", {"command": f"seq 1 {rng.randint(200, 1200)}"})
            server.enqueue_text("Step finished. " + "Observation. " * rng.randint(5, 40))
            result = agent.prompt(f"Task {prompts}: inspect the next module. " + "detail " * rng.randint(5, 60))
            if result.error:
                raise SystemExit(f"run failed: {result.error}")
            prompts += 1
    chats = [r for r in server.requests if r.kind == "chat"]
    outcomes = [r.outcome for r in server.requests]
    done = [c for c in compactions if c.entry is not None]
    per = [b - a for a, b in zip(marks, marks[1:] + [server.summary_calls])]
    pairs = [(chats[i - 1], chats[i]) for i in range(1, len(chats))]
    steady = [(a, b) for i, (a, b) in enumerate(pairs, start=1) if i not in chat_after_compaction]
    ratio_all = sum(b.cached_tokens for _, b in pairs) / max(1, sum(b.prompt_tokens for _, b in pairs))
    ratio_steady = sum(b.cached_tokens for _, b in steady) / max(1, sum(b.prompt_tokens for _, b in steady))
    print(f"protocol={args.protocol} window={args.window} prompts={prompts} chat requests={len(chats)}")
    print(f"overflow errors served: {outcomes.count('overflow')}; other non-reply outcomes: "
          f"{sorted({o for o in outcomes if o not in ('reply', 'overflow')})}")
    print(f"compactions: {len(done)} (failed: {len(compactions) - len(done)}); summariser calls: {server.summary_calls}; "
          f"per compaction: max {max(per) if per else 0}, mean {sum(per) / max(1, len(per)):.2f}")
    print(f"prompt-cache prefix reuse between consecutive requests: {ratio_all:.3f} overall, "
          f"{ratio_steady:.3f} excluding the first request after each compaction")
    kept = [b.cached_tokens / max(1, a.prompt_tokens) for a, b in steady]
    print(f"share of the previous request's prompt reused as the next one's cached prefix: "
          f"median {sorted(kept)[len(kept) // 2]:.3f}, mean {sum(kept) / max(1, len(kept)):.3f} (steady state)")
    print(f"largest request: {max(r.prompt_tokens for r in chats)} tokens of {args.window}")


if __name__ == "__main__":
    main()
