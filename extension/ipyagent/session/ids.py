"""Entry ids and timestamps in Pi's formats."""

from __future__ import annotations

import uuid
from collections.abc import Container
from datetime import datetime, timezone


def new_entry_id(existing: Container[str]) -> str:
    """8 hex characters (the head of a random UUID), unique among ``existing``.

    Like Pi: up to 100 tries, then a full UUID.
    """
    for _ in range(100):
        candidate = uuid.uuid4().hex[:8]
        if candidate not in existing:
            return candidate
    return str(uuid.uuid4())


def new_session_id() -> str:
    return str(uuid.uuid4())


def iso_now() -> str:
    """ISO 8601 in UTC with milliseconds and a Z, as JavaScript's toISOString writes it."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


def iso_to_ms(value: str | int | float | None) -> int:
    """Milliseconds since the epoch for an ISO string (or a number already in ms)."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    try:
        text = value[:-1] + "+00:00" if value.endswith("Z") else value
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        return 0
