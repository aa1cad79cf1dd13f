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
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ipyagent.agent.ports import RunPorts
from ipyagent.agent.provider_summarizer import summarizer_for
from ipyagent.agent.replayer import CellRecording, Recording, replay_ports, same_when_replayed
from ipyagent.agent.run_config import RunConfig
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.kernel.persistence import SessionSlot
from ipyagent.providers.registry import ProviderRegistry
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.core import Session


class FollowingRuntime(Protocol):
    """What :meth:`ReplayController.following` reads of the kernel's
    :class:`~ipyagent.kernel.runtime.AgentRuntime` (which imports this module)."""

    @property
    def config(self) -> AgentSettings: ...
    @property
    def slots(self) -> Mapping[str, SessionSlot]: ...
    def run_config(self) -> RunConfig: ...


@dataclass
class ReplayAttachment:
    cell: CellRecording
    ports: RunPorts  # the run's ports, answering from the recording
    live: bool  # a live provider takes over on divergence


class ReplayController:
    """The recordings of the kernel's sessions and whether a cell replays one; a live fallback
    reaches its provider through ``providers`` (the kernel's)."""

    def __init__(self, providers: ProviderRegistry) -> None:
        self.providers = providers
        self.recordings: dict[str, Recording] = {}
        self.paths: dict[str, list[Entry]] = {}  # the recorded path, followed while replaying
        self.runs: Counter[tuple[str, str]] = Counter()

    def capture(self, name: str, session: Session) -> Recording:
        """Take ``session``'s current path as the recording of session ``name``."""
        path = self.paths[name] = session.path()
        recording = self.recordings[name] = Recording.from_entries(path)
        self.runs = Counter({k: v for k, v in self.runs.items() if k[0] != name})
        return recording

    def replays(self, mode: str, model: str, provider_options: dict[str, dict[str, Any]] | None) -> bool:
        """Whether recorded cells replay now (``on``; ``auto`` without a configured provider)."""
        return mode == "on" or (mode == "auto" and not self.providers.configured(model, provider_options))

    @contextlib.contextmanager
    def following(self, runtime: FollowingRuntime) -> Iterator[None]:
        """Around a command that records entries (``%agent pin`` …): while recorded cells replay,
        every session follows its recorded path, so an entry the command records again is the
        recorded one, and the replayed cells after it still find their recording under the leaf."""
        config = runtime.run_config()
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

    @contextlib.contextmanager
    def attached(self, session: Session, name: str, cell_id: str, config: RunConfig, ports: RunPorts, *,
                 rerun_tools: bool, notice: Callable[[str], None]) -> Iterator[ReplayAttachment]:
        """The recording of ``cell_id`` for one run: ``ports`` answering from it, and ``session``
        following the recorded path while the block runs."""
        recording = self.recordings[name]
        run = self.runs[(name, cell_id)]
        self.runs[(name, cell_id)] += 1
        cell = recording.cell(cell_id, min(run, len(recording.cells[cell_id]) - 1))
        assert cell is not None
        live = self.providers.configured(config.model, config.provider_options)
        fallback = fallback_summarizer = None
        if live:
            fallback = self.providers.resolve(config.model, config.provider_options)[0]
            fallback_summarizer = summarizer_for(config, providers=self.providers)
        replayed = replay_ports(cell, ports, fallback=fallback, fallback_summarizer=fallback_summarizer,
                                rerun_tools=rerun_tools, notice=notice)
        session.follow(self.paths.get(name), same_when_replayed)
        try:
            yield ReplayAttachment(cell, replayed, live)
        finally:
            session.follow(None)
