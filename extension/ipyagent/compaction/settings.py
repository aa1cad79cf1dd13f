"""Compaction settings (Pi's defaults) and the trigger."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass
class CompactionSettings:
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionSettings:
        names = {"reserve_tokens", "keep_recent_tokens", "enabled"}
        aliases = {"reserveTokens": "reserve_tokens", "keepRecentTokens": "keep_recent_tokens"}
        return cls(**{aliases.get(k, k): v for k, v in data.items() if aliases.get(k, k) in names})

    def to_pi(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "reserveTokens": self.reserve_tokens,
                "keepRecentTokens": self.keep_recent_tokens}


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
    return context_window - settings.reserve_tokens


def should_compact(context_tokens: int, context_window: int | None, settings: CompactionSettings) -> bool:
    """Pi's trigger, strict ``>``; never when the window is unknown (Pi compacts always there)."""
    if not settings.enabled or not context_window or context_window <= 0:
        return False
    return context_tokens > compaction_threshold(context_window, settings)
