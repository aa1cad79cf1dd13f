"""Loading entries from outside (a Pi JSONL file, notebook metadata): check, report, keep.

Nothing is dropped silently. Every problem is reported with the line or entry it concerns;
what can be kept is kept (an orphan becomes a root, as in Pi's tree), and what cannot is set
aside in the report together with its raw text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ipyagent.session.entries import Entry, shape_problem
from ipyagent.session.ids import new_entry_id

MAX_ENTRY_CHARS = 5_000_000  # an entry larger than this is set aside rather than loaded


@dataclass
class Problem:
    where: str  # "line 12", "entry 3 (id a1b2c3d4)"
    message: str
    kept: bool  # True: loaded (possibly repaired); False: set aside

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" + ("" if self.kept else " (set aside)")


@dataclass
class LoadReport:
    source: str = ""
    problems: list[Problem] = field(default_factory=list)
    set_aside: list[dict[str, Any]] = field(default_factory=list)  # {"where", "reason", "raw"}
    migrated_from: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str, *, kept: bool, raw: Any = None) -> None:
        self.problems.append(Problem(where, message, kept))
        if not kept:
            self.set_aside.append({"where": where, "reason": message, "raw": raw})

    def summary(self) -> str:
        if self.ok:
            return f"{self.source or 'session'}: loaded without problems"
        lines = [f"{self.source or 'session'}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  … and {len(self.problems) - 50} more")
        return "\n".join(lines)


def sanitize_entries(raw_entries: list[Any], report: LoadReport, where=lambda i: f"entry {i + 1}",
                     sizes: list[int] | None = None) -> list[Entry]:
    """Check shapes, ids, parents and cycles; return the entries that can be used, in order."""
    kept: list[Entry] = []
    ids: set[str] = set()
    positions: dict[str, int] = {}  # id -> index in raw_entries, so problems name the right line
    for i, entry in enumerate(raw_entries):
        label = where(i)
        if sizes is not None and sizes[i] > MAX_ENTRY_CHARS:
            report.add(label, f"entry is {sizes[i]:,} characters, over the {MAX_ENTRY_CHARS:,} limit",
                       kept=False, raw=entry)
            continue
        problem = shape_problem(entry)
        if problem:
            report.add(label, problem, kept=False, raw=entry)
            continue
        entry_id = entry.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            entry = dict(entry, id=new_entry_id(ids))
            report.add(label, f"entry has no id; gave it {entry['id']}", kept=True)
        elif entry_id in ids:
            report.add(f"{label} (id {entry_id})", "duplicate id; the first entry with this id is kept",
                       kept=False, raw=entry)
            continue
        ids.add(entry["id"])
        positions[entry["id"]] = i
        kept.append(entry)
    return _break_cycles_and_orphans(kept, report, where, positions)


def _break_cycles_and_orphans(entries: list[Entry], report: LoadReport, where,
                              position: dict[str, int]) -> list[Entry]:
    by_id = {e["id"]: e for e in entries}
    in_cycle: set[str] = set()
    state: dict[str, int] = {}  # 1 = being walked, 2 = known fine
    for entry in entries:
        chain: list[str] = []
        current: str | None = entry["id"]
        while current is not None and current in by_id and state.get(current) is None:
            state[current] = 1
            chain.append(current)
            current = by_id[current].get("parentId")
        if current is not None and state.get(current) == 1:  # walked back into this chain
            in_cycle.update(chain[chain.index(current):])
        for node in chain:
            state[node] = 2
    result: list[Entry] = []
    for entry in entries:
        label = f"{where(position[entry['id']])} (id {entry['id']})"
        if entry["id"] in in_cycle:
            report.add(label, "its parent chain loops back to itself (a cycle)", kept=False, raw=entry)
            continue
        parent = entry.get("parentId")
        if parent is not None and (parent not in by_id or parent in in_cycle):
            report.add(label, f"parent {parent!r} is missing; the entry is kept as a root", kept=True)
            entry = dict(entry, parentId=None)
        result.append(entry)
    return result
