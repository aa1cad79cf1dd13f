"""The Pi oracle: Pi's own npm packages (pinned in tests/oracle, see its README), run by node, and
ipyagent's answers in the same shapes.

``run_oracle`` sends a batch of requests to ``pi.mjs`` (Pi 1.6.0, or 0.73.1 for old files):
``load`` (the loader's verdict), ``prepare`` (``prepareCompaction``'s plan) and ``context`` (the
model-visible context). ``pi_write`` has Pi 1.6.0's own ``SessionManager`` write sessions
(``pi_write.mjs``). ``explain_plan`` / ``explain_context`` name the documented difference
(docs/pi-differences.md) a disagreement is, or say "unexplained". Nothing is skipped without
the packages: ``ensure_oracle`` installs them with ``npm ci``.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ipyagent.compaction.cut_point import TURN_START_ROLES
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.session.messages import convert_to_llm, current_tools, system_prompt_text

ORACLE = Path(__file__).resolve().parents[1] / "oracle"
PACKAGES = {"1.6": (ORACLE / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json", "1.6.0"),
            "0.73": (ORACLE / "node_modules" / "pi073" / "package.json", "0.73.1")}


# ------------------------------------------------------------------------------------------------
# The oracle
# ------------------------------------------------------------------------------------------------

def _installed() -> bool:
    return all(p.exists() and json.loads(p.read_text())["version"] == v for p, v in PACKAGES.values())


def ensure_oracle() -> None:
    """Install the pinned Pi packages when missing (npm registry only; no audit, no fund).

    Both xdist workers may reach this first on a fresh clone: an exclusive lock on a file beside
    the packages makes one install while the other waits, then finds them installed."""
    if _installed():
        return
    with (ORACLE / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed():
            return
        npm = shutil.which("npm")
        assert npm and shutil.which("node"), "the Pi parity oracle needs node and npm on PATH"
        proc = subprocess.run([npm, "ci", "--prefix", str(ORACLE), "--no-audit", "--no-fund"],
                              capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 0, f"npm ci for the Pi oracle failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        assert _installed()


def run_oracle(requests: Sequence[dict[str, Any]], *, errors_ok: bool = False) -> list[dict[str, Any]]:
    """Pi's answers for many requests in one node process; same order as ``requests``."""
    ensure_oracle()
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run(["node", str(ORACLE / "pi.mjs")], input=stdin, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(answers) == len(requests)
    out = []
    for req, ans in zip(requests, answers):
        assert ans["file"] == req["file"]
        if not errors_ok:
            assert "error" not in ans, ans.get("error")
        out.append(ans.get("result", {"error": ans.get("error")}))
    return out


def pi_write(directory: Path, seed: int, count: int) -> list[Path]:
    """``count`` sessions written by Pi 1.6.0's own SessionManager (``tests/oracle/pi_write.mjs``)."""
    ensure_oracle()
    proc = subprocess.run(["node", str(ORACLE / "pi_write.mjs"), str(directory), str(seed), str(count)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [Path(line) for line in proc.stdout.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------
# ipyagent's answers, in the oracle's shapes
# ------------------------------------------------------------------------------------------------

def plan_of(session: Session, reserve: int, keep: int) -> dict[str, Any]:
    """``ipyagent compact --dry-run --json``'s object, in process; a crash gives {"error": ...}."""
    try:
        plan = session.prepare_compaction(CompactionSettings(reserve_tokens=reserve, keep_recent_tokens=keep))
    except Exception as exc:  # noqa: BLE001 - a crash is a difference too
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"nothing_to_compact": True} if plan is None else plan.to_summary_dict()


def context_of(session: Session) -> dict[str, Any]:
    """What ipyagent sends for the session, as the oracle reports Pi's context."""
    messages = session.context_messages()
    system = session.system_message()
    return {"messages": json.loads(json.dumps(convert_to_llm(messages))),
            "system_prompt": system_prompt_text(system),
            "tools": [t.get("name") for t in current_tools(messages)]}


def ipyagent_cli(path: Path, reserve: int, keep: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "ipyagent.cli", "compact", str(path), "--dry-run", "--json",
                           "--estimator", "chars4", "--reserve-tokens", str(reserve),
                           "--keep-recent-tokens", str(keep)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


# ------------------------------------------------------------------------------------------------
# The documented differences (docs/pi-differences.md), recognised by their shape
# ------------------------------------------------------------------------------------------------

def spurious_split(session: Session, pi: dict[str, Any], mine: dict[str, Any]) -> bool:
    """Difference #1: Pi splits a turn when backward inclusion moved the cut onto an invisible
    entry (a settings entry, a context edit, a usage entry…) before a prompt; ipyagent keeps the
    cut, splits nothing and summarises the previous turn with the history."""
    if not (pi.get("is_split_turn") and not mine.get("is_split_turn")):
        return False
    same = {k: v for k, v in pi.items() if k not in ("is_split_turn", "messages_to_summarize", "turn_prefix_messages")}
    if any(mine.get(k) != v for k, v in same.items()) or mine.get("turn_prefix_messages") != 0:
        return False
    if mine.get("messages_to_summarize") != pi["messages_to_summarize"] + pi["turn_prefix_messages"]:
        return False
    projection = session.context_state().projection
    index = next(i for i, p in enumerate(projection) if p.entry.get("id") == pi["first_kept_entry_id"])
    if projection[index].messages:
        return False  # the cut entry itself is visible: no backward inclusion happened
    while index < len(projection) and not projection[index].messages:
        index += 1
    return index < len(projection) and any(m.get("role") in TURN_START_ROLES for m in projection[index].messages)


def string_assistant_content(session: Session) -> bool:
    """Difference #2: an assistant message whose content is a string (a hand-written or old file):
    ipyagent gives the model its text as a block and counts it; Pi 1.6 counts 0 and sends the string."""
    return any(e.get("type") == "message" and e["message"].get("role") == "assistant"
               and isinstance(e["message"].get("content"), str) for e in session.path())


def explain_plan(session: Session, pi: dict[str, Any], mine: dict[str, Any]) -> str:
    if pi == mine:
        return "same"
    if "error" in mine:
        return "unexplained"
    if spurious_split(session, pi, mine):
        return "#1 spurious split"
    if string_assistant_content(session):
        return "#2 assistant content as a string"
    return "unexplained"


def explain_context(session: Session, pi: dict[str, Any], mine: dict[str, Any]) -> str:
    if pi == mine:
        return "same"
    if string_assistant_content(session):
        return "#2 assistant content as a string"
    return "unexplained"
