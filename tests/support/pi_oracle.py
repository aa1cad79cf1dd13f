"""The Pi oracle: Pi's own npm package (pinned in tests/oracle, see its README), run by node.

``run_oracle`` asks ``pi_prepare.mjs`` for Pi's compaction plans (tests/compaction/test_pi_parity.py);
tests/session/test_pi_loading.py runs ``pi_load.mjs`` from ``ORACLE``. Neither is skipped without the
package: ``ensure_oracle`` installs it with ``npm ci``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ORACLE = Path(__file__).resolve().parents[1] / "oracle"
PI_PACKAGE = ORACLE / "node_modules" / "@mariozechner" / "pi-coding-agent" / "package.json"
PI_VERSION = "0.73.1"


def ensure_oracle() -> None:
    """Install the pinned Pi package when it is missing (npm registry only; no audit, no fund)."""
    if PI_PACKAGE.exists() and json.loads(PI_PACKAGE.read_text())["version"] == PI_VERSION:
        return
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "the Pi parity oracle needs node and npm on PATH"
    proc = subprocess.run([npm, "ci", "--prefix", str(ORACLE), "--no-audit", "--no-fund"],
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"npm ci for the Pi oracle failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert json.loads(PI_PACKAGE.read_text())["version"] == PI_VERSION


def run_oracle(requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi's plans for many files in one node process; same order as ``requests``."""
    ensure_oracle()
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run(["node", str(ORACLE / "pi_prepare.mjs"), "--batch"], input=stdin,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(answers) == len(requests)
    results = []
    for req, ans in zip(requests, answers):
        assert ans["file"] == req["file"]
        assert "error" not in ans, ans.get("error")
        results.append(ans["result"])
    return results
