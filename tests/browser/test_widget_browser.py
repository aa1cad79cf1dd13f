"""The budget widget, rendered live by ipywidgets in a real JupyterLab: visible, with its numbers,
and its bar drawn in the segment colours. The screenshot is kept in ``artifacts/widget.png``."""

from __future__ import annotations

import io
import threading
import time

from PIL import Image

from ipyagent.testing.specs import Reply
from support.lab_pages import ARTIFACTS, open_notebook, run_cell, save_notebook, write_notebook

SETUP = ("%load_ext ipyagent\n%config Agent.context_window = 8000\n%config Agent.reserve_tokens = 2000\n"
         "%config Agent.keep_recent_tokens = 1000")


def _has_colour(image: Image.Image, rgb: tuple[int, int, int], tolerance: int = 12) -> bool:
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20)}
    return any(all(abs(c[i] - rgb[i]) <= tolerance for i in range(3)) for c in colours)


def test_budget_widget_is_visible_with_its_numbers(jupyterlab, context):
    """Live while the run streams (the fake provider holds its reply open), then the static view
    with the same numbers once the run ends."""
    lab = jupyterlab
    name = "widget.ipynb"
    write_notebook(lab.root / name, [SETUP, "%%agent\nDescribe what you can do in two sentences."])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    release = threading.Event()
    lab.fake.enqueue_text("I can run Python in your kernel, read and edit files and run commands. "
                          "I keep the session in this notebook's metadata.", hold=release)
    try:
        page.evaluate("([p, i]) => { const w = window.__ipa.panel(p); window.jupyterapp.shell.activateById(w.id);"
                      " w.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }",
                      [name, 1])
        cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
        widget = cell.locator(".jupyter-widgets", has_text="/ 8,000 tokens").first
        widget.wait_for(state="visible", timeout=30_000)
        text = widget.inner_text()
        assert "Context" in text and "[default]" in text
        assert "compacts above 6,000 (reserve 2,000)" in text
        assert "system + tools" in text
        assert "model openai:fake-model" in text and "0 compactions" in text
        box = widget.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 40
        ARTIFACTS.mkdir(exist_ok=True)
        shot = widget.screenshot(path=str(ARTIFACTS / "widget.png"))
        image = Image.open(io.BytesIO(shot)).convert("RGB")
        assert _has_colour(image, (0x9e, 0x9e, 0x9e)), "the system + tools segment is not drawn"
    finally:
        release.set()
    # the run ends: the output is the static view alone, with the final numbers
    static = cell.locator(".ipyagent-budget", has_text="recent tail (kept)")
    static.wait_for(state="visible", timeout=30_000)
    page.wait_for_function("(i) => !document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
                           ".querySelector('.jupyter-widgets')", arg=1, timeout=30_000)
    text = static.inner_text()
    assert "/ 8,000 tokens" in text and "compacts above 6,000 (reserve 2,000)" in text
    shot = static.screenshot(path=str(ARTIFACTS / "widget-static.png"))
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    assert _has_colour(image, (0x9e, 0x9e, 0x9e)), "the system + tools segment is not drawn"
    assert _has_colour(image, (0x3f, 0xb2, 0x7f)), "the recent-tail segment is not drawn"
    out = page.evaluate("([p]) => window.__ipa.outputs(window.__ipa.panel(p), 1)", [name])
    assert not [o for o in out if o.get("output_type") == "error"], out
    views = [o for o in out if "ipyagent-budget" in str((o.get("data") or {}).get("text/html"))]
    assert len(views) == 1 and "application/vnd.jupyter.widget-view+json" not in views[0]["data"]
    assert "/ 8,000 tokens" in views[0]["data"]["text/plain"]
    lab.shutdown_kernels()


