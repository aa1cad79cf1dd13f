"""Compaction settings (Pi's defaults) and the trigger."""

from __future__ import annotations

from dataclasses import asdict, dataclass
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


def compaction_threshold(context_window: int, settings: CompactionSettings) -> int:
    return context_window - settings.reserve_tokens


def should_compact(context_tokens: int, context_window: int | None, settings: CompactionSettings) -> bool:
    """Pi's trigger, strict ``>``; never when the window is unknown (Pi compacts always there)."""
    if not settings.enabled or not context_window or context_window <= 0:
        return False
    return context_tokens > compaction_threshold(context_window, settings)
