"""Compaction settings, the budgets they come to for a window, and the trigger.

Pi's budgets (a 16,384-token reserve, 20,000 kept tokens) suit windows of 64k tokens and more.
Where the user set neither, :func:`fit_budget` derives them from the window: Pi's values from
65,536 tokens up, and below that both in proportion to the window (reserve = window / 4, kept
tail ≈ 30.5 % of it), so that a compaction always leaves room under the threshold. What the user
sets is kept, unless reserve + kept tail would not fit the window: then the values too large are
replaced by the scaled ones, and :attr:`Budget.problem` says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, TypedDict, cast

PI_RESERVE_TOKENS = 16384
PI_KEEP_RECENT_TOKENS = 20000
FULL_BUDGET_WINDOW = 65536  # from this window up Pi's values are kept; below it both scale with the window
# With the window unknown the budget is Pi's defaults, those of every window from FULL_BUDGET_WINDOW
# up: %compact uses them, and %agent explore draws them on a window of this size.
ASSUMED_WINDOW = 128_000


def unknown_window_note(reserve: int, keep: int) -> str:
    """What the budget is while the context window is unknown, and how to set it: one sentence for
    %compact, the budget's users and %agent explore."""
    return (f"the context window is unknown, so the kept recent part is {keep:,} tokens and the reserve "
            f"{reserve:,} (Pi's defaults; %agent explore draws them on an assumed {ASSUMED_WINDOW:,}-token "
            "window). Set the window (%config Agent.context_window = N) to have both derived from it, or the "
            "kept part itself (%config Agent.keep_recent_tokens = N)")


class SavedCompaction(TypedDict, total=False):
    """:class:`CompactionSettings` as saved with a session (``to_dict``)."""

    reserve_tokens: int | None
    keep_recent_tokens: int | None
    enabled: bool


