"""What the agent loop asks before it compacts, when something else than the live budget knows
where compactions belong (a replay following its recording, ``agent/replayer.py``).

Before every automatic compaction decision the loop asks its oracle, if it has one:

* ``None`` — no opinion: the budget decides, as without an oracle;
* ``CompactionRuling(compact=False)`` — no compaction here, whatever the budget says (no summary
  call, no failure counted, nothing shown);
* ``CompactionRuling(compact=True, first_kept_entry_id=…)`` — compact here, even if the budget
  does not ask, keeping the tail from that entry (None: cut as the settings say).

A manual compaction (``%compact``) always runs; the oracle can only fix its cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ipyagent.core import Session


@dataclass(frozen=True)
class CompactionRuling:
    compact: bool
    first_kept_entry_id: str | None = None  # where the verbatim tail starts (None: the planner decides)
    # what made the recorded compaction (session/entries.py's TRIGGERS), kept as it was
    trigger: str | None = field(default=None, compare=False)


SKIP = CompactionRuling(False)


class CompactionOracle(Protocol):
    def rule(self, session: Session, *, manual: bool) -> CompactionRuling | None:
        """The ruling for compacting ``session`` at its leaf now (``manual``: the user asked)."""
        ...
