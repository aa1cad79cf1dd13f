"""Loading entries from outside (a Pi JSONL file, notebook metadata): check, report, keep.

Nothing is dropped silently. Every problem is reported with the line or entry it concerns;
what can be kept is kept, and what cannot is set aside in the report together with its raw
text. Where Pi has a rule, it is Pi's: of several entries with one id the last one is used, and
an entry whose parent is missing keeps its ``parentId`` and is a root of the tree (Pi's
``getBranch`` stops there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from ipyagent.session import deep_json
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


class SetAside(TypedDict, total=False):
    """What a load could not use, kept so nothing is lost (``metadata["ipyagent"]["set_aside"]``; a
    Pi file's lines are written back in their places on export, ``session/jsonl.py``)."""

    where: str
    reason: str
    raw: Any  # the data as it was (or its JSON text, when it nests too deeply)
    line: int  # a Pi file's line number
    raw_base64: str  # the bytes of a line that is not UTF-8
    after: str | None  # the id of the kept entry above the line (None: right after the header)
    before_header: bool
    session: str | None  # the notebook session it came from (None: the store's own)
    source: str  # the file it was imported from


@dataclass
class LoadReport:
    source: str = ""
    problems: list[Problem] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    migrated_from: float | None = None  # the file's version: a number, an integer as Pi writes it

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str, *, kept: bool, raw: Any = None, **extra: Any) -> None:
        """Record a problem; one that is not ``kept`` also goes to :attr:`set_aside` with ``raw``
        (and ``extra``, e.g. where a Pi line was, so that an export can write it back)."""
        self.problems.append(Problem(where, message, kept))
        if not kept:
            self.set_aside.append(cast(SetAside, {"where": where, "reason": message, "raw": raw, **extra}))

    def summary(self) -> str:
        if self.ok:
            return f"{self.source or 'session'}: loaded without problems"
        lines = [f"{self.source or 'session'}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  … and {len(self.problems) - 50} more")
        return "\n".join(lines)


_TOO_DEEP = f"entry nests more than {deep_json.MAX_NESTING} levels deep"


def _entry_problem(entry: Any, size: int, depth: int | None) -> str | None:
    if size > MAX_ENTRY_CHARS:
        return f"entry is {size:,} characters, over the {MAX_ENTRY_CHARS:,} limit"
    if (deep_json.nesting(entry) if depth is None else depth) > deep_json.MAX_NESTING:
        return _TOO_DEEP
    return shape_problem(entry)


def sanitize_entries(raw_entries: list[Any], report: LoadReport,
                     where: Callable[[int], str] = lambda i: f"entry {i + 1}",
                     sizes: list[int] | None = None,
                     depths: list[int] | None = None,
                     aside: Callable[[int], SetAside] | None = None) -> list[Entry]:
    """Check sizes, nesting, shapes, ids, parents and cycles; return the usable entries, in order.

    ``aside(i)`` gives the fields of the set-aside record of ``raw_entries[i]`` (``{"raw": ...}``
    and anything more; default: the entry itself as ``raw``, or as JSON text when it nests too
    deeply to be handled as data).
    """
    def set_aside(i: int, label: str, message: str, entry: Any) -> None:
        fields: SetAside = aside(i) if aside is not None else {"raw": entry}
        report.add(label, message, kept=False, **fields)  # type: ignore[misc]  # fields has no "where"

    problems: list[str | None] = [_entry_problem(entry, sizes[i] if sizes is not None else 0,
                                                 depths[i] if depths is not None else None)
                                  for i, entry in enumerate(raw_entries)]
    # Pi indexes entries by id as it reads them, so of several entries with one id the last one counts.
    last: dict[str, int] = {}
    for i, entry in enumerate(raw_entries):
        if problems[i] is None and isinstance(entry.get("id"), str) and entry["id"]:
            last[entry["id"]] = i
    # a new id must not match a kept id, nor a missing parent (that would adopt its children)
    ids: set[str] = set(last) | {e["parentId"] for i, e in enumerate(raw_entries)
                                 if problems[i] is None and isinstance(e.get("parentId"), str)}
    kept: list[Entry] = []
    positions: dict[str, int] = {}  # id -> index in raw_entries, so problems name the right line
    for i, entry in enumerate(raw_entries):
        label = where(i)
        problem = problems[i]
        if problem == _TOO_DEEP and aside is None:
            # as JSON text: Python's recursive code (copy, ==, json) cannot take it as data
            report.add(label, problem + "; kept as JSON text", kept=False, raw=deep_json.dumps(entry))
            continue
        if problem is not None:
            set_aside(i, label, problem, entry)
            continue
        entry_id = entry.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            entry = dict(entry, id=new_entry_id(ids))
            ids.add(entry["id"])
            report.add(label, f"entry has no id; gave it {entry['id']}", kept=True)
        elif last[entry_id] != i:
            set_aside(i, f"{label} (id {entry_id})",
                      f"duplicate id; the last entry with this id ({where(last[entry_id])}) is used, as Pi does",
                      entry)
            continue
        positions[entry["id"]] = i
        kept.append(entry)
    return _break_cycles(kept, report, where, positions, set_aside)


def _break_cycles(entries: list[Entry], report: LoadReport, where: Callable[[int], str], position: dict[str, int],
                  set_aside: Callable[[int, str, str, Any], None]) -> list[Entry]:
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
    def label(entry: Entry) -> str:
        return f"{where(position[entry['id']])} (id {entry['id']})"

    result: list[Entry] = []
    for entry in entries:
        if entry["id"] in in_cycle:
            set_aside(position[entry["id"]], label(entry), "its parent chain loops back to itself (a cycle)", entry)
            continue
        parent = entry.get("parentId")
        if parent is not None and (parent not in by_id or parent in in_cycle):
            report.add(label(entry), f"parent {parent!r} is missing; the entry is kept as a root (its parentId "
                                     "is kept as it is, as Pi does)", kept=True)
        result.append(entry)
    return result
