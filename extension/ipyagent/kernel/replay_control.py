"""Replay in the notebook: which cells replay, from which recording, with what fallback.

The recording is the active session's path as it was loaded (the session the visible cells
describe). ``auto`` replays a recorded cell only when no provider is configured for its model,
so a notebook from someone else runs offline without a key and never re-runs its recorded
tool calls, while a configured provider makes it run live.

A replayed cell follows the recorded path (``Session.follow``): every entry it reproduces is the
recorded entry itself (same id), so re-running a recorded notebook leaves its session as it was;
only where the run departs from the recording does a new branch begin. While it follows, its
compactions follow the recording too (``ReplayCompactions``, the agent loop's compaction oracle):
made where the recording made them, with the recorded cut and summary, and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ipyagent.agent.replay import (
    CellRecording,
    Recording,
    ReplayCompactions,
    ReplayDescriber,
    ReplayProvider,
    ReplaySummarizer,
    ReplayToolResults,
    same_when_replayed,
)

# provider name -> environment variables whose presence means "configured"
PROVIDER_ENV = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
}


def provider_configured(model: str, provider_options: dict[str, dict[str, Any]] | None = None) -> bool:
    """Whether ``model``'s provider has credentials or an endpoint (local servers need no key)."""
    if not model:
        return False
    from ipyagent.providers.registry import parse_model_string

    name, _ = parse_model_string(model)
    options = (provider_options or {}).get(name) or {}
    if name == "openai-responses" and not options:  # it uses the openai options (resolve_provider)
        options = (provider_options or {}).get("openai") or {}
    if options.get("api_key") or options.get("base_url"):
        return True
    names = PROVIDER_ENV.get(name)
    if names is None:
        return True  # ollama, llama.cpp, a registered test provider…: nothing to look for
    return any(os.environ.get(n) for n in names)


@dataclass
class ReplayAttachment:
    cell: CellRecording
    tools: ReplayToolResults
    live: bool  # a live provider takes over on divergence


class ReplayController:
    def __init__(self) -> None:
        self.recordings: dict[str, Recording] = {}
        self.paths: dict[str, list[dict[str, Any]]] = {}  # the recorded path, followed while replaying
        self.runs: Counter[tuple[str, str]] = Counter()

    def capture(self, name: str, session: Any) -> Recording:
        """Take ``session``'s current path as the recording of session ``name``."""
        path = self.paths[name] = session.path()
        recording = self.recordings[name] = Recording.from_entries(path)
        self.runs = Counter({k: v for k, v in self.runs.items() if k[0] != name})
        return recording

    def replays(self, mode: str, model: str, provider_options: dict[str, dict[str, Any]] | None) -> bool:
        """Whether recorded cells replay now (``on``; ``auto`` without a configured provider)."""
        return mode == "on" or (mode == "auto" and not provider_configured(model, provider_options))

    @contextlib.contextmanager
    def following(self, runtime: Any) -> Iterator[None]:
        """Around a command that records entries (``%agent pin`` …): while recorded cells replay,
        every session follows its recorded path, so an entry the command records again is the
        recorded one, and the replayed cells after it still find their recording under the leaf."""
        config = runtime.agent_config()
        followed = []
        if self.replays(runtime.config.replay, config.model, config.provider_options):
            for name, slot in runtime.slots.items():
                if self.paths.get(name):
                    slot.session.follow(self.paths[name], same_when_replayed)
                    followed.append(slot.session)
        try:
            yield
        finally:
            for session in followed:
                session.follow(None)

    def recorded_cells(self, name: str) -> int:
        recording = self.recordings.get(name)
        return sum(len(runs) for runs in recording.cells.values()) if recording else 0

    def should_replay(self, mode: str, name: str, cell_id: str | None, model: str,
                      provider_options: dict[str, dict[str, Any]] | None) -> bool:
        if mode == "off" or not cell_id:
            return False
        recording = self.recordings.get(name)
        if recording is None or cell_id not in recording.cells:
            return False
        return self.replays(mode, model, provider_options)

    def attach(self, agent: Any, name: str, cell_id: str, *, rerun_tools: bool,
               notice: Callable[[str], None]) -> ReplayAttachment:
        """Point ``agent`` at the recording of ``cell_id`` for one run; ``detach`` undoes it."""
        recording = self.recordings[name]
        run = self.runs[(name, cell_id)]
        self.runs[(name, cell_id)] += 1
        cell = recording.cell(cell_id, min(run, len(recording.cells[cell_id]) - 1))
        assert cell is not None
        config = agent.config
        live = provider_configured(config.model, config.provider_options)
        fallback = None
        fallback_summarizer = None
        if live:
            from ipyagent.agent.provider_summarizer import ProviderSummarizer
            from ipyagent.providers.registry import resolve_provider

            fallback = resolve_provider(config.model, config.provider_options)[0]
            fallback_summarizer = ProviderSummarizer(config.summary_model or config.model,
                                                     provider_options=config.provider_options)
        tools = ReplayToolResults(cell, rerun=rerun_tools, notice=notice)
        provider = agent.provider = ReplayProvider(cell, fallback=fallback, notice=notice)
        summarizer = agent._summarizer = ReplaySummarizer(cell, fallback=fallback_summarizer, notice=notice)
        agent.tool_results = tools
        describer = agent.describe_namespace = ReplayDescriber(cell, fallback=agent.describe_namespace)
        # while the session follows the recording, compactions happen where it has them
        agent.compaction_oracle = ReplayCompactions(cell, summarizer, describer, provider)
        agent.session.follow(self.paths.get(name), same_when_replayed)
        return ReplayAttachment(cell, tools, live)

    @staticmethod
    def detach(agent: Any) -> None:
        agent.provider = None
        agent._summarizer = None
        agent.tool_results = None
        agent.compaction_oracle = None
        if isinstance(agent.describe_namespace, ReplayDescriber):
            agent.describe_namespace = agent.describe_namespace.fallback
        agent.session.follow(None)
