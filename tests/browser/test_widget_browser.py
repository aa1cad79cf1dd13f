"""The budget widget, rendered live by ipywidgets in a real JupyterLab: visible, with its numbers,
and its bar drawn in the segment colours. The screenshot is kept in ``artifacts/widget.png``."""

from __future__ import annotations

import io
import json
import time

from PIL import Image
from .test_bridge_browser import ARTIFACTS, _open, _save, _write_notebook

SETUP = ("%load_ext ipyagent\n%config Agent.context_window = 8000\n%config Agent.reserve_tokens = 2000\n"
         "%config Agent.keep_recent_tokens = 1000")


def _has_colour(image: Image.Image, rgb: tuple[int, int, int], tolerance: int = 12) -> bool:
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20)}
    return any(all(abs(c[i] - rgb[i]) <= tolerance for i in range(3)) for c in colours)


def test_budget_widget_is_visible_with_its_numbers(jupyterlab, context):
    lab = jupyterlab
    name = "widget.ipynb"
    _write_notebook(lab.root / name, [SETUP, "%%agent\nDescribe what you can do in two sentences."])
    page = context.new_page()
    _open(page, lab, name)
    page.evaluate("([p, i]) => window.__ipa.run(p, i)", [name, 0])
    lab.fake.enqueue_text("I can run Python in your kernel, read and edit files and run commands. "
                          "I keep the session in this notebook's metadata.")
    out = page.evaluate("([p, i]) => window.__ipa.run(p, i)", [name, 1])
    assert not [o for o in out if o.get("output_type") == "error"], out

    widget = page.locator(".jupyter-widgets", has_text="/ 8,000 tokens").first
    widget.wait_for(state="visible", timeout=30_000)
    text = widget.inner_text()
    assert "Context" in text and "[default]" in text
    assert "compacts above 6,000 (reserve 2,000)" in text
    assert "system + tools" in text and "recent tail (kept)" in text
    assert "model openai:fake-model" in text and "0 compactions" in text
    box = widget.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 40

    ARTIFACTS.mkdir(exist_ok=True)
    shot = widget.screenshot(path=str(ARTIFACTS / "widget.png"))
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    assert _has_colour(image, (0x9e, 0x9e, 0x9e)), "the system + tools segment is not drawn"
    assert _has_colour(image, (0x3f, 0xb2, 0x7f)), "the recent-tail segment is not drawn"
    # the static views travel with the widget output, for viewers without a kernel
    bundle = next(o for o in out if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {}))
    assert "/ 8,000 tokens" in bundle["data"]["text/plain"] and "ipyagent-budget" in bundle["data"]["text/html"]
    assert json.dumps(bundle).count("8,000") >= 2
    lab.shutdown_kernels()


def test_an_earlier_runs_widget_becomes_its_static_view_and_survives_a_reopen(jupyterlab, context):
    """JupyterLab applies the kernel's display update across cells: once the session's next run
    ends, the first run's output is the static view alone. Saved and opened again without the
    kernel, it shows the static view, not ipywidgets' "model not found".
    """
    lab = jupyterlab
    name = "widget-freeze.ipynb"
    _write_notebook(lab.root / name, [SETUP, "%%agent\nFirst question.", "%%agent\nSecond question."])
    page = context.new_page()
    _open(page, lab, name)
    page.evaluate("([p, i]) => window.__ipa.run(p, i)", [name, 0])
    for i in (1, 2):
        lab.fake.enqueue_text(f"Answer number {i}.")
        out = page.evaluate("([p, i]) => window.__ipa.run(p, i)", [name, i])
        assert not [o for o in out if o.get("output_type") == "error"], out
    first = page.evaluate("([p]) => window.__ipa.outputs(window.__ipa.panel(p), 1)", [name])
    views = [o for o in first if "ipyagent-budget" in str((o.get("data") or {}).get("text/html"))]
    assert len(views) == 1 and "application/vnd.jupyter.widget-view+json" not in views[0]["data"], first
    second = page.evaluate("([p]) => window.__ipa.outputs(window.__ipa.panel(p), 2)", [name])
    assert any("application/vnd.jupyter.widget-view+json" in (o.get("data") or {}) for o in second)

    cells = page.locator(".jp-Notebook .jp-Cell")
    static = cells.nth(1).locator(".ipyagent-budget")
    static.wait_for(state="visible", timeout=30_000)
    assert "[default]" in static.inner_text() and "tokens" in static.inner_text()

    # saved, the kernel gone, opened again: the frozen output is the static view, no dead widget
    _save(page, name)
    deadline = time.time() + 20
    while "ipyagent-budget" not in (lab.root / name).read_text() and time.time() < deadline:
        time.sleep(0.2)
    lab.shutdown_kernels()
    page.close()
    page = context.new_page()
    _open(page, lab, name, reset=False)
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.nth(1).locator(".ipyagent-budget").wait_for(state="visible", timeout=30_000)
    # the widget renderer has run on the page (cell 3 keeps the session's live widget, without a model now)
    cells.nth(2).locator(".jupyter-widgets").first.wait_for(state="attached", timeout=30_000)
    assert cells.nth(1).locator(".jupyter-widgets").count() == 0
    assert "model not found" not in cells.nth(1).inner_text().lower()
    lab.shutdown_kernels()
