"""The ``notebook`` tool: reading cells and inserting new ones, through its port — the tool's own
behaviour against a port that records, the kernel's port without a bridge (IPython's
``set_next_input``, the saved file and the kernel's history), and ``ipyagent run`` answering
``insert_cell`` through the bridge (the cells land in the output notebook, not executed)."""

from __future__ import annotations

import json

import pytest
from IPython.testing import globalipapp

from ipyagent.agent.tools import ToolContext, get_tool, run_tool_call
from ipyagent.agent.tools.notebook_port import CellsView, InsertedCell, NotebookCell, NotebookUnavailable
from ipyagent.bridge.headless import CellInsertion, execute_notebook, place_inserted_cells
from ipyagent.kernel.ports.notebook_access import MAX_OUTPUT_TEXT, KernelNotebook
from ipyagent.kernel.ports.notebook_access import outputs_text as saved_outputs_text
from ipyagent.store.ipynb import write_notebook
from kernel_support import SETUP, fake_provider, notebook
from support.outputs import outputs_text


class RecordingPort:
    """A port that keeps what it is asked (the real ones are exercised below and in the browser)."""

    def __init__(self, confirmed=True, fail=None):
        self.inserted: list[tuple[str, str]] = []
        self.confirmed = confirmed
        self.fail = fail

    def read_cells(self):
        return CellsView([NotebookCell("a1", "markdown", "# Title"),
                          NotebookCell("b2", "code", "x = 1\nx", "1", 3),
                          NotebookCell("c3", "code", "%%agent\nhi", "long " * 1000, 4)],
                         "the live notebook in jupyterlab", running_cell="c3")

    def insert_cell(self, cell_type, source):
        if self.fail:
            raise NotebookUnavailable(self.fail)
        self.inserted.append((cell_type, source))
        return InsertedCell("new-1", "below the running cell", confirmed=self.confirmed)


def nb_tool(port, **arguments):
    return get_tool("notebook").run(arguments, ToolContext(notebook=port))


def test_read_lists_every_cell_or_one():
    port = RecordingPort()
    out = nb_tool(port, action="read")
    assert not out.is_error
    head, first, second, third = out.text.split("\n\n", 3)
    assert head == "3 cells, from the live notebook in jupyterlab."
    assert first == "[0] id=a1 markdown\n# Title"
    assert second == "[1] id=b2 code In[3]\nx = 1\nx\n--- outputs ---\n1"
    assert third.startswith("[2] id=c3 code In[4] (the cell running you)\n%%agent\nhi\n--- outputs ---\nlong ")
    assert "characters of output not shown" in third
    one = nb_tool(port, action="read", cell_id="b2")
    assert one.text.startswith("Cell b2, from the live notebook in jupyterlab.\n\n[1] id=b2 code")
    missing = nb_tool(port, action="read", cell_id="zz")
    assert missing.is_error and "Cell ids: a1, b2, c3" in missing.text


def test_insert_says_what_happened():
    port = RecordingPort()
    out = nb_tool(port, action="insert", cell_type="markdown", source="## Notes")
    assert out.text == "Inserted a markdown cell (id new-1) below the running cell. It was not executed."
    assert out.details == {"cell_id": "new-1", "cell_type": "markdown", "confirmed": True}
    assert port.inserted == [("markdown", "## Notes")]
    pending = nb_tool(RecordingPort(confirmed=False), action="insert", source="print(1)")
    assert pending.text.startswith("Requested a code cell (id new-1) below the running cell; the notebook adds it.")
    assert nb_tool(port, action="insert", cell_type="raw", source="x").is_error
    assert nb_tool(port, action="insert").is_error
    assert nb_tool(RecordingPort(fail="no way here"), action="insert", source="x").text == "no way here"
    assert nb_tool(None, action="read").is_error


