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

A recorded run is found by the cell's id where the runner sends one and the recording knows it
(JupyterLab, ``ipyagent run``, ``papermill --engine ipyagent``); else by what was typed and where
it stands (:meth:`ReplayController.find_turn`): the prompt as written, at the cell's position
among the ``%%agent`` cells this kernel ran, or right after the leaf on the recorded path. So
nbclient, plain papermill and ``nbconvert --execute`` (no cell ids), nbstripout's renumbered ids
and jupytext's new ones replay too.
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
from ipyagent.session.messages import prompt_text
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
class TurnMatch:
    """A recorded run found by what was typed (:meth:`ReplayController.find_turn`)."""

    entry_id: str  # the recorded entry that began it (the prompt, or a %compact cell's compaction)
    cell: CellRecording | None  # its recording (None: a run made in this kernel, not recorded)
    fork: bool  # the cell re-runs a prompt on the current path: branch to ``fork_to`` first
    fork_to: str | None = None


def _is_prompt(entry: Entry | None) -> bool:
    message = entry.get("message") if entry is not None and entry.get("type") == "message" else None
    return isinstance(message, dict) and message.get("role") == "user"


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
        self.after: dict[str, dict[str | None, Entry]] = {}  # on the recorded path: parent id -> entry
        self.runs: Counter[tuple[str, str]] = Counter()
        self.agent_cells: Counter[str] = Counter()  # %%agent cells this kernel ran, per session

    def capture(self, name: str, session: Session) -> Recording:
        """Take ``session``'s current path as the recording of session ``name``."""
        path = self.paths[name] = session.path()
        self.after[name] = {e.get("parentId"): e for e in path}
        recording = self.recordings[name] = Recording.from_entries(path)
        self.runs = Counter({k: v for k, v in self.runs.items() if k[0] != name})
        return recording

    def find_turn(self, name: str, session: Session, prompt: str) -> TurnMatch | None:
        """The recorded run a ``%%agent`` cell with ``prompt`` re-runs, found by what was typed: the
        prompt at the cell's position among the agent cells this kernel ran (counted by
        :meth:`agent_cell_ran`) on the current path — the cell re-runs it, so the session forks
        before it — else the recorded path's prompt right after the leaf (the previous cell
        replayed up to it). None: neither says this prompt."""
        typed = prompt.strip()
        position = self.agent_cells[name]
        prompts = [e for e in session.path() if _is_prompt(e)]
        recording = self.recordings.get(name)
        if position < len(prompts) and prompt_text(prompts[position]["message"]).strip() == typed:
            entry = prompts[position]
            return TurnMatch(entry["id"], recording.turns.get(entry["id"]) if recording else None, True,
                             session.parent_id(entry))
        following = self.after.get(name, {}).get(session.leaf_id)
        if recording is not None and following is not None and _is_prompt(following) \
                and prompt_text(following["message"]).strip() == typed:
            return TurnMatch(following["id"], recording.turns.get(following["id"]), False)
        return None

    def next_compaction(self, name: str, session: Session) -> TurnMatch | None:
        """The recorded ``%compact`` cell's run right after the leaf on the recorded path (a
        ``%compact`` cell replayed without its cell id)."""
        following = self.after.get(name, {}).get(session.leaf_id)
        recording = self.recordings.get(name)
        if recording is None or following is None or following.get("type") != "compaction" \
                or not following.get("cellId"):
            return None
        return TurnMatch(following["id"], recording.turns.get(following["id"]), False)

    def agent_cell_ran(self, name: str) -> None:
        self.agent_cells[name] += 1

    def recorded_run(self, name: str, cell_id: str | None, turn: TurnMatch | None) -> CellRecording | None:
        """The recording a cell replays: by its id where the recording knows it (a cell re-run
        takes its next recorded run), else the run ``turn`` found by what was typed."""
        recording = self.recordings.get(name)
        if recording is None:
            return None
        if cell_id and cell_id in recording.cells:
            runs = recording.cells[cell_id]
            run = self.runs[(name, cell_id)]
            self.runs[(name, cell_id)] += 1
            return runs[min(run, len(runs) - 1)]
        return turn.cell if turn is not None else None

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
        """The recorded runs of session ``name`` (each prompt, each ``%compact`` cell)."""
        recording = self.recordings.get(name)
        return len(recording.turns) if recording else 0

    @contextlib.contextmanager
    def attached(self, session: Session, name: str, cell: CellRecording, config: RunConfig, ports: RunPorts, *,
                 rerun_tools: bool, notice: Callable[[str], None]) -> Iterator[ReplayAttachment]:
        """The recording ``cell`` for one run: ``ports`` answering from it, and ``session``
        following the recorded path while the block runs."""
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
