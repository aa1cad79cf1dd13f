"""`ipyagent run`'s output opened in a real JupyterLab (issue 37, item 11): the tour's run output
was written in layout 1, so the page moved it into layout 3 on opening, the notebook read modified
before the user changed anything, and the page said "…moved to the current layout (layout 3: 46
entries in 1 chunks)…". The run writes the labextension's layout, so opening it changes nothing;
a notebook still in the old layout (the tour as checked in) is converted and said in plain words.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.lab_pages import open_notebook

pytestmark = pytest.mark.usefixtures("fresh_kernels")

TOUR = Path(__file__).resolve().parents[2] / "notebooks" / "how-compaction-works.ipynb"
CONVERTED = "has been converted to the current one"

# Idle callbacks run in the order they were asked for, and each step of the page's move asks for
# the next one while it runs: once this chain of ROUNDS callbacks (asked for after the page's
# first) has run, the move has taken at least ROUNDS steps (a move of a 46-entry session takes 3).
AFTER_IDLE_ROUNDS = """(rounds) => new Promise(done => {
  const next = (left) => left ? requestIdleCallback(() => next(left - 1)) : done();
  next(rounds);
})"""
ROUNDS = 20


def _dirty(page, name: str) -> bool:
    return page.evaluate("(p) => window.__ipa.panel(p).context.model.dirty", name)


def _version(page, name: str) -> int:
    return page.evaluate("(p) => window.__ipa.panel(p).context.model.getMetadata('ipyagent').version", name)


def _settled(page) -> None:
    """Wait until the page's idle work after opening (and its kernel's hello) has run (see
    AFTER_IDLE_ROUNDS); open_notebook waited for the kernel."""
    page.evaluate(AFTER_IDLE_ROUNDS, ROUNDS)


def test_the_tours_run_output_opens_unmodified(jupyterlab, context, tmp_path):
    lab = jupyterlab
    source = tmp_path / "tour.ipynb"
    shutil.copyfile(TOUR, source)
    out = lab.root / "tour.run.ipynb"
    done = subprocess.run([sys.executable, "-m", "ipyagent.cli", "run", str(source), "-o", str(out), "--replay",
                           "-q"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "default (46 entries)" in done.stdout, done.stdout

    page = context.new_page()
    open_notebook(page, lab, out.name)
    _settled(page)
    assert not [line for line in context.logs if CONVERTED in line or "current layout" in line]
    assert not _dirty(page, out.name)
    assert _version(page, out.name) == 3 == json.loads(out.read_text())["metadata"]["ipyagent"]["version"]


def test_a_notebook_in_the_old_layout_is_converted_and_said_plainly(jupyterlab, context):
    lab = jupyterlab
    name = "tour-as-checked-in.ipynb"
    shutil.copyfile(TOUR, lab.root / name)
    assert json.loads((lab.root / name).read_text())["metadata"]["ipyagent"]["version"] == 1
    page = context.new_page()
    open_notebook(page, lab, name)
    _settled(page)
    said = [line for line in context.logs if CONVERTED in line]
    assert len(said) == 1 and "(46 entries)" in said[0], context.logs
    # words a user knows: no layouts, no chunks
    assert "layout" not in said[0] and "chunk" not in said[0]
    assert _version(page, name) == 3 and _dirty(page, name)
