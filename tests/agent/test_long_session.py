"""A long scripted session against a server that enforces its window: the budget holds."""

from __future__ import annotations

import random

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer

WINDOW = 6000


def test_hundreds_of_calls_with_large_tool_results_never_overflow(tmp_path):
    rng = random.Random(7)
    for i in range(8):
        (tmp_path / f"module_{i}.py").write_text("".join(f"def f{i}_{j}(x):\n    return x * {j}\n" for j in range(120)))
    with FakeProviderServer(context_window=WINDOW) as server:
        server.register("fake")
        config = RunConfig(model="fake:long-model", context_window=WINDOW, tool_approval="auto",
                           compaction=CompactionSettings(reserve_tokens=1500, keep_recent_tokens=1500))
        agent = AgentLoop(Session(hooks=HookRegistry()), config=config, cwd=str(tmp_path), namespace={},
                          sleep=lambda s: None, providers=server.providers)
        compactions: list[ev.CompactionEnd] = []
        agent.subscribe(lambda e: compactions.append(e) if isinstance(e, ev.CompactionEnd) else None)
        summary_calls_at = [0]

        def on_compaction_start(event):
            if isinstance(event, ev.CompactionStart):
                summary_calls_at.append(server.summary_calls)

        agent.subscribe(on_compaction_start)
        appended = []
        agent.subscribe(lambda e: appended.append(e.entry["id"]) if isinstance(e, ev.EntryAppended) else None)

        prompts = 0
        while server.chat_calls < 200:  # two hundred calls make ~75 compactions, each one a test of the budget
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    server.enqueue_tool_call("read", {"path": f"module_{rng.randint(0, 7)}.py"})
                else:
                    server.enqueue_tool_call("bash", {"command": f"seq 1 {rng.randint(200, 900)}"})
            server.enqueue_text("Step finished. " + "Observation. " * rng.randint(5, 40))
            result = agent.prompt(f"Task {prompts}: inspect the next module and report. " + "detail " * rng.randint(5, 60))
            assert result.error is None, result.error
            prompts += 1

        outcomes = [r.outcome for r in server.requests]
        assert outcomes.count("overflow") == 0
        assert all(o == "reply" for o in outcomes), sorted(set(outcomes))
        done = [c for c in compactions if c.entry is not None]
        assert len(done) >= 5
        assert all(c.error is None for c in compactions)
        # at most two summariser calls per compaction (two only for a split turn)
        assert server.summary_calls <= 2 * len(done)
        per_compaction = [b - a for a, b in zip(summary_calls_at, summary_calls_at[1:] + [server.summary_calls])]
        assert all(n <= 2 for n in per_compaction)
        # every entry that was announced is in the session, once
        ids = [e["id"] for e in agent.session.entries]
        assert sorted(appended) == sorted(ids) and len(set(ids)) == len(ids)
        # the path's tool calls all have their results
        calls, results = set(), set()
        for entry in agent.session.path():
            if entry["type"] == "message":
                message = entry["message"]
                calls |= {b["id"] for b in message.get("content", []) if isinstance(b, dict) and b.get("type") == "toolCall"}
                if message["role"] == "toolResult":
                    results.add(message["toolCallId"])
        assert calls == results
        # and every request the server accepted fit its window
        assert max(r.prompt_tokens for r in server.requests) <= WINDOW
