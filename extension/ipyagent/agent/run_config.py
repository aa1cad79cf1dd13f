"""The agent's settings: plain data, saved with the session (never a secret)."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
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
    learned: str  # the day it was learned (ISO), named when a notebook brings it back


class SavedTokenFactor(TypedDict, total=False):
    """The token factor measured once for a session's model, saved with the session (agent/budget.py)."""

    model: str
    factor: float
    tokenizer: str


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
    token_factor: SavedTokenFactor


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
    # Where ``context_window`` came from when the user did not set it (restored with the session,
    # learned in this notebook): said by ``%agent status`` and the widget; never saved.
    window_note: str = ""
    # Real tokens per chars/4 token, as measured once for this session's model and saved with the
    # session (agent/budget.py's TOKEN_FACTOR): every count uses it, before and after a restart.
    # None: measured against the server's tokenizer now (1 where it has none).
    token_factor: float | None = None

    def saved_settings(self) -> SavedSettings:
        """What is stored with the session: everything but provider options (may hold keys); the
        token factor is saved with what it was measured for, apart (agent/budget.py)."""
        data: dict[str, Any] = asdict(self)
        for private in ("provider_options", "secrets", "system_prompt", "window_note", "token_factor"):
            data.pop(private, None)
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


# A session's saved settings come back for that session at load (a restart, a reopen), within
# bounds: those that shape its budget or narrow a run. What chooses what is paid for or widens
# access (the model, the summary model, tool approval, reasoning, output and retry limits) never
# comes back from a notebook: the user's settings win, and a difference is named.
WINDOW_FLOOR = 1_024  # no model worth running has a smaller window: a saved one below it is ignored
_BUDGETS = ("reserve_tokens", "keep_recent_tokens")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def restorable_settings(saved: Mapping[str, Any], *, mine: Mapping[str, Any], user_set: Collection[str],
                        table_window: int | None) -> dict[str, int]:
    """What of ``saved`` (a session's settings, :func:`upgrade_saved_settings`'d) comes back for the
    session: ``context_window`` (at least ``WINDOW_FLOOR``, at most ``table_window``, the model
    table's window, when it knows one), ``reserve_tokens`` and ``keep_recent_tokens`` (below that
    window), ``max_tool_rounds`` (only lower than ``mine``: it narrows a run). ``mine``: the
    user's values, by setting name; a name in ``user_set`` (set by the user) is never replaced."""
    out: dict[str, int] = {}
    window = _count(saved.get("context_window"))
    if window is not None and window >= WINDOW_FLOOR and (not table_window or window <= table_window):
        out["context_window"] = window
    compaction = saved.get("compaction")
    limit = out.get("context_window") or table_window
    for name in _BUDGETS:
        value = _count(compaction.get(name)) if isinstance(compaction, Mapping) else None
        if value is not None and (not limit or value < limit):
            out[name] = value
    rounds = _count(saved.get("max_tool_rounds"))
    cap = _count(mine.get("max_tool_rounds"))
    if rounds and (not cap or rounds < cap):
        out["max_tool_rounds"] = rounds
    return {name: value for name, value in out.items() if name not in user_set and mine.get(name) != value}


def _more(saved: Any, mine: Any) -> bool:
    """``saved`` is a larger limit than ``mine`` (None: no limit)."""
    saved, mine = _count(saved), _count(mine)
    return saved is not None and mine is not None and saved > mine


# the settings a notebook's value of which is named, not restored, when it would spend the user's
# money or widen access beyond the user's own
_HELD_BACK: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
    ("summary_model", lambda saved, mine: isinstance(saved, str) and bool(saved) and saved != mine),
    ("tool_approval", lambda saved, mine: saved == "auto" and mine != "auto"),
    ("reasoning", lambda saved, mine: isinstance(saved, str) and bool(saved) and saved != mine),
    ("max_output_tokens", lambda saved, mine: _count(saved) is not None and (mine is None or _more(saved, mine))),
    ("max_retries", _more),
    ("max_tool_rounds", _more),
)


def held_back_settings(saved: Mapping[str, Any], *, mine: Mapping[str, Any]) -> list[str]:
    """The settings of ``saved`` not restored because, against ``mine``, they would spend the
    user's money or widen access, as ``name value`` (the model: :func:`recorded_model`)."""
    return [f"{name} {saved[name]!r}" for name, widens in _HELD_BACK
            if name in saved and widens(saved[name], mine.get(name))]


def recorded_model(saved: Mapping[str, Any]) -> str:
    """The model a session was recorded with ("" when none): named, never adopted, where the
    user's settings differ; used by itself only where no provider is configured for it (a replay:
    nothing is spent)."""
    model = saved.get("model")
    return model if isinstance(model, str) and ":" in model else ""


def restored_note(name: str, restored: Mapping[str, Any], held_back: list[str]) -> str:
    """One line for the load: what came back for session ``name``, and what did not."""
    parts = []
    if restored:
        parts.append("restored from this notebook: " + ", ".join(
            f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in restored.items()))
    if held_back:
        parts.append("not restored (your settings win: it would spend money or widen access): "
                     + ", ".join(held_back))
    return f"ipyagent: session {name!r}: " + "; ".join(parts) if parts else ""
