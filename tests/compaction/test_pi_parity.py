"""Differential test: ipyagent's compaction plan against Pi's own ``prepareCompaction``.

The oracle is Pi's npm package, pinned in ``tests/oracle/package.json`` and run by
``tests/oracle/pi_prepare.mjs`` (one node process for a whole batch of session files). Sessions
come from ``support.sessiongen``. For every session three plans are compared:

* **pi** — the oracle's answer (Pi 0.73.1 itself);
* **model** — ``model_prepare`` below, an independent re-statement of Pi 0.73.1's rules written for
  this test. With every fix switched off it must reproduce the oracle exactly, which proves the
  model; with ipyagent's deliberate fixes switched on it says exactly what ipyagent must answer;
* **ipyagent** — ``Session.prepare_compaction`` (what ``ipyagent compact --dry-run --json``
  prints; a sample also goes through the real CLI).

Each difference between pi and ipyagent must be explained by one of the fixes listed in
``DELIBERATE`` (see ``docs/pi-differences.md``); the test counts how many sessions hit each.
Differences that no deliberate fix explains are core bugs; each one known is listed in
``KNOWN_CORE_DEVIATIONS`` and has a minimal case below marked ``xfail(strict=True)``, so that it
turns into a failure once the core changes; any other difference fails the test.

The test is not skipped: without ``tests/oracle/node_modules`` it runs ``npm ci`` itself.
``IPYAGENT_PARITY_REPORT=FILE`` writes the counts; ``IPYAGENT_PARITY_EXTRA=N`` (and
``IPYAGENT_PARITY_SEED``) add N more generated sessions for a longer hunt.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from support.pi_oracle import run_oracle
from support.sessiongen import generate_session, to_jsonl, write_jsonl


def ipyagent_plan(path: Path, reserve: int, keep: int) -> dict[str, Any]:
    """``ipyagent compact --dry-run --json``'s object, in process; a crash gives {"error": ...}."""
    try:
        session = Session.from_file(path, estimator="chars4")
        plan = session.prepare_compaction(CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep))
    except Exception as exc:  # noqa: BLE001 - a crash is a result to compare
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"nothing_to_compact": True} if plan is None else plan.to_summary_dict()


