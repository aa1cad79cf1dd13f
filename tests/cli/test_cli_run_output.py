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


def _run(args: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV} | extra_env
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


NOTEBOOK_KEY = "sk-proj-set-by-the-notebook-4f2a9c"
CI_TOKEN = "ghp_in-the-ci-environment-77a1b3"


@pytest.mark.kernel
def test_ipyagent_run_prints_no_key_on_its_stderr(tmp_path):
    """A key the notebook sets itself (``%env``, echoed as the cell's first line) and a key of the
    run's own environment (a CI secret), both in a failing cell's traceback: neither reaches the
    log; the rest of the lines do."""
    sources = [f"%env OPENAI_API_KEY={NOTEBOOK_KEY}",
               f"import os; token = os.environ['CI_DEPLOY_TOKEN']  # {CI_TOKEN[:6]}",
               "raise RuntimeError('cannot deploy with ' + os.environ['OPENAI_API_KEY'] + ' and ' + token)"]
    write_notebook(tmp_path / "keys.ipynb", new_notebook([
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
        for i, s in enumerate(sources)]))
    result = _run(["keys.ipynb", "-o", "out.ipynb"], tmp_path, CI_DEPLOY_TOKEN=CI_TOKEN)
    assert result.returncode == 1
    assert NOTEBOOK_KEY not in result.stdout and CI_TOKEN not in result.stdout, result.stdout
    assert "ipyagent run: cell 1/3" in result.stdout and "%env OPENAI_API_KEY=***" in result.stdout
    assert "RuntimeError: cannot deploy with *** and ***" in result.stdout, result.stdout


def _three_cells(folder: Path) -> Path:
    sources = ["%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'", "total = 6 * 7",
               "%%agent\nWhat is in `total`?"]
    write_notebook(folder / "three.ipynb", new_notebook([
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
        for i, s in enumerate(sources)]))
    return folder / "three.ipynb"


def _run_on(args: list[str], cwd: Path, server, *, terminal: bool) -> tuple[int, str]:
    """``ipyagent run`` against the fake provider; what reached its stderr (a pipe, or a terminal:
    the slave end of a pty) and its return code."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV and k != "NO_COLOR"}
    env.update(OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="sk-test-not-a-real-key")
    command = [sys.executable, "-m", "ipyagent", "run", *args]
    if not terminal:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=600, text=True)
        return done.returncode, done.stderr
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=slave,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    got = bytearray()
    while True:  # until the child's end closes the terminal (EIO on Linux)
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return proc.wait(timeout=600), got.decode("utf-8", "replace")


@pytest.mark.kernel
def test_ipyagent_run_prints_one_line_per_cell_plain_off_a_terminal_and_none_when_quiet(tmp_path):
    from ipyagent.testing import FakeProviderServer

    src = _three_cells(tmp_path)
    with FakeProviderServer() as server:
        server.enqueue_text("`total` holds 42.")
        code, err = _run_on([str(src), "-o", "out.ipynb"], tmp_path, server, terminal=False)
        assert code == 0, err
        lines = [ln for ln in err.splitlines() if ln.startswith("ipyagent run: cell")]
        assert [ln.split()[3] for ln in lines] == ["1/3", "2/3", "3/3"], err
        assert lines[0].endswith("%load_ext ipyagent") and lines[2].endswith("%%agent")
        assert all(" s  " in ln for ln in lines)  # the elapsed seconds
        assert "\x1b" not in err, err  # a pipe gets no escape codes

        server.enqueue_text("`total` holds 42.")
        code, err = _run_on([str(src), "-o", "quiet.ipynb", "--quiet"], tmp_path, server, terminal=True)
        assert code == 0, err
        assert "ipyagent run: cell" not in err, err


@pytest.mark.kernel
def test_ipyagent_run_dims_its_lines_on_a_terminal(tmp_path):
    from ipyagent.testing import FakeProviderServer

    src = _three_cells(tmp_path)
    with FakeProviderServer() as server:
        server.enqueue_text("`total` holds 42.")
        code, err = _run_on([str(src), "-o", "out.ipynb"], tmp_path, server, terminal=True)
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "ipyagent run: cell" in ln]
    assert len(lines) == 3 and all(ln.startswith("\x1b[2m") and ln.rstrip("\r").endswith("\x1b[0m")
                                   for ln in lines), err
