"""The agent's settings: plain data, saved with the session (never a secret)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, cast

from ipyagent.compaction.settings import CompactionSettings, SavedCompaction

DEFAULT_MODEL_ENV = "IPYAGENT_MODEL"

SYSTEM_PROMPT = """You are a coding agent working inside a live Jupyter kernel, next to the user's notebook.

You can run Python in the user's namespace with the `python` tool (variables you create stay there), read and edit files, and run shell commands. Look at the data and the files before you change them; prefer small, verifiable steps; report what you did and what you found, concisely. When the user's variables matter, inspect them with `python` rather than guessing."""


class LearnedWindow(TypedDict, total=False):
    """A context window an overflow error revealed, saved with the session (agent/budget.py)."""

    model: str
    window: int
    source: str
    detail: str


class SavedSettings(TypedDict, total=False):
    """What is stored with a session (:meth:`RunConfig.saved_settings`), and read back from a notebook
    (unchecked there: every reader checks the values it uses). Keys a newer ipyagent saved survive."""

    model: str
    summary_model: str | None
    context_window: int | None
    compaction: SavedCompaction
    tool_approval: str
    max_output_tokens: int | None
    max_retries: int
    retry_base_delay: float
    retry_max_delay: float
    max_tool_rounds: int | None
    reasoning: str | None
    notebook_context: bool
    notebook_context_tokens: int
    auto_mask_turns: int | None
    model_overrides: dict[str, dict[str, int]]
    learned_window: LearnedWindow


@dataclass
class RunConfig:
    model: str = field(default_factory=lambda: os.environ.get(DEFAULT_MODEL_ENV, ""))
    summary_model: str | None = None  # default: the session model
    context_window: int | None = None  # default: the model table (or what an overflow revealed)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)  # .enabled: compact automatically
    tool_approval: str = "ask"  # "ask" or "auto"
    system_prompt: str = SYSTEM_PROMPT
    max_output_tokens: int | None = None
    max_retries: int = 3
    retry_base_delay: float = 2.0
    retry_max_delay: float = 60.0
    max_tool_rounds: int | None = None  # None: until the model stops
    reasoning: str | None = None
    notebook_context: bool = True  # the notebook-activity block before each prompt (with a NotebookContext)
    notebook_context_tokens: int = 2000  # its cap
    # Before an automatic compaction, mask the tool results older than this many turns (context
    # edits, no model call) and compact only if that is not enough. None: off, as in Pi.
    auto_mask_turns: int | None = None
    # Per-model budgets, Pi 1.6's compaction.modelOverrides: {"provider/model": {"reserveTokens": …,
    # "keepRecentTokens": …}}; each field falls back on its own to ``compaction``.
    model_overrides: dict[str, dict[str, int]] = field(default_factory=dict)
    # Per-provider overrides such as {"openai": {"base_url": …}}; keys here are never saved (nor shown).
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    # Other configured secrets, scrubbed like keys from what is stored (the values of MCP servers'
    # env and headers); never saved.
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def saved_settings(self) -> SavedSettings:
        """What is stored with the session: everything but provider options (may hold keys)."""
        data: dict[str, Any] = asdict(self)
        data.pop("provider_options", None)
        data.pop("secrets", None)
        data.pop("system_prompt", None)
        data["compaction"] = self.compaction.to_dict()
        return cast(SavedSettings, data)


def upgrade_saved_settings(settings: Mapping[str, Any]) -> SavedSettings:
    """A copy of settings saved with a session, in today's shape.

    Sessions saved before automatic compaction became ``compaction.enabled`` alone (Pi's field)
    hold it twice, ``auto_compact`` beside ``compaction.enabled``: the old key goes, its value
    moving into ``compaction`` when that lacks ``enabled``.
    """
    data = dict(settings)
    if "auto_compact" in data:
        enabled = data.pop("auto_compact")
        compaction = data.get("compaction")
        if compaction is None:
            data["compaction"] = {"enabled": enabled}
        elif isinstance(compaction, dict) and "enabled" not in compaction:
            data["compaction"] = dict(compaction, enabled=enabled)
    return cast(SavedSettings, data)
