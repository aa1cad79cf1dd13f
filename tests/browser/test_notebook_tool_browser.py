"""The agent writes the notebook, in a real JupyterLab: the ``notebook`` tool's ``insert_cell``
goes through the bridge (the labextension inserts the cell below the ``%%agent`` cell and acks with
its id while the cell still runs), and ``Agent.code_cells = "insert"`` leaves the agent's code as
cells that rebuild the namespace on *Restart & Run All* without a provider (the ``%%agent`` cell
replays, its tool calls are not run again)."""

from __future__ import annotations

import json

from support.lab_pages import open_notebook, run_cell, save_notebook, saved_notebook, write_notebook
from support.outputs import outputs_text

CELLS_JS = """(path) => {
  const p = window.__ipa.panel(path);
  const out = [];
  for (let i = 0; i < p.content.model.cells.length; i++) {
    const c = p.content.model.cells.get(i);
    out.push({id: c.id, type: c.type, source: c.sharedModel.getSource()});
  }
  return out;
}"""


def _cells(page, name):
    return page.evaluate(CELLS_JS, name)


def _saved_cells(path, want: int, timeout: float = 120):
    return saved_notebook(path, lambda nb: len(nb["cells"]) == want, timeout, what=f"{want} cells")["cells"]


def test_notebook_tool_inserts_a_cell_below_the_agent_cell(jupyterlab, context):
    lab, server = jupyterlab, jupyterlab.fake
    name = "insert.ipynb"
    path = lab.root / name
    write_notebook(path, ["%load_ext ipyagent\n%config Agent.tool_approval = 'auto'",
                           "%%agent\nLeave a note below this cell.", "print('the cell after')"])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    agent_cell = _cells(page, name)[1]["id"]

    server.enqueue_tool_call("notebook", {"action": "insert", "cell_type": "markdown",
                                          "source": "## A note from the agent"})
    server.enqueue_tool_call("notebook", {"action": "read"})
    server.enqueue_text("I left a note below.")
    out = run_cell(page, name, 1)
    assert "ERROR" not in outputs_text(out), out

    cells = _cells(page, name)
    assert [c["type"] for c in cells] == ["code", "code", "markdown", "code"], cells
    assert cells[1]["id"] == agent_cell
    assert cells[2]["source"] == "## A note from the agent"
    assert cells[3]["source"] == "print('the cell after')"
    # the labextension acknowledged while the cell ran, with the id the new cell has
    inserted, listing = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"][-2:]
    assert inserted == f"Inserted a markdown cell (id {cells[2]['id']}) below the running cell. It was not executed."
    # and read the live notebook (unsaved: the new cell is not on disk yet), the running cell marked
    assert listing.startswith("4 cells, from the live notebook in jupyterlab.")
    assert f"[1] id={agent_cell} code (the cell running you)\n%%agent\nLeave a note below this cell." in listing
    assert f"[2] id={cells[2]['id']} markdown\n## A note from the agent" in listing
    assert "[0] id=" in listing and "In[1]" in listing.split("\n\n")[1]

    save_notebook(page, name)
    saved = _saved_cells(path, 4)
    assert [(c["id"], c["cell_type"], "".join(c["source"])) for c in saved] == \
        [(c["id"], c["type"], c["source"]) for c in cells]
    lab.shutdown_kernels()


def test_code_cells_rebuild_the_namespace_on_run_all_without_a_provider(jupyterlab, context):
    lab, server = jupyterlab, jupyterlab.fake
    name = "codecells.ipynb"
    path = lab.root / name
    setup = "%load_ext ipyagent\n%config Agent.tool_approval = 'auto'\n%config Agent.code_cells = 'insert'"
    write_notebook(path, [setup, "%%agent\nPut the answer in a variable.",
                           "print('ANSWER', globals().get('answer_from_agent'))"])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    server.enqueue_tool_call("python", {"code": "answer_from_agent = 6 * 7"})
    server.enqueue_text("`answer_from_agent` holds the answer.")
    out = run_cell(page, name, 1)
    assert "ERROR" not in outputs_text(out), out

    cells = _cells(page, name)
    assert len(cells) == 4, cells
    inserted = cells[2]
    assert inserted["type"] == "code"
    marker, code = inserted["source"].split("\n", 1)
    assert marker.startswith("# from ipyagent ") and code == "answer_from_agent = 6 * 7"
    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    entry = next(e for e in meta["sessions"]["default"]["entries"] if e["id"] == marker.split()[-1])
    assert entry["message"]["role"] == "toolResult" and entry["message"]["toolName"] == "python"
    assert "ANSWER 42" in outputs_text(run_cell(page, name, 3))

    # No provider any more (a reader without a key), then Restart & Run All.
    page.evaluate(
        "(p) => window.__ipa.panel(p).content.model.cells.get(0).sharedModel.setSource("
        "'import os\\nfor k in (\"OPENAI_API_KEY\", \"OPENAI_BASE_URL\"):\\n    os.environ.pop(k, None)\\n' + "
        f"{json.dumps(setup)})", name)
    calls = len(server.requests)
    page.evaluate("""async (path) => {
        const p = window.__ipa.panel(path);
        await p.sessionContext.restartKernel();
        window.jupyterapp.shell.activateById(p.id);
        await window.jupyterapp.commands.execute('notebook:run-all-cells');
    }""", name)
    page.wait_for_function(
        f"() => JSON.stringify(window.__ipa.outputs(window.__ipa.panel({json.dumps(name)}), 3)).includes('ANSWER')",
        timeout=60_000)
    panel_outputs = "(i) => window.__ipa.outputs(window.__ipa.panel(%s), i)" % json.dumps(name)
    assert "ANSWER 42" in outputs_text(page.evaluate(panel_outputs, 3))
    agent_out = outputs_text(page.evaluate(panel_outputs, 1))
    assert "Replaying this cell's recorded responses" in agent_out, agent_out
    assert len(server.requests) == calls  # nothing reached a provider
    assert [c["id"] for c in _cells(page, name)] == [c["id"] for c in cells]  # nothing inserted again
    lab.shutdown_kernels()
