"""Messages that said different things, or nothing, about one fact (issue 37, item 7), in a REAL
kernel whose page gives the notebook's path in its hello_ack as JupyterLab does: one plain line each,
true everywhere."""

from __future__ import annotations

import nbformat
import pytest

from kernel_support import LiveKernel, fake_provider, outputs_text

pytestmark = pytest.mark.kernel

SETUP = "%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.show_widget = False"


def test_load_ext_the_notebook_path_compact_and_a_missing_variable(tmp_path, monkeypatch):
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "analysis.ipynb"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend="jupyterlab",
                                               path="analysis.ipynb") as k:
        loaded = outputs_text(k.run(SETUP, "setup").outputs)
        # no word about a missing push or path: the page's bridge is on its way (it pushes only
        # sessions it holds)
        assert loaded.strip() == "ipyagent: nothing stored to resume; the first %%agent cell starts the session."
        status = outputs_text(k.run("%agent status", "status").outputs)
        assert "bridge connected (jupyterlab)" in status and "notebook path: analysis.ipynb" in status, status
        context = outputs_text(k.run("%agent context", "context").outputs)
        assert f"- Notebook: {tmp_path / 'analysis.ipynb'}" in context, context  # not "unknown"

        compacted = outputs_text(k.run("%compact keep the revenue numbers per region", "compact").outputs)
        assert "Nothing to compact" in compacted and "Summary stopped" not in compacted, compacted

        server.enqueue_text("I have no figures for that.")
        asked = outputs_text(k.run("%%agent\nSummarise {by_region} for me.", "ask").outputs)
        note = ("left as written (no variable of that name in the kernel, whose namespace may be new): "
                "{by_region}")
        assert note in asked, asked  # the user reads it
        sent = server.requests[-1].body["messages"][-1]["content"]
        assert note in str(sent)  # and so does the model
