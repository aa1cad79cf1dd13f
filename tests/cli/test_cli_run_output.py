"""``ipyagent run`` as the README's main job uses it: its output runs again wherever it was written,
and a failing cell's traceback reaches a log or a pipe as plain text (the kernel colours it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipyagent.store.ipynb import new_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "notebooks" / "how-compaction-works.ipynb"
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "IPYAGENT_MODEL",
                "IPYAGENT_REPLAY", "JPY_SESSION_NAME")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    log = cwd / "run.log"
    with log.open("w") as sink:  # a file, not a terminal: what CI and a redirected run see
        result = subprocess.run([sys.executable, "-m", "ipyagent", "run", *args], cwd=cwd, env=env,
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
    result.stdout = log.read_text(encoding="utf-8")
    return result


@pytest.mark.kernel
@pytest.mark.slow
def test_the_main_jobs_output_runs_again_where_it_was_written(tmp_path):
    """The README's command writes the tour's output away from ``notebooks/``; running that output
    again (from its own folder) finds every helper the tour imports."""
    first = _run([str(TOUR), "-o", "how-compaction-works.run.ipynb"], tmp_path)
    assert first.returncode == 0, first.stdout
    again = _run(["how-compaction-works.run.ipynb", "-o", "x.ipynb"], tmp_path)
    assert again.returncode == 0, again.stdout
    assert "ModuleNotFoundError" not in again.stdout
    assert "wrote x.ipynb: default (" in again.stdout


@pytest.mark.kernel
def test_a_failing_cells_traceback_is_plain_text_when_not_on_a_terminal(tmp_path):
    nb = new_notebook([{"cell_type": "code", "id": "fails", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": "def f():\n    return 1 / 0\n\nf()"}])
    write_notebook(tmp_path / "fails.ipynb", nb)
    result = _run(["fails.ipynb", "-o", "out.ipynb"], tmp_path)
    assert result.returncode == 1
    assert "ZeroDivisionError" in result.stdout and "return 1 / 0" in result.stdout
    assert "\x1b" not in result.stdout, result.stdout
