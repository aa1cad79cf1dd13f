"""The compaction explorer in a real JupyterLab: keyboard on the keep-recent slider moves the cut
point (the number in the DOM is the kernel's own plan for the new value), the view is kept as the
output's static HTML in the saved notebook, and "compact now" asks first, then compacts through
the fake provider and the bridge saves the compaction entry; the explorer opens at the session's
values (the page snaps sliders to their steps and sends the snapped values back). The screenshot is kept in
``artifacts/explorer.png``."""

from __future__ import annotations

import pytest

from ipyagent.store.chunks import assemble
from support.lab_pages import ARTIFACTS, open_notebook, run_cell, save_notebook, saved_notebook, write_notebook
from support.outputs import output_line

SETUP = ("%load_ext ipyagent\n%config Agent.context_window = 8000\n%config Agent.reserve_tokens = 2000\n"
         "%config Agent.keep_recent_tokens = 300\n%config Agent.notebook_context = False")
QUESTIONS = [f"%%agent\nQuestion {i}: what do the readings of station {i} say?" for i in range(4)]
EXPLORE = "%agent explore"
CHECK = ("from ipyagent.compaction.settings import CompactionSettings\n"
         "from ipyagent.kernel.extension import get_runtime\n"
         "s = get_runtime(get_ipython()).slot().session\n"
         "def cut(keep):\n"
         "    plan = s.prepare_compaction(CompactionSettings(2000, keep))\n"
         "    return plan.first_kept_index + 1 if plan else None\n"
         "print('CUT', cut(int(KEEP)))\n"
         "print('LAST', s.path()[-1]['type'])")

pytestmark = pytest.mark.usefixtures("fresh_kernels")


def _answer(i: int) -> str:
    return (f"Station {i}: the readings are steady, between 4 and 7 °C, with one dry week. "
            + "The rain gauge and the thermometer agree with the neighbouring stations. " * 6)


def _cut(page) -> str:
    return page.locator(".ipyagent-explore-cut").first.inner_text().strip()


def _keep_value(page) -> int:
    text = page.locator(".ipyagent-explore-keep .widget-readout").first.inner_text()
    return int(text.replace(",", "").strip())


def _explorer_output(nb):
    for output in nb["cells"][1 + len(QUESTIONS)]["outputs"]:
        html = (output.get("data") or {}).get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        if 'class="ipyagent-explore"' in html:
            return output, html
    return None, ""