@dataclass
class CompactionSettings:
    """What the user set: ``None`` for a budget means "derived from the window" (:func:`fit_budget`)."""

    reserve_tokens: int | None = None
    keep_recent_tokens: int | None = None
    enabled: bool = True

    def to_dict(self) -> SavedCompaction:
        return cast(SavedCompaction, asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionSettings:
        names = {"reserve_tokens", "keep_recent_tokens", "enabled"}
        aliases = {"reserveTokens": "reserve_tokens", "keepRecentTokens": "keep_recent_tokens"}
        return cls(**{aliases.get(k, k): v for k, v in data.items() if aliases.get(k, k) in names})

    def to_pi(self, context_window: int | None = None) -> dict[str, Any]:
        """Pi's ``compaction`` settings object, with both budgets fitted to the window."""
        budget = fit_budget(self, context_window)
        return {"enabled": self.enabled, "reserveTokens": budget.reserve_tokens,
                "keepRecentTokens": budget.keep_recent_tokens}

    def fitted(self, context_window: int | None) -> CompactionSettings:
        """These settings with both budgets as :func:`fit_budget` gives them for the window."""
        budget = fit_budget(self, context_window)
        return replace(self, reserve_tokens=budget.reserve_tokens, keep_recent_tokens=budget.keep_recent_tokens)

    @property
    def keep_recent(self) -> int:
        """The kept-tail budget when no window is known (a fitted copy holds the window's)."""
        return self.keep_recent_tokens if self.keep_recent_tokens is not None else PI_KEEP_RECENT_TOKENS


def scaled_budget(context_window: int) -> tuple[int, int]:
    """(reserve, kept tail) for a window when the user set neither: Pi's from 65,536 tokens up,
    both in proportion to the window below that."""
    if context_window >= FULL_BUDGET_WINDOW:
        return PI_RESERVE_TOKENS, PI_KEEP_RECENT_TOKENS
    return (max(1, PI_RESERVE_TOKENS * context_window // FULL_BUDGET_WINDOW),
            max(1, PI_KEEP_RECENT_TOKENS * context_window // FULL_BUDGET_WINDOW))


@dataclass(frozen=True)
class Budget:
    """The reserve and the kept tail that compaction uses for one window, and where each came from:
    "set" (by the user), "scaled" (derived from a small window), "default" (Pi's: a large or
    unknown window), "replaced" (set, but reserve + kept did not fit the window: the scaled value)."""

    window: int | None
    reserve_tokens: int
    keep_recent_tokens: int
    reserve_from: str = "default"
    keep_from: str = "default"
    problem: str = ""  # why set values were replaced ("" when nothing was)

    @property
    def threshold(self) -> int | None:
        """Compaction starts above this (None: the window is unknown); never negative."""
        return max(0, self.window - self.reserve_tokens) if self.window else None

    def settings(self, enabled: bool = True) -> CompactionSettings:
        return CompactionSettings(self.reserve_tokens, self.keep_recent_tokens, enabled)

    def _why(self, source: str) -> str:
        if source == "scaled":
            return f" (scaled to the {self.window:,}-token window)"
        if source == "replaced":
            return f" (the value set does not fit the {self.window:,}-token window: scaled to it)"
        return ""

    def reserve_text(self) -> str:
        """"reserve 512 (scaled to the 2,048-token window)"."""
        return f"reserve {self.reserve_tokens:,}{self._why(self.reserve_from)}"

    def keep_text(self) -> str:
        """"keep-recent 625 (scaled to …)"; "(scaled too)" when the reserve was scaled the same way."""
        why = self._why(self.keep_from)
        if why and self.keep_from == self.reserve_from:
            why = " (scaled too)" if self.keep_from == "scaled" else " (replaced too)"
        return f"keep-recent {self.keep_recent_tokens:,}{why}"

    def describe(self) -> str:
        return f"{self.reserve_text()} · {self.keep_text()}"


def fit_budget(settings: CompactionSettings, context_window: int | None) -> Budget:
    """The budgets compaction uses with ``settings`` and this window (see the module docstring).
    Every place that shows or uses a reserve or a kept tail takes it from here."""
    window = context_window if context_window and context_window > 0 else None
    reserve, keep = settings.reserve_tokens, settings.keep_recent_tokens
    if window is None:
        return Budget(None, PI_RESERVE_TOKENS if reserve is None else reserve,
                      PI_KEEP_RECENT_TOKENS if keep is None else keep,
                      "default" if reserve is None else "set", "default" if keep is None else "set")
    scaled_reserve, scaled_keep = scaled_budget(window)
    derived = "scaled" if window < FULL_BUDGET_WINDOW else "default"
    r, r_from = (scaled_reserve, derived) if reserve is None else (reserve, "set")
    k, k_from = (scaled_keep, derived) if keep is None else (keep, "set")
    if r + k < window:
        return Budget(window, r, k, r_from, k_from)
    said = [f"Agent.reserve_tokens = {reserve:,}" if reserve is not None else f"the reserve ({r:,})",
            f"Agent.keep_recent_tokens = {keep:,}" if keep is not None else f"the kept tail ({k:,})"]
    if r > scaled_reserve:
        r, r_from = scaled_reserve, "replaced"
    if k > scaled_keep:
        k, k_from = scaled_keep, "replaced"
    problem = (f"{said[0]} and {said[1]} cannot work with a {window:,}-token window (together they take "
               f"{(reserve if reserve is not None else r) + (keep if keep is not None else k):,} tokens): "
               f"compaction uses reserve {r:,} and keep-recent {k:,} instead (scaled to the window). Set smaller "
               "values, or unset them (%config Agent.reserve_tokens = None) to have them derived from the window.")
    return Budget(window, r, k, r_from, k_from, problem)


OVERRIDE_FIELDS = {"reserveTokens": "reserve_tokens", "keepRecentTokens": "keep_recent_tokens"}


def checked_model_overrides(value: Any) -> dict[str, dict[str, int]]:
    """Pi 1.6's ``compaction.modelOverrides``, checked: ``{"provider/model": {"reserveTokens"?: N,
    "keepRecentTokens"?: N}}`` with non-negative integers (a bad value is an error, as in Pi)."""
    if not isinstance(value, dict):
        raise ValueError("model overrides must map 'provider/model' to {'reserveTokens': N, 'keepRecentTokens': N}")
    out: dict[str, dict[str, int]] = {}
    for key, fields in value.items():
        if not isinstance(key, str) or not isinstance(fields, dict):
            raise ValueError(f"model override {key!r}: needs an object such as {{'reserveTokens': 4096}}")
        for name, number in fields.items():
            if name not in OVERRIDE_FIELDS:
                raise ValueError(f"model override {key!r}: unknown field {name!r} (reserveTokens, keepRecentTokens)")
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise ValueError(f"model override {key!r}: {name} must be a non-negative integer, got {number!r}")
        out[key] = dict(fields)
    return out


def for_model(settings: CompactionSettings, overrides: dict[str, dict[str, int]], provider: str,
              model: str) -> CompactionSettings:
    """The settings for one model (Pi 1.6's ``getCompactionSettings(model)``): the override keyed
    ``provider/model`` exactly, each field falling back on its own to ``settings``; ``enabled``
    stays global."""
    override = overrides.get(f"{provider}/{model}") or {}
    reserve = override.get("reserveTokens", settings.reserve_tokens)
    keep = override.get("keepRecentTokens", settings.keep_recent_tokens)
    return replace(settings, reserve_tokens=reserve, keep_recent_tokens=keep) if override else settings


def compaction_threshold(context_window: int, settings: CompactionSettings) -> int:
    threshold = fit_budget(settings, context_window).threshold
    return 0 if threshold is None else threshold


def should_compact(context_tokens: int, context_window: int | None, settings: CompactionSettings) -> bool:
    """Pi's trigger, strict ``>``; never when the window is unknown (Pi compacts always there)."""
    if not settings.enabled or not context_window or context_window <= 0:
        return False
    return context_tokens > compaction_threshold(context_window, settings)