def ipyagent_cli(path: Path, reserve: int, keep: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "ipyagent.cli", "compact", str(path), "--dry-run", "--json",
                           "--estimator", "chars4", "--reserve-tokens", str(reserve),
                           "--keep-recent-tokens", str(keep)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


# ------------------------------------------------------------------------------------------------
# An independent model of Pi 0.73.1's prepareCompaction, with ipyagent's fixes as switches
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fixes:
    # Deliberate (DESIGN.md "Compaction: Pi's behaviour, with its known defects fixed")
    count_all_context_entries: bool = False  # cut walk sums custom_message and branch_summary too
    split_on_landing: bool = False           # split decided where the cut landed, not on a settings entry
    nothing_when_empty: bool = False         # nothing to summarise -> no compaction
    skip_zero_usage: bool = False            # all-zero usage is not a usage (DESIGN: "last valid assistant usage")
    skip_usage_before_compaction: bool = False  # DESIGN: Pi's guard "usage older than the latest compaction"
    cut_before_over_budget_tail: bool = False  # budget crossed past the last cut point -> cut before it
    # Core behaviours not backed by DESIGN.md; see KNOWN_CORE_DEVIATIONS
    count_user_images: bool = False
    skip_empty_branch_summary: bool = False
    code_point_sort: bool = False
    split_with_turn_start_in_kept_tail: bool = False


PI = Fixes()
DELIBERATE = {
    "count_all_context_entries": "the cut-point token walk counts custom_message and branch_summary entries "
                                 "(pi.md Appendix B #6; Pi 0.73.1 still counts only `message` entries)",
    "split_on_landing": "no spurious split: the split is decided on the entry the cut landed on, and a cut "
                        "at a turn start splits nothing (pi.md §2.5, Appendix B #6)",
    "nothing_when_empty": "nothing to summarise -> no compaction (pi.md §2.5, Appendix B #2)",
    "skip_zero_usage": "an assistant message with all-zero usage (a truncated or failed response) is not "
                       "taken as the last usage (DESIGN.md: context tokens come from the last *valid* "
                       "assistant usage; pi.md Appendix A; Pi 0.73.1 still takes it)",
    "skip_usage_before_compaction": "usage recorded before the latest compaction is ignored, since it describes "
                                    "the old, larger context (DESIGN.md names this guard; pi.md §1.3, #1860; "
                                    "Pi 0.73.1's prepareCompaction still uses it)",
    "cut_before_over_budget_tail": "when the newest tool results alone exceed keepRecentTokens, the cut goes to "
                                   "the call that produced them instead of keeping everything (Pi summarises "
                                   "nothing there, exactly when a tool loop needs room; DESIGN.md's budget "
                                   "check before every provider call depends on it)",
}
IPYAGENT = Fixes(count_all_context_entries=True, split_on_landing=True, nothing_when_empty=True,
                 skip_zero_usage=True, skip_usage_before_compaction=True, cut_before_over_budget_tail=True)

# Differences the core shows that no DESIGN.md fix asks for. Each has a strict-xfail minimal case
# below and is reported to the lead; the differential test tolerates them only where switching the
# deviation on in the model explains the whole difference.
KNOWN_CORE_DEVIATIONS: dict[str, str] = {}
# Found by this test and since fixed in the core (their switches stay in the model, off):
# count_user_images, skip_empty_branch_summary, code_point_sort, split_with_turn_start_in_kept_tail,
# and a crash on lone surrogates (a difference explain() would now report as unexplained).


def js_len(text: str) -> int:
    """String.prototype.length: UTF-16 code units (a lone surrogate, which Pi can write, counts 1)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_sorted(items: set[str], fx: Fixes) -> list[str]:
    """Array.prototype.sort(): UTF-16 code unit order (unless the code-point deviation is on)."""
    if fx.code_point_sort:
        return sorted(items)
    return sorted(items, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


def _js_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)  # JavaScript has one number type: 60.0 is written "60"
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def js_stringify(value: Any) -> str:
    """JSON.stringify for the JSON data the generator makes (integral floats, no exotic numbers)."""
    return json.dumps(_js_numbers(value), separators=(",", ":"), ensure_ascii=False)


def estimate(message: dict[str, Any], fx: Fixes) -> int:
    """Pi's estimateTokens: ceil(chars / 4), chars counted per role (UTF-16 code units)."""
    role = message.get("role")
    chars = 0
    content = message.get("content")
    if role == "user":
        if isinstance(content, str):
            chars = js_len(content)
        else:
            for b in content or []:
                if b.get("type") == "text" and b.get("text"):
                    chars += js_len(b["text"])
                elif b.get("type") == "image" and fx.count_user_images:
                    chars += 4800
    elif role == "assistant":
        for b in content:
            if b["type"] == "text":
                chars += js_len(b["text"])
            elif b["type"] == "thinking":
                chars += js_len(b["thinking"])
            elif b["type"] == "toolCall":
                chars += js_len(b["name"]) + js_len(js_stringify(b["arguments"]))
    elif role in ("custom", "toolResult"):
        if isinstance(content, str):
            chars = js_len(content)
        else:
            for b in content:
                if b.get("type") == "text" and b.get("text"):
                    chars += js_len(b["text"])
                if b.get("type") == "image":
                    chars += 4800
    elif role == "bashExecution":
        chars = js_len(message["command"]) + js_len(message["output"])
    elif role in ("branchSummary", "compactionSummary"):
        chars = js_len(message["summary"])
    return math.ceil(chars / 4)


def entry_message(entry: dict[str, Any], fx: Fixes, *, for_compaction: bool) -> dict[str, Any] | None:
    """The message an entry gives (Pi's getMessageFromEntry / buildSessionContext's appendMessage)."""
    kind = entry["type"]
    if kind == "message":
        return entry["message"]
    if kind == "custom_message":
        return {"role": "custom", "content": entry["content"]}
    if kind == "branch_summary":
        if not entry.get("summary") and (not for_compaction or fx.skip_empty_branch_summary):
            return None
        return {"role": "branchSummary", "summary": entry.get("summary", "")}
    return None


def usage_tokens(usage: dict[str, Any]) -> int:
    return usage.get("totalTokens") or (usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"])


def tokens_before(path: list[dict[str, Any]], fx: Fixes) -> int:
    """estimateContextTokens(buildSessionContext(path).messages)."""
    ci = max((i for i, e in enumerate(path) if e["type"] == "compaction"), default=-1)
    msgs: list[tuple[dict[str, Any], bool]] = []  # (message, recorded before the latest compaction)
    if ci >= 0:
        comp = path[ci]
        msgs.append(({"role": "compactionSummary", "summary": comp["summary"]}, True))
        found = False
        for e in path[:ci]:
            found = found or e["id"] == comp["firstKeptEntryId"]
            m = entry_message(e, fx, for_compaction=False) if found else None
            if m is not None:
                msgs.append((m, True))
        for e in path[ci + 1:]:
            m = entry_message(e, fx, for_compaction=False)
            if m is not None:
                msgs.append((m, False))
    else:
        for e in path:
            m = entry_message(e, fx, for_compaction=False)
            if m is not None:
                msgs.append((m, False))
    trailing = 0
    for m, before in reversed(msgs):
        if (m.get("role") == "assistant" and m.get("stopReason") not in ("aborted", "error") and m.get("usage")
                and not (fx.skip_zero_usage and usage_tokens(m["usage"]) == 0)
                and not (fx.skip_usage_before_compaction and before)):
            return usage_tokens(m["usage"]) + trailing
        trailing += estimate(m, fx)
    return trailing


def is_cut_point(e: dict[str, Any]) -> bool:
    if e["type"] == "message":
        return e["message"]["role"] != "toolResult"
    return e["type"] in ("branch_summary", "custom_message")


def is_turn_start(e: dict[str, Any]) -> bool:
    if e["type"] == "message":
        return e["message"]["role"] in ("user", "bashExecution")
    return e["type"] in ("branch_summary", "custom_message")


@dataclass
class ModelPlan:
    result: dict[str, Any]
    boundary: int = 0
    landing: int = 0
    first_kept: int = 0
    turn_start: int = -1
    over_budget_kept_all: bool = False  # the budget was crossed after the last cut point: all kept


def model_prepare(path: list[dict[str, Any]], keep: int, fx: Fixes) -> ModelPlan:
    if path and path[-1]["type"] == "compaction":
        return ModelPlan({"nothing_to_compact": True})
    ci = max((i for i, e in enumerate(path) if e["type"] == "compaction"), default=-1)
    start = 0
    prev = path[ci] if ci >= 0 else None
    if prev is not None:
        start = next((i for i, e in enumerate(path) if e["id"] == prev.get("firstKeptEntryId")), ci + 1)
    end = len(path)
    # findCutPoint
    cuts = [i for i in range(start, end) if is_cut_point(path[i])]
    if not cuts:
        landing = cut = start
        turn_start, split = -1, False
        over_budget_kept_all = False
    else:
        cut = cuts[0]
        acc = 0
        over_budget_kept_all = False
        for i in range(end - 1, start - 1, -1):
            e = path[i]
            if e["type"] == "message":
                acc += estimate(e["message"], fx)
            elif fx.count_all_context_entries and e["type"] in ("custom_message", "branch_summary"):
                m = entry_message(e, fx, for_compaction=False)
                if m is None:
                    continue
                acc += estimate(m, fx)
            else:
                continue
            if acc >= keep:
                fallback = cuts[-1] if fx.cut_before_over_budget_tail else cuts[0]
                cut = next((c for c in cuts if c >= i), fallback)
                over_budget_kept_all = i > cuts[-1]
                break
        landing = cut
        while cut > start and path[cut - 1]["type"] not in ("compaction", "message"):
            cut -= 1
        decide = landing if fx.split_on_landing else cut
        d = path[decide]
        if fx.split_on_landing and is_turn_start(d):
            turn_start = -1
        elif d["type"] == "message" and d["message"]["role"] == "user":
            turn_start = -1
        else:
            turn_start = next((i for i in range(decide, start - 1, -1) if is_turn_start(path[i])), -1)
        if fx.split_on_landing and turn_start >= cut and not fx.split_with_turn_start_in_kept_tail:
            turn_start = -1  # the turn starts inside the kept tail: none of it is summarised, nothing split
        split = turn_start != -1
    if not path or "id" not in path[cut]:
        return ModelPlan({"nothing_to_compact": True})
    history_end = turn_start if split else cut
    mts = [m for e in path[start:history_end] if (m := entry_message(e, fx, for_compaction=True)) is not None]
    tpm = ([m for e in path[turn_start:cut] if (m := entry_message(e, fx, for_compaction=True)) is not None]
           if split else [])
    if fx.nothing_when_empty and not mts and not tpm:
        return ModelPlan({"nothing_to_compact": True}, start, landing, cut, turn_start, over_budget_kept_all)
    read: set[str] = set()
    edited: set[str] = set()
    written: set[str] = set()
    if prev is not None and not prev.get("fromHook") and prev.get("details"):
        read.update(prev["details"].get("readFiles") or [])
        edited.update(prev["details"].get("modifiedFiles") or [])
    for m in mts + tpm:
        if m.get("role") != "assistant":
            continue
        for b in m["content"]:
            if b.get("type") == "toolCall" and isinstance((b.get("arguments") or {}).get("path"), str):
                p = b["arguments"]["path"]
                if not p:
                    continue
                {"read": read, "write": written, "edit": edited}.get(b["name"], set()).add(p)
    modified = edited | written
    return ModelPlan({
        "first_kept_entry_id": path[cut]["id"],
        "is_split_turn": split,
        "tokens_before": tokens_before(path, fx),
        "messages_to_summarize": len(mts),
        "turn_prefix_messages": len(tpm),
        "read_files": js_sorted(read - modified, fx),
        "modified_files": js_sorted(modified, fx),
        "previous_summary": prev is not None and "summary" in prev,
    }, start, landing, cut, turn_start, over_budget_kept_all)


def pi_path(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SessionManager.getBranch() for the leaf Pi picks: the last entry of the file."""
    by_id = {e["id"]: e for e in entries}
    out = []
    cur = entries[-1] if entries else None
    while cur is not None:
        out.append(cur)
        cur = by_id.get(cur["parentId"]) if cur.get("parentId") else None
    out.reverse()
    return out


# ------------------------------------------------------------------------------------------------
# The corpus of sessions
# ------------------------------------------------------------------------------------------------

KEEPS = [1, 40, 150, 600, 2000, 6000, 20000, 60000]
RESERVES = [16384, 1024, 4096, 100]
FRACTIONS = (0.02, 0.1, 0.3, 0.6, 0.9, 0.99)  # keepRecentTokens as a share of the summarisable tokens


@dataclass
class Case:
    name: str
    seed: int
    n: int
    keep: int
    reserve: int
    options: dict[str, Any]


def corpus() -> list[Case]:
    cases: list[Case] = []
    k = 0
    sizes = [1, 2, 3, 4, 6, 9, 14, 20, 30, 45, 70, 100, 150, 220, 330, 500, 800, 1200]
    profiles: list[tuple[str, dict[str, Any]]] = [
        ("default", {}),
        ("small", {"size_scale": 0.05}),
        ("settings-heavy", {"p_settings": 0.7, "p_meta_midturn": 0.15, "size_scale": 0.2}),
        ("compactions", {"p_compaction": 0.25, "p_compaction_midturn": 0.05, "p_overflow": 0.05, "size_scale": 0.3}),
        ("branches", {"p_branch": 0.25, "p_branch_summary": 0.8, "size_scale": 0.3}),
        ("extensions", {"p_custom_message": 0.3, "p_bash_execution": 0.25, "p_meta_midturn": 0.1, "size_scale": 0.3}),
        ("errors", {"p_error": 0.15, "p_aborted": 0.15, "p_zero_total": 0.4, "size_scale": 0.3}),
        ("unicode", {"p_unicode": 0.9, "p_lone_surrogate": 0.3, "size_scale": 0.3}),
        ("odd", {"p_odd": 0.3, "p_zero_usage": 0.3, "p_image": 0.2, "p_compaction": 0.15, "p_float_args": 0.3,
                 "size_scale": 0.3}),
    ]
    for pi, (pname, popts) in enumerate(profiles):
        for si, n in enumerate(sizes):
            for rep in range(2):
                k += 1
                keep = KEEPS[(k * 7 + si) % len(KEEPS)]
                reserve = RESERVES[k % len(RESERVES)]
                cases.append(Case(f"{pname}-n{n}-r{rep}", 1000 * pi + 10 * si + rep, n, keep, reserve, popts))
    ends = ["compaction", "settings", "user", "assistant", "toolResult", "turn_end", "branch_summary",
            "custom_message", "label", "bash"]
    for ei, end in enumerate(ends):
        for n in (2, 5, 25, 120, 600):
            for keep in (1, 300, 5000):
                k += 1
                cases.append(Case(f"end-{end}-n{n}-k{keep}", 50_000 + 100 * ei + n + keep, n, keep,
                                  RESERVES[k % len(RESERVES)], {"end": end, "p_settings": 0.4, "size_scale": 0.2}))
    # the same sessions at many budgets, so cuts land everywhere
    for seed in (7, 8, 9):
        for keep in (1, 10, 30, 100, 300, 1000, 3000, 10000, 30000):
            cases.append(Case(f"sweep-s{seed}-k{keep}", 70_000 + seed, 400, keep, 16384,
                              {"p_settings": 0.5, "p_compaction": 0.1, "p_custom_message": 0.15,
                               "p_bash_execution": 0.1, "p_branch": 0.1, "size_scale": 0.15}))
    def hunt_case(j: int, base: int) -> Case:
        pname, popts = profiles[j % len(profiles)]
        mixed = dict(popts, p_settings=(j % 5) * 0.15, p_custom_message=(j % 3) * 0.1,
                     p_compaction=(j % 4) * 0.05, p_branch=(j % 6) * 0.04)
        n = sizes[(j * 7) % len(sizes)]
        return Case(f"extra-{pname}-{j}", base + j, n, KEEPS[j % len(KEEPS)], 16384, mixed)

    # sessions that longer hunts found interesting (cut moved back over a custom_message / branch_summary)
    cases += [hunt_case(j, 100_000) for j in (104, 442)]
    # IPYAGENT_PARITY_EXTRA=N adds N more sessions with mixed profiles (a longer hunt; CI runs without)
    extra = int(os.environ.get("IPYAGENT_PARITY_EXTRA", "0") or 0)
    base = int(os.environ.get("IPYAGENT_PARITY_SEED", "100000") or 100000)
    cases += [hunt_case(j, base) for j in range(extra) if not (base == 100_000 and j in (104, 442))]
    # a few large ones, and the generator's defaults at full size
    for seed, n, keep, scale in ((90_001, 4000, 20000, 1.0), (90_002, 16000, 20000, 1.0), (90_003, 16000, 3000, 0.2)):
        cases.append(Case(f"large-{n}-k{keep}", seed, n, keep, 16384, {"size_scale": scale}))
    return cases


def summarisable_tokens(path: list[dict[str, Any]]) -> int:
    """Pi's estimate of the messages from the summarising boundary on (what keepRecentTokens is measured on)."""
    ci = max((i for i, e in enumerate(path) if e["type"] == "compaction"), default=-1)
    start = 0
    if ci >= 0:
        start = next((i for i, e in enumerate(path) if e["id"] == path[ci]["firstKeptEntryId"]), ci + 1)
    return sum(estimate(e["message"], PI) for e in path[start:] if e["type"] == "message")


@dataclass
class Compared:
    case: Case
    keep: int
    file: Path
    path: list[dict[str, Any]]
    pi: dict[str, Any]
    ipyagent: dict[str, Any]


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> list[Compared]:
    """Every corpus session at its own budget plus budgets that are shares of its size (Pi and
    ipyagent over the whole corpus take ~14 s: the three tests using it are marked slow)."""
    root = tmp_path_factory.mktemp("pi_parity")
    runs: list[tuple[Case, int, Path, list[dict[str, Any]]]] = []
    for i, case in enumerate(corpus()):
        header, entries = generate_session(case.seed, case.n, **case.options)
        f = write_jsonl(root / f"{i:04d}-{case.name}.jsonl", header, entries)
        path = pi_path(entries)
        keeps = [case.keep]
        if not case.name.startswith(("sweep", "large")):
            total = summarisable_tokens(path)
            keeps += sorted({max(1, int(total * fr)) for fr in FRACTIONS} - {case.keep})
        runs += [(case, keep, f, path) for keep in keeps]
    pi = run_oracle([{"file": str(f), "reserveTokens": c.reserve, "keepRecentTokens": keep}
                     for c, keep, f, _ in runs])
    out = []
    session, loaded = None, None
    for (case, keep, f, path), p in zip(runs, pi):
        try:
            if loaded != f:
                session, loaded = Session.from_file(f, estimator="chars4"), f
            plan = session.prepare_compaction(CompactionSettings(reserve_tokens=case.reserve, keep_recent_tokens=keep))
            mine = {"nothing_to_compact": True} if plan is None else plan.to_summary_dict()
        except Exception as exc:  # noqa: BLE001 - a crash is a difference too; explain() decides whether it is known
            mine = {"error": f"{type(exc).__name__}: {exc}"}
        out.append(Compared(case, keep, f, path, p, mine))
    return out


# ------------------------------------------------------------------------------------------------
# The tests
# ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_model_reproduces_pi_exactly(compared):
    """The test's own model of Pi 0.73.1, with no fix switched on, equals the oracle everywhere."""
    bad = []
    for c in compared:
        mine = model_prepare(c.path, c.keep, PI).result
        if mine != c.pi:
            bad.append(f"{c.file.name} keep={c.keep}: pi={c.pi} model={mine}")
    assert not bad, f"{len(bad)} of {len(compared)} differ:\n" + "\n".join(bad[:10])


def split_detail(c: Compared) -> str:
    """Which of the two spurious-split shapes a split_on_landing difference is."""
    plan = model_prepare(c.path, c.keep, IPYAGENT)
    landing = c.path[plan.landing]
    if plan.first_kept != plan.landing and landing["type"] == "message" and landing["message"]["role"] == "user":
        return "split_on_landing/settings-entry-before-prompt"
    if is_turn_start(landing):
        return "split_on_landing/cut-at-non-user-turn-start"
    if plan.first_kept != plan.landing and any(is_turn_start(e) for e in c.path[plan.first_kept:plan.landing]):
        return "split_on_landing/cut-moved-back-over-a-turn-start"
    return "split_on_landing/other"


def explain(c: Compared) -> tuple[str, list[str]]:
    """('same' | 'deliberate' | 'known-deviation' | 'unexplained', the switches needed)."""
    if c.ipyagent == c.pi:
        return "same", []
    if "error" in c.ipyagent:
        return "unexplained", []
    expected = model_prepare(c.path, c.keep, IPYAGENT).result
    if c.ipyagent == expected:
        needed = [name for name in DELIBERATE
                  if model_prepare(c.path, c.keep, replace(IPYAGENT, **{name: False})).result != expected]
        needed = [split_detail(c) if n == "split_on_landing" else n for n in needed]
        return "deliberate", needed or ["(a combination of fixes)"]
    everything = replace(IPYAGENT, **{name: True for name in KNOWN_CORE_DEVIATIONS})
    if c.ipyagent == model_prepare(c.path, c.keep, everything).result:
        needed = [name for name in KNOWN_CORE_DEVIATIONS
                  if model_prepare(c.path, c.keep, replace(everything, **{name: False})).result != c.ipyagent]
        return "known-deviation", needed or ["(a combination of deviations)"]
    return "unexplained", []


@pytest.mark.slow
def test_ipyagent_matches_pi_except_deliberate_fixes(compared):
    stats: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    unexplained = []
    for c in compared:
        kind, switches = explain(c)
        stats[kind] += 1
        if model_prepare(c.path, c.keep, PI).over_budget_kept_all:
            stats["(pi and ipyagent: budget crossed past the last cut point, nothing summarised)"] += 1
        for s in switches:
            hits[s] += 1
        if kind == "unexplained":
            expected = model_prepare(c.path, c.keep, IPYAGENT).result
            unexplained.append(f"{c.file.name} (keep={c.keep}):\n  pi       ={c.pi}\n"
                               f"  expected ={expected}\n  ipyagent ={c.ipyagent}")
    files = len({c.file for c in compared})
    report = (f"{len(compared)} plans over {files} sessions: {dict(stats)}; "
              f"differences by cause: {dict(sorted(hits.items()))}")
    print(report)
    if os.environ.get("IPYAGENT_PARITY_REPORT"):
        Path(os.environ["IPYAGENT_PARITY_REPORT"]).write_text(
            json.dumps({"plans": len(compared), "sessions": files, "stats": stats, "hits": hits}, indent=2))
    assert not unexplained, report + "\n" + "\n".join(unexplained[:8])
    # the corpus must actually exercise the fixes, or the test proves nothing about them
    for name in DELIBERATE:
        assert any(h.startswith(name) for h in hits), f"no session hit the deliberate difference {name}"
    assert stats["same"] > len(compared) // 3


@pytest.mark.slow
def test_cli_prints_the_same_plan(compared):
    """The real ``ipyagent compact --dry-run --json`` agrees with the in-process plan."""
    sample = [c for c in compared if c.case.n <= 600 and "error" not in c.ipyagent][::150]
    assert sample
    for c in sample:
        assert ipyagent_cli(c.file, c.case.reserve, c.keep) == c.ipyagent, c.file.name


# ------------------------------------------------------------------------------------------------
# Crafted sessions: what Pi 0.73.1 does (facts checked against the oracle), and the minimal
# cases of every difference
# ------------------------------------------------------------------------------------------------

def _usage(total: int) -> dict[str, Any]:
    return {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def U(text: str = "hi", image: bool = False) -> dict[str, Any]:
    content: Any = text
    if image:
        content = [{"type": "text", "text": text}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]
    return {"type": "message", "message": {"role": "user", "content": content, "timestamp": 1}}


def A(text: str = "ok", *calls: tuple[str, str], total: int = 100, stop: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": f"call_{i}", "name": name, "arguments": {"path": p}}
                for i, (name, p) in enumerate(calls)]
    return {"type": "message", "message": {
        "role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
        "model": "claude-sonnet-4-5", "usage": _usage(total),
        "stopReason": stop or ("toolUse" if calls else "stop"), "timestamp": 2}}


def TR(text: str = "result", call: str = "call_0") -> dict[str, Any]:
    return {"type": "message", "message": {"role": "toolResult", "toolCallId": call, "toolName": "read",
                                           "content": [{"type": "text", "text": text}], "isError": False,
                                           "timestamp": 3}}


def MODEL() -> dict[str, Any]:
    return {"type": "model_change", "provider": "openai", "modelId": "gpt-4.1-mini"}


def CM(text: str = "note") -> dict[str, Any]:
    return {"type": "custom_message", "customType": "reminder", "content": text, "display": True}


def BASH(out: str = "") -> dict[str, Any]:
    return {"type": "message", "message": {"role": "bashExecution", "command": "ls", "output": out, "exitCode": 0,
                                           "cancelled": False, "truncated": False, "timestamp": 4}}


def BS(summary: str = "went elsewhere") -> dict[str, Any]:
    return {"type": "branch_summary", "fromId": "root", "summary": summary}


def COMP(first_kept: int | str, summary: str = "S" * 40, details: dict | None = None,
         from_hook: bool = False) -> dict[str, Any]:
    e: dict[str, Any] = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept,
                         "tokensBefore": 50_000}
    if details is not None:
        e["details"] = details
    if from_hook:
        e["fromHook"] = True
    return e


def crafted(*specs: dict[str, Any]) -> list[dict[str, Any]]:
    """A linear session; a compaction's integer firstKeptEntryId is an index into ``specs``."""
    entries = []
    for i, spec in enumerate(specs):
        e = {"type": spec["type"], "id": f"e{i:07d}", "parentId": f"e{i - 1:07d}" if i else None,
             "timestamp": f"2026-01-01T00:00:{i % 60:02d}.000Z"}
        e.update({k: v for k, v in spec.items() if k != "type"})
        if e["type"] == "compaction" and isinstance(e["firstKeptEntryId"], int):
            e["firstKeptEntryId"] = f"e{e['firstKeptEntryId']:07d}"
        entries.append(e)
    return entries


T = "x" * 400  # 100 tokens
FACTS: dict[str, tuple[list[dict[str, Any]], int, dict[str, Any]]] = {
    # name: (entries, keepRecentTokens, the fields of Pi 0.73.1's answer that show the fact)
    "boundary-at-previous-first-kept (#2608 fixed in 0.73.1)": (
        crafted(U(T), A(T), U(T), A(T), COMP(2), U(T), A(T)), 150,
        {"first_kept_entry_id": "e0000005", "messages_to_summarize": 2, "is_split_turn": False,
         "previous_summary": True}),
    "first-kept-off-the-path: boundary after the compaction": (
        crafted(U(T), A(T), U(T), A(T), COMP("deadbeef"), U(T), A(T), U(T), A(T)), 150,
        {"first_kept_entry_id": "e0000007", "messages_to_summarize": 2}),
    "nothing to summarise still gives a plan (no `undefined`)": (
        crafted(U(T), A(T)), 20_000,
        {"first_kept_entry_id": "e0000000", "messages_to_summarize": 0, "turn_prefix_messages": 0}),
    "last entry a compaction: undefined": (
        crafted(U(T), A(T), U(T), COMP(2)), 1, {"nothing_to_compact": True}),
    "cut walk skips custom_message (counts only `message` entries)": (
        crafted(U(T * 4), A("a"), U("u"), CM(T * 10), A("b")), 500,
        {"first_kept_entry_id": "e0000000", "messages_to_summarize": 0}),
    "spurious split: cut moved onto a model_change before a prompt": (
        crafted(U(T), A(T), U(T), A(T), MODEL(), U(T), A(T)), 150,
        {"first_kept_entry_id": "e0000004", "is_split_turn": True, "messages_to_summarize": 2,
         "turn_prefix_messages": 2}),
    "cut at a custom_message: split with an empty turn prefix": (
        crafted(U(T), A("r", ("read", "a.py")), TR(T * 3), CM("n"), A(T)), 150,
        {"first_kept_entry_id": "e0000003", "is_split_turn": True, "messages_to_summarize": 3,
         "turn_prefix_messages": 0}),
    "cut moved back over a branch_summary and a custom_message: split at the branch summary": (
        crafted(U(T), A(T), BS(T), CM(T), A(T)), 100,
        {"first_kept_entry_id": "e0000002", "is_split_turn": True, "messages_to_summarize": 2,
         "turn_prefix_messages": 0}),
    "cut moved back onto a custom_message: split with an empty turn prefix": (
        crafted(U(T), A(T), CM(T), A(T)), 100,
        {"first_kept_entry_id": "e0000002", "is_split_turn": True, "messages_to_summarize": 2,
         "turn_prefix_messages": 0}),
    "cut at a bashExecution: split with an empty turn prefix": (
        crafted(U(T), A(T), BASH(T), U(T), A(T)), 250,
        {"first_kept_entry_id": "e0000002", "is_split_turn": True, "turn_prefix_messages": 0}),
    "budget crossed on a trailing tool result past the last cut point: everything kept": (
        crafted(U(T), A("r", ("read", "a.py")), TR(T * 10)), 500,
        {"first_kept_entry_id": "e0000000", "messages_to_summarize": 0}),
    "compaction entries are never summarised; previous details feed the file lists": (
        crafted(U(T), A(T), U(T), A("r", ("read", "b.py")), TR(T), A(T), COMP(2, details={
            "readFiles": ["x.py"], "modifiedFiles": ["y.py"]}), U(T), A("e", ("edit", "b.py")), TR(T), A(T), U(T), A(T)),
        150,
        {"messages_to_summarize": 8, "read_files": ["x.py"], "modified_files": ["b.py", "y.py"]}),
    "a fromHook compaction's details are ignored": (
        crafted(U(T), A(T), COMP(0, details={"readFiles": ["x.py"], "modifiedFiles": ["y.py"]}, from_hook=True),
                U(T), A("w", ("write", "z.py")), TR(T), A(T), U(T), A(T)),
        150, {"read_files": [], "modified_files": ["z.py"]}),
    "tokens_before: the last valid usage plus estimates after it": (
        crafted(U(T), A(T, total=5000), U(T), A(T, total=9999, stop="error"), U(T)), 1,
        {"tokens_before": 5000 + 100 + 100 + 100}),  # the error message's text is estimated too
    "tokens_before: totalTokens 0 falls back to the sum of the parts": (
        crafted(U(T), {**A(T), "message": {**A(T)["message"], "usage": {
            "input": 10, "output": 20, "cacheRead": 30, "cacheWrite": 40, "totalTokens": 0}}}, U(T)), 1,
        {"tokens_before": 100 + 100}),
    "UTF-16 lengths: an emoji counts 2 chars": (
        crafted(U("😀" * 200)), 1, {"tokens_before": 100}),
    # --- where ipyagent's core deviates (see KNOWN_CORE_DEVIATIONS) ---
    "user images are not counted": (
        crafted(U(T), A(T, total=1000), U("look", image=True)), 1,
        {"tokens_before": 1001, "first_kept_entry_id": "e0000002", "messages_to_summarize": 2}),
    "a lone surrogate (Pi's grep line cut) counts one code unit": (
        crafted(U(T), A("g"), TR("x" * 398 + "\ud83d" + "y"), U(T)), 1,
        {"tokens_before": 100 + 100 + 100, "first_kept_entry_id": "e0000003"}),  # usage + 400 units + user
    "an all-zero usage is taken as the last usage": (
        crafted(U(T), A(T, total=5000), U(T), A(T, total=0) | {"message": {**A(T)["message"], "usage": {
            "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}}}, U(T)), 1,
        {"tokens_before": 0 + 100}),
    "usage recorded before the latest compaction still counts": (
        crafted(U(T), A(T), U(T), A(T, total=7000), COMP(2), U(T)), 1,
        {"tokens_before": 7000 + 100, "previous_summary": True}),
    "file lists sorted by UTF-16 code units": (
        crafted(U(T), A("r", ("read", "n/ｆ.md"), ("read", "n/😀.md"), ("read", "n/a.md")), TR("1", "call_0"),
                TR("2", "call_1"), TR("3", "call_2"), A(T), U(T), A(T)), 150,
        {"read_files": ["n/a.md", "n/😀.md", "n/ｆ.md"]}),
    "an empty branch_summary counts as a message to summarise": (
        crafted(U(T), A(T), BS(""), U(T), A(T), U(T), A(T)), 150,
        {"first_kept_entry_id": "e0000005", "messages_to_summarize": 5}),
}

# Crafted cases where ipyagent deliberately differs from Pi: it must equal the model with the fix
# on, and differ from Pi (so the case really exercises the fix).
DELIBERATE_CASES = {
    "an all-zero usage is taken as the last usage": "skip_zero_usage",
    "usage recorded before the latest compaction still counts": "skip_usage_before_compaction",
}


@pytest.fixture(scope="module")
def facts(tmp_path_factory) -> dict[str, tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], int]]:
    root = tmp_path_factory.mktemp("pi_facts")
    files = {}
    for i, (name, (entries, keep, _)) in enumerate(FACTS.items()):
        header = {"type": "session", "version": 3, "id": f"00000000-0000-4000-a000-{i:012d}",
                  "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}
        files[name] = write_jsonl(root / f"fact{i:02d}.jsonl", header, entries)
    answers = run_oracle([{"file": str(f), "keepRecentTokens": FACTS[n][1]} for n, f in files.items()])
    return {name: (pi, ipyagent_plan(files[name], 16384, FACTS[name][1]), FACTS[name][0], FACTS[name][1])
            for name, pi in zip(files, answers)}


@pytest.mark.parametrize("name", list(FACTS))
def test_pi_0731_fact(facts, name):
    """What Pi 0.73.1 does (docs/pi-differences.md), checked on the real package, and the model agrees."""
    pi, _, entries, keep = facts[name]
    expected = FACTS[name][2]
    assert {k: pi.get(k) for k in expected} == expected, pi
    assert model_prepare(entries, keep, PI).result == pi


@pytest.mark.parametrize("name", list(FACTS))
def test_ipyagent_on_crafted_case(facts, name):
    """ipyagent equals Pi, or differs exactly as its deliberate fixes prescribe."""
    pi, mine, entries, keep = facts[name]
    assert mine == model_prepare(entries, keep, IPYAGENT).result, f"pi={pi}\nipyagent={mine}"


@pytest.mark.parametrize("name", list(DELIBERATE_CASES))
def test_deliberate_difference_minimal_case(facts, name):
    """Each such case differs from Pi, and only because of its one fix."""
    pi, mine, entries, keep = facts[name]
    assert mine != pi
    assert model_prepare(entries, keep, replace(IPYAGENT, **{DELIBERATE_CASES[name]: False})).result == pi


def test_over_budget_tail_is_cut_before_the_calls():
    """The newest tool results alone exceed the budget: Pi summarises nothing, ipyagent cuts at the call."""
    entries = crafted(U(T), A(T), U(T), A(T), U("now read the big files"),
                      {"type": "message", "message": {"role": "assistant", "content": [
                          {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "big.py"}}],
                          "usage": _usage(0), "stopReason": "toolUse", "timestamp": 1}},
                      {"type": "message", "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                                                      "content": [{"type": "text", "text": "x" * 4000}],
                                                      "isError": False, "timestamp": 1}})
    pi = model_prepare(entries, 200, PI).result
    mine = model_prepare(entries, 200, IPYAGENT).result
    assert pi["messages_to_summarize"] == 0 and pi["first_kept_entry_id"] == entries[0]["id"]
    assert mine["first_kept_entry_id"] == entries[5]["id"]  # the assistant message that made the call
    from ipyagent.compaction.prepare import prepare_compaction

    plan = prepare_compaction(entries, CompactionSettings(keep_recent_tokens=200))
    assert plan.to_summary_dict() == mine


# ------------------------------------------------------------------------------------------------
# The generator the corpus comes from
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed,n,options", [
    (1, 3000, {}), (2, 500, {"p_branch": 0.3, "p_compaction": 0.3}), (3, 200, {"end": "toolResult"}),
    (4, 50, {"end": "compaction"}), (5, 1, {}), (6, 0, {}),
])
def test_generated_sessions_are_deterministic_and_well_formed(seed, n, options):
    header, entries = generate_session(seed, n, **options)
    assert (header, entries) == generate_session(seed, n, **options)
    assert header["type"] == "session" and header["version"] == 3 and isinstance(header["id"], str)
    assert len(entries) == n
    seen: dict[str, dict[str, Any]] = {}
    last_ts = header["timestamp"]
    for e in entries:
        assert len(e["id"]) == 8 and int(e["id"], 16) >= 0 and e["id"] not in seen
        assert e["parentId"] is None or e["parentId"] in seen  # parents come first in the file
        assert e["timestamp"] > last_ts  # ISO strings of one format sort as the times do
        last_ts = e["timestamp"]
        seen[e["id"]] = e
    # along the leaf's path every tool result answers a call of the assistant message before it
    calls: set[str] = set()
    for e in pi_path(entries):
        if e["type"] == "message" and e["message"]["role"] == "assistant":
            calls = {b["id"] for b in e["message"]["content"] if b["type"] == "toolCall"}
        elif e["type"] == "message" and e["message"]["role"] == "toolResult":
            assert e["message"]["toolCallId"] in calls
    if options.get("end") == "compaction":
        assert entries[-1]["type"] == "compaction"
    if options.get("end") == "toolResult":
        assert entries[-1]["message"]["role"] == "toolResult"


def test_generator_rejects_unknown_options():
    with pytest.raises(TypeError):
        generate_session(1, 10, p_nonsense=1)


# ------------------------------------------------------------------------------------------------
# Files as Pi reads them: malformed lines, version 2 (hookMessage), sessions written by Pi's rules
# ------------------------------------------------------------------------------------------------

def _both(tmp_path: Path, name: str, text: str, keep: int) -> tuple[dict[str, Any], dict[str, Any]]:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    pi = run_oracle([{"file": str(f), "keepRecentTokens": keep}])[0]
    return pi, ipyagent_plan(f, 16384, keep)


@pytest.mark.parametrize("keep", [1, 200, 3000])
def test_malformed_and_blank_lines_are_skipped_like_pi(tmp_path, keep):
    header, entries = generate_session(4242, 80, p_settings=0.4, size_scale=0.1)
    lines = to_jsonl(header, entries).splitlines()
    lines.insert(20, "{not json")
    lines.insert(40, "")
    lines.insert(41, "   ")
    pi, mine = _both(tmp_path, "malformed.jsonl", "\n".join(lines) + "\n", keep)
    assert pi == model_prepare(pi_path(entries), keep, PI).result
    assert mine == model_prepare(pi_path(entries), keep, IPYAGENT).result


@pytest.mark.parametrize("keep", [1, 150, 250])
def test_version_2_hook_messages_are_migrated_like_pi(tmp_path, keep):
    """v2 files call extension messages role "hookMessage"; Pi renames it "custom" on load."""
    hook = {"type": "message", "message": {"role": "hookMessage", "customType": "reminder", "content": T,
                                           "display": True, "timestamp": 5}}
    entries = crafted(U(T), A(T), U(T), hook, A(T), U(T), A(T))
    header = {"type": "session", "version": 2, "id": "00000000-0000-4000-a000-000000000002",
              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}
    pi, mine = _both(tmp_path, "v2.jsonl", to_jsonl(header, entries), keep)
    migrated = [dict(e, message=dict(e["message"], role="custom"))
                if e["type"] == "message" and e["message"]["role"] == "hookMessage" else e for e in entries]
    assert pi == model_prepare(migrated, keep, PI).result
    assert mine == model_prepare(migrated, keep, IPYAGENT).result