def test_read_runs_freely_insert_asks_first():
    tool, asked = get_tool("notebook"), []
    ctx = ToolContext(notebook=RecordingPort())

    def approve(name, arguments):
        asked.append(arguments["action"])
        return False

    assert not run_tool_call(tool, {"action": "read"}, ctx, policy="ask", approve=approve).is_error
    refused = run_tool_call(tool, {"action": "insert", "source": "x"}, ctx, policy="ask", approve=approve)
    assert refused.is_error and "declined" in refused.text
    assert asked == ["insert"] and ctx.notebook.inserted == []
    headless = run_tool_call(tool, {"action": "insert", "source": "x"}, ctx, policy="ask", approve=None)
    assert headless.is_error and "tool_approval" in headless.text


# ---- the kernel's port without a bridge --------------------------------------------------------


@pytest.fixture
def shell():
    globalipapp.start_ipython()
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    ip.user_ns.pop("__session__", None)
    ip.rl_next_input = None


def test_without_a_bridge_cells_go_to_set_next_input_in_order(shell):
    port = KernelNotebook(shell, bridge=lambda: None)
    first = port.insert_cell("code", "a = 1\n")
    assert shell.rl_next_input == "a = 1" and first.cell_id is None and not first.confirmed
    port.insert_cell("markdown", "Some *notes*\n\nmore")
    assert shell.rl_next_input == "a = 1\n\n# Some *notes*\n#\n# more"
    alone = KernelNotebook(shell, bridge=lambda: None)
    shell.run_cell("pass", store_history=True)  # the next run of a cell starts a new group
    alone.insert_cell("markdown", "# Heading")
    assert shell.rl_next_input == "%%markdown\n# Heading"


def test_a_markdown_note_without_a_bridge_renders_no_raw_html_when_run(shell):
    """The ``%%markdown`` next input is run by the user into a trusted output, which the frontend
    renders with raw HTML: the model's note goes in with none that can take effect (issue 19)."""
    from IPython.utils.capture import capture_output

    from support.hostile import HOSTILE, audit_html, markdown_oracles

    markdown_tags = {"p", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "h1", "h2", "h3", "h4",
                     "h5", "h6", "hr", "br", "a", "table", "thead", "tbody", "tr", "th", "td", "del", "s"}
    shell.run_cell("pass", store_history=True)
    KernelNotebook(shell, bridge=lambda: None).insert_cell("markdown", "A note.\n\n" + HOSTILE)
    source = shell.rl_next_input
    assert source.startswith("%%markdown\nA note.")
    formats = shell.display_formatter.active_types
    shell.display_formatter.active_types = [*formats, "text/markdown"]  # as a kernel formats it
    try:
        with capture_output() as cap:
            shell.run_cell(source)  # what the user does with the inserted cell
    finally:
        shell.display_formatter.active_types = formats
    markdown = "".join(o.data["text/markdown"] for o in cap.outputs if "text/markdown" in o.data)
    assert "A note." in markdown and "window.__pwned" in markdown  # the text is all there, shown
    for name, render in markdown_oracles().items():
        rendered = render(markdown)
        assert not audit_html(rendered, markdown_tags), (name, rendered)


def test_read_without_a_live_notebook_is_the_saved_file_and_the_history(shell, tmp_path):
    path = tmp_path / "analysis.ipynb"
    nb = notebook("print('hi')", "%%agent\nLook at my notebook.")
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]},
                                 {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}}]
    nb["cells"][0]["execution_count"] = 1
    write_notebook(path, nb)
    shell.user_ns["__session__"] = str(path)
    shell.run_cell("history_probe = 6 * 7\nhistory_probe", store_history=True)
    view = KernelNotebook(shell, bridge=lambda: None).read_cells()
    assert view.origin.startswith("analysis.ipynb as last saved on disk")
    saved = view.cells[:2]
    assert [(c.id, c.cell_type, c.source, c.outputs, c.execution_count) for c in saved] == [
        ("cell-0", "code", "print('hi')", "hi\n[image/png output]", 1),
        ("cell-1", "code", "%%agent\nLook at my notebook.", "", None)]
    history = [c for c in view.cells if c.id.startswith("In[")]
    probe = next(c for c in history if "history_probe" in c.source)
    assert probe.outputs == "42" and probe.id == f"In[{probe.execution_count}]"