def test_keep_recent_slider_moves_the_cut_and_the_view_is_saved(jupyterlab, context):
    lab = jupyterlab
    name = "explorer.ipynb"
    path = lab.root / name
    check_cell = 2 + len(QUESTIONS)
    write_notebook(path, [SETUP, *QUESTIONS, EXPLORE, CHECK.replace("KEEP", "0")])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    for i in range(len(QUESTIONS)):
        lab.fake.enqueue_text(_answer(i))
        out = run_cell(page, name, 1 + i)
        assert not [o for o in out if o.get("output_type") == "error"], out
    out = run_cell(page, name, 1 + len(QUESTIONS))
    assert not [o for o in out if o.get("output_type") == "error"], out

    widget = page.locator(".ipyagent-explore-widget").first
    widget.wait_for(state="visible", timeout=90_000)
    page.locator(".ipyagent-explore-cut").first.wait_for(state="visible", timeout=90_000)
    first_cut, first_keep = _cut(page), _keep_value(page)
    assert first_keep == 300 and first_cut.isdigit()

    # the keyboard on the slider's handle: each key press is one step of keep-recent
    handle = page.locator(".ipyagent-explore-keep .noUi-handle").first
    handle.focus()
    for _ in range(80):
        handle.press("ArrowRight")
        keep = _keep_value(page)
        # the kernel re-planned for this value and drew it
        page.locator(f'.ipyagent-explore-numbers[data-keep-recent="{keep}"]').first.wait_for(timeout=90_000)
        if _cut(page) != first_cut:
            break
    moved_cut, moved_keep = _cut(page), _keep_value(page)
    assert moved_keep > first_keep and moved_cut != first_cut, (first_cut, moved_cut, moved_keep)

    # the number on screen is the kernel's plan for the value on screen
    page.evaluate("([p, i, src]) => { const c = window.__ipa.panel(p).content.widgets[i];"
                  " c.model.sharedModel.setSource(src); }",
                  [name, check_cell, CHECK.replace("KEEP", str(moved_keep))])
    out = run_cell(page, name, check_cell)
    assert output_line(out, "CUT") == moved_cut

    ARTIFACTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 1300})  # the whole panel in one picture
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(ARTIFACTS / "explorer.png"))
    box = widget.bounding_box()
    assert box and box["width"] > 400 and box["height"] > 200
    assert page.locator(".ipyagent-explore-cutmark").count() == 1

    # keep this view as the output's static HTML, save, and read the file
    page.get_by_role("button", name="Keep this view in the notebook").click()
    page.locator(".ipyagent-explore-widget", has_text="now shows these settings").first.wait_for(timeout=90_000)
    save_notebook(page, name)
    saved = saved_notebook(path, lambda nb: f"keep-recent {moved_keep:,}" in _explorer_output(nb)[1])
    output, html = _explorer_output(saved)
    assert f'data-cut-index="{int(moved_cut) - 1}"' in html
    assert "application/vnd.jupyter.widget-view+json" in output["data"]
    assert "What the summariser would receive" in html and "Cut point: entry" in "".join(output["data"]["text/plain"])

    # compact now: it asks first; then the fake provider summarises and the bridge saves the entry
    page.get_by_role("button", name="Compact now with these settings…").click()
    page.get_by_role("button", name="Yes, compact").wait_for(state="visible", timeout=90_000)
    page.locator(".ipyagent-explore-widget", has_text="Compact session default now?").first.wait_for(timeout=90_000)
    summaries = lab.fake.summary_calls
    page.get_by_role("button", name="Yes, compact").click()
    page.locator(".ipyagent-explore-widget", has_text="Compacted:").first.wait_for(timeout=60_000)
    assert lab.fake.summary_calls > summaries
    page.locator(".ipyagent-explore-numbers", has_text="just compacted").first.wait_for(timeout=90_000)
    out = run_cell(page, name, check_cell)
    assert output_line(out, "LAST") == "compaction"
    save_notebook(page, name)
    saved = saved_notebook(path, lambda nb: any(  # the store as one value, whatever its layout
        e["type"] == "compaction" for e in assemble(nb["metadata"]).get("sessions", {})
        .get("default", {}).get("entries", [])))
    assert assemble(saved["metadata"])["sessions"]["default"]["entries"][-1]["type"] == "compaction"


def _readout(page, part: str) -> int:
    text = page.locator(f".ipyagent-explore-{part} .widget-readout").first.inner_text()
    return int(text.replace(",", "").strip())


def test_the_explorer_opens_at_the_sessions_values(jupyterlab, context):
    # issue 37: with 4,096 / 1,024 / 1,250 the page snapped the sliders to their 50- and 20-token
    # steps (4,100, 1,000, 1,260) and sent those back: the explorer planned for other values than
    # the session's, and said "compacts above 3,100" beside the widget's 3,072
    lab = jupyterlab
    name = "explorer-values.ipynb"
    setup = ("%load_ext ipyagent\n%config Agent.context_window = 4096\n%config Agent.reserve_tokens = 1024\n"
             "%config Agent.keep_recent_tokens = 1250\n%config Agent.notebook_context = False")
    write_notebook(lab.root / name, [setup, QUESTIONS[0], EXPLORE])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    lab.fake.enqueue_text(_answer(0))
    assert not [o for o in run_cell(page, name, 1) if o.get("output_type") == "error"]
    run_cell(page, name, 2)
    page.locator(".ipyagent-explore-widget").first.wait_for(state="visible", timeout=90_000)
    page.locator(".ipyagent-explore-widget .ipyagent-explore-numbers").first.wait_for(state="visible", timeout=90_000)
    assert (_readout(page, "window"), _readout(page, "reserve"), _readout(page, "keep")) == (4096, 1024, 1250)
    numbers = page.locator(".ipyagent-explore-widget .ipyagent-explore-numbers").first
    # the kernel's plan is for those values (the page sent back none of its own)
    assert (numbers.get_attribute("data-window"), numbers.get_attribute("data-reserve"),
            numbers.get_attribute("data-keep-recent")) == ("4096", "1024", "1250")
    assert "compacts above 3,072 tokens" in numbers.inner_text()