def test_finished_runs_show_their_static_view_and_survive_a_reopen(jupyterlab, context):
    """Once a run ends its output is the static view alone. Saved and opened again without the
    kernel, every run shows its static view, not ipywidgets' "model not found"."""
    lab = jupyterlab
    name = "widget-freeze.ipynb"
    write_notebook(lab.root / name, [SETUP, "%%agent\nFirst question.", "%%agent\nSecond question."])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    for i in (1, 2):
        lab.fake.enqueue_text(f"Answer number {i}.")
        out = run_cell(page, name, i)
        assert not [o for o in out if o.get("output_type") == "error"], out
    for i in (1, 2):
        outputs = page.evaluate("([p, i]) => window.__ipa.outputs(window.__ipa.panel(p), i)", [name, i])
        views = [o for o in outputs if "ipyagent-budget" in str((o.get("data") or {}).get("text/html"))]
        assert len(views) == 1 and "application/vnd.jupyter.widget-view+json" not in views[0]["data"], outputs

    cells = page.locator(".jp-Notebook .jp-Cell")
    for i in (1, 2):
        static = cells.nth(i).locator(".ipyagent-budget")
        static.wait_for(state="visible", timeout=30_000)
        assert "[default]" in static.inner_text() and "tokens" in static.inner_text()

    # saved, the kernel gone, opened again: every run shows its static view, no dead widget
    save_notebook(page, name)
    deadline = time.time() + 20
    while (lab.root / name).read_text().count("ipyagent-budget") < 2 and time.time() < deadline:
        time.sleep(0.2)
    lab.shutdown_kernels()
    page.close()
    page = context.new_page()
    open_notebook(page, lab, name, reset=False)
    cells = page.locator(".jp-Notebook .jp-Cell")
    for i in (1, 2):
        cells.nth(i).locator(".ipyagent-budget").wait_for(state="visible", timeout=30_000)
        assert cells.nth(i).locator(".jupyter-widgets").count() == 0
        assert "model not found" not in cells.nth(i).inner_text().lower()
    assert "application/vnd.jupyter.widget-view+json" not in (lab.root / name).read_text()
    lab.shutdown_kernels()


def test_a_summary_shows_a_progress_bar_then_a_static_line(jupyterlab, context):
    """While a foreground summary is made (``%compact``; the fake provider holds the summary after
    its first tokens) the cell shows an ipywidgets progress bar with the tokens received; once it
    is done the saved output holds one static line and no widget."""
    lab = jupyterlab
    name = "summary-progress.ipynb"
    answer = "The table has one row per order, with the region and the amount. " * 70  # ~1,150 tokens
    write_notebook(lab.root / name, [SETUP, "%%agent\nDescribe the orders.", "%%agent\nAnd the regions?",
                                      "%compact"])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    for i in (1, 2):
        lab.fake.enqueue_text(answer)
        out = run_cell(page, name, i)
        assert not [o for o in out if o.get("output_type") == "error"], out
    release = threading.Event()
    lab.fake.enqueue_summary(Reply(text="## Goal\nSummarise the orders.\n\n## Progress\n- [x] regions", hold=release))
    try:
        page.evaluate("([p, i]) => { const w = window.__ipa.panel(p); window.jupyterapp.shell.activateById(w.id);"
                      " w.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }",
                      [name, 3])
        cell = page.locator(".jp-Notebook .jp-Cell").nth(3)
        line = cell.locator(".ipyagent-progress", has_text="Summarising").first
        try:
            line.wait_for(state="visible", timeout=60_000)
        except Exception:  # noqa: BLE001 - playwright's timeout: say what the cell shows instead
            raise AssertionError(f"no progress line; the cell shows: {cell.inner_text()!r}") from None
        bar = line.locator(".widget-hprogress .progress").first  # the bar's track (its fill grows with the tokens)
        box = bar.bounding_box()
        assert bar.is_visible() and box and box["width"] > 100, line.inner_html()
    finally:
        release.set()
    done = cell.locator(".ipyagent-progress-done", has_text="Summarised:")
    done.wait_for(state="visible", timeout=60_000)
    page.wait_for_function("(i) => !document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
                           ".querySelector('.ipyagent-progress')", arg=3, timeout=30_000)
    out = page.evaluate("([p, i]) => window.__ipa.outputs(window.__ipa.panel(p), i)", [name, 3])
    lines = [o for o in out if "Summarised:" in str((o.get("data") or {}).get("text/plain"))]
    assert len(lines) == 1 and "application/vnd.jupyter.widget-view+json" not in lines[0]["data"], out
    assert "tokens of summary in" in lines[0]["data"]["text/plain"]
    lab.shutdown_kernels()
