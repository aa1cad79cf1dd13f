"""Issue 37, item 4, in a real JupyterLab: a session's saved settings come back for it after the
kernel is restarted from the page (the page pushes the notebook's sessions into the new kernel),
and the load says so in one line; the budget uses them (llama-cpp-python and the fake model
publish no window: before, it was unknown again after every restart)."""

from __future__ import annotations

import pytest

from support.lab_pages import open_notebook, run_cell, run_text, write_notebook
from support.outputs import outputs_text

pytestmark = pytest.mark.usefixtures("fresh_kernels")


def test_saved_settings_come_back_after_a_restart_from_the_page(jupyterlab, context):
    lab = jupyterlab
    name = "settings-restart.ipynb"
    write_notebook(lab.root / name, [
        "%load_ext ipyagent\n%config Agent.context_window = 4096\n%config Agent.max_tool_rounds = 4",
        "%%agent\nRemember the data.",
        "%load_ext ipyagent",
        "%agent status",
    ])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    lab.fake.enqueue_text("Noted.")
    assert "Noted." in run_text(page, name, 1)
    page.wait_for_function(  # the page stored the session with its settings
        "(p) => { const m = window.__ipa.meta(p); const s = m && m.sessions && m.sessions.default;"
        " return !!(s && s.settings && s.settings.context_window === 4096); }", arg=name, timeout=60_000)

    # the page's restart, then the load: the push reaches the new kernel before the cell
    loaded = outputs_text(page.evaluate("([p, i]) => window.__ipa.restartThenRun(p, i)", [name, 2]))
    assert ("ipyagent: session 'default': restored from this notebook: context_window 4,096, "
            "max_tool_rounds 4") in loaded.splitlines(), loaded
    status = run_text(page, name, 3)
    assert "/ 4,096 tokens" in status and "window restored from this notebook" in status, status
    assert "context window unknown" not in status