def test_read_shows_the_values_as_they_were_shown_and_runs_no_repr_again(shell):
    """A value's __repr__ may be slow (it held a cell for 30 s) or change: the history's text is the
    one the cell showed when it ran, cut to the output limit (issue 19)."""
    shell.run_cell("class CountedRepr:\n"
                   "    calls = 0\n"
                   "    def __repr__(self):\n"
                   "        CountedRepr.calls += 1\n"
                   "        return f'counted #{CountedRepr.calls} ' + 'x' * 20000\n", store_history=True)
    shell.run_cell("CountedRepr()", store_history=True)
    counted = shell.user_ns["CountedRepr"]
    assert counted.calls == 1  # the cell showed it once
    view = KernelNotebook(shell, bridge=lambda: None).read_cells()
    cell = next(c for c in view.cells if c.source == "CountedRepr()")
    assert counted.calls == 1  # and reading the notebook did not run it again
    assert cell.outputs.startswith("counted #1 xxx") and cell.outputs.endswith("\n… (cut)")
    assert len(cell.outputs) == MAX_OUTPUT_TEXT + len("\n… (cut)")


def test_saved_outputs_as_text():
    assert saved_outputs_text([
        {"output_type": "error", "ename": "ValueError", "evalue": "bad"},
        {"output_type": "execute_result", "data": {"text/plain": ["1", "2"]}},
        {"output_type": "display_data", "data": {"application/vnd.ipyagent.entries+json": {}, "text/markdown": "x"}},
    ]) == "ValueError: bad\n12\n[ipyagent: this run's session entries]"


def test_placing_inserted_cells_in_order():
    cells = [{"id": "a"}, {"id": "run"}, {"id": "z"}]
    place_inserted_cells(cells, [
        CellInsertion({"id": "n1"}, after="run", anchor="run"),
        CellInsertion({"id": "n2"}, after="n1", anchor="run"),
        CellInsertion({"id": "n3"}, after="gone", anchor="run"),  # falls back to the running cell
        CellInsertion({"id": "a"}, after="gone", anchor="gone"),  # id taken, anchor gone: at the end
    ])
    ids = [c["id"] for c in cells]
    assert ids[:5] == ["a", "run", "n3", "n1", "n2"] and ids[5] == "z" and ids[6] not in ("a", "n1")


# ---- ipyagent run answers insert_cell ------------------------------------------------------------


@pytest.mark.kernel
def test_headless_run_adds_the_cells_after_the_agent_cell_not_executed(tmp_path):
    with fake_provider() as server:
        server.enqueue_tool_calls([("notebook", {"action": "insert", "cell_type": "markdown", "source": "## Plan"}),
                                   ("notebook", {"action": "insert", "source": "print('step one')"})])
        server.enqueue_tool_call("notebook", {"action": "read"})
        server.enqueue_text("Two cells are below.")
        nb = notebook(SETUP + "%config Agent.tool_approval = 'auto'", "%%agent\nPlan it in cells.", "x = 'last'")
        outcome = execute_notebook(nb, timeout=120, cwd=str(tmp_path))
        assert outcome.ok, outcome.error
    cells = outcome.nb["cells"]
    assert [c["id"] for c in cells[:2]] == ["cell-0", "cell-1"] and cells[-1]["id"] == "cell-2"
    assert [(c["cell_type"], c["source"]) for c in cells[2:4]] == [("markdown", "## Plan"),
                                                                    ("code", "print('step one')")]
    assert cells[3]["execution_count"] is None and cells[3]["outputs"] == []
    results = [e["message"] for e in outcome.nb["metadata"]["ipyagent"]["sessions"]["default"]["entries"]
               if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    texts = [r["content"][0]["text"] for r in results]
    assert texts[0] == (f"Requested a markdown cell (id {cells[2]['id']}) below the running cell; the notebook adds "
                        "it. It is not executed.")
    assert f"(id {cells[3]['id']}) below the cell inserted before it" in texts[1]
    # the headless runner does not answer read_cells: the kernel's history stands in
    assert texts[2].startswith("2 cells, from this kernel's input history") and "Plan it in cells." in texts[2]
    assert "Two cells are below." in outputs_text(cells[1]["outputs"])
    assert json.dumps(outcome.nb).count("step one") >= 2  # the cell, and the session's record of the call
