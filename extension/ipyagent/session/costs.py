"""What a session has cost so far: Pi's ``usage.cost`` summed over every entry of the file.

Like Pi's footer, the total covers *all* entries (every branch, and everything before the latest
compaction: money spent stays spent). The summariser's share is the ``usage`` recorded on
compaction and branch-summary entries. A call whose model has no known price
(``usage.costUnknown``) adds nothing and is counted as unpriced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ipyagent.session.entries import Entry

_SUMMARY_TYPES = ("compaction", "branch_summary")


@dataclass
class CostTotals:
    total: float = 0.0  # US dollars: every priced reply and summary
    summaries: float = 0.0  # the summariser's share of ``total``
    priced: int = 0  # replies and summaries with a known cost
    unpriced: int = 0  # with token usage but no known price

    @property
    def known(self) -> bool:
        """Whether any cost is known at all (else there is nothing to show but "unknown")."""
        return self.priced > 0

    def add(self, entry: Entry) -> None:
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if not isinstance(message, dict) or message.get("role") != "assistant":
                return
            usage = message.get("usage")
            summary = False
        elif kind in _SUMMARY_TYPES:
            usage = entry.get("usage")
            summary = True
        else:
            return
        if not isinstance(usage, dict):
            return
        if usage.get("costUnknown") is True:
            self.unpriced += 1
            return
        cost = usage.get("cost")
        amount = cost.get("total") if isinstance(cost, dict) else None
        if not isinstance(amount, (int, float)) or isinstance(amount, bool):
            return
        if not amount and not any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")):
            return  # an aborted or failed call: no tokens, nothing spent
        self.priced += 1
        self.total += amount
        if summary:
            self.summaries += amount


def cost_totals(entries: Sequence[Entry]) -> CostTotals:
    totals = CostTotals()
    for entry in entries:
        totals.add(entry)
    return totals


class CostTally:
    """``cost_totals`` kept up to date over an append-only entry list: each call adds only the
    entries appended since the last one (the list being replaced is noticed and recounted)."""

    def __init__(self) -> None:
        self._totals = CostTotals()
        self._seen = 0
        self._last: Any = None

    def update(self, entries: Sequence[Entry]) -> CostTotals:
        if len(entries) < self._seen or (self._seen and entries[self._seen - 1] is not self._last):
            self._totals, self._seen = CostTotals(), 0
        for entry in entries[self._seen:]:
            self._totals.add(entry)
        self._seen = len(entries)
        self._last = entries[-1] if entries else None
        return CostTotals(**vars(self._totals))
