"""Code as visible cells (``Agent.code_cells = "insert"``, ``%%agent --cells``): each successful
python call of a run becomes a marked code cell below the ``%%agent`` cell, and a replay of that
notebook rebuilds the namespace from those cells without running the recorded tools again (nor
inserting the cells a second time). Real kernels, the fake provider, ``ipyagent run``."""

from __future__ import annotations

import pytest

from ipyagent import cli
from ipyagent.bridge.headless import kernel_environment
from ipyagent.kernel.code_cells import MARKER_PREFIX, marked_source
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import SETUP, LiveKernel, fake_provider, notebook
from support.outputs import outputs_text


def test_marked_source():
    assert marked_source("ab12cd34", "x = 1\n") == "# from ipyagent ab12cd34\nx = 1"
    assert marked_source("ab12cd34", "%%bash\necho hi") == "%%bash\n# from ipyagent ab12cd34\necho hi"
    assert marked_source("ab12cd34", "%%timeit") == "%%timeit\n# from ipyagent ab12cd34"


@pytest.mark.kernel
def test_only_successful_python_calls_become_cells_and_only_when_asked(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + "%config Agent.tool_approval = 'auto'\n%config Agent.show_widget = False", "setup")
        server.enqueue_tool_calls([("python", {"code": "first = 1"}), ("python", {"code": "1 / 0"}),
                                   ("bash", {"command": "echo not python"}), ("python", {"code": "second = first + 1"})])
        server.enqueue_text("Done.")
        cell = k.run("%%agent --cells\nMake two variables.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        inserted = [item.cell for item in k.frontend.inserted]
        assert [c["source"].split("\n", 1)[1] for c in inserted] == ["first = 1", "second = first + 1"]
        entries = {e["id"]: e for e in k.metadata["sessions"]["default"]["entries"]}
        for c in inserted:
            marker = c["source"].split("\n", 1)[0]
            assert marker.startswith(MARKER_PREFIX)
            result = entries[marker[len(MARKER_PREFIX):]]["message"]
            assert result["role"] == "toolResult" and result["toolName"] == "python" and not result["isError"]
        assert [i.after for i in k.frontend.inserted] == ["c1", inserted[0]["id"]]  # in order, below c1

        server.enqueue_tool_call("python", {"code": "third = 3"})
        server.enqueue_text("Done.")
        k.run("%%agent\nOne more.", "c2")  # Agent.code_cells is "off" and no --cells: nothing inserted
        assert len(k.frontend.inserted) == 2


@pytest.mark.kernel
def test_a_replayed_notebook_rebuilds_the_namespace_from_the_inserted_cells(tmp_path, capsys):
    src, out = tmp_path / "recorded.ipynb", tmp_path / "replayed.ipynb"
    runs = tmp_path / "runs.txt"  # one line each time the agent's code runs
    code = f"spent = {{'Ada': 21.4}}\nprint(spent)\nwith open({str(runs)!r}, 'a') as f:\n    f.write('ran\\n')"
    with fake_provider() as server:
        server.enqueue_tool_call("python", {"code": code})
        server.enqueue_text("`spent` is in your namespace.")
        write_notebook(src, notebook(SETUP + "%config Agent.tool_approval = 'auto'\n%config Agent.code_cells = 'insert'",
                                     "%%agent\nTotal per customer.",
                                     "print('SPENT', globals().get('spent'))"))
        assert cli.main(["run", str(src), "--timeout", "120"]) == 0, capsys.readouterr().err
        calls = len(server.requests)
    recorded = read_notebook(src)
    cells = recorded["cells"]
    assert len(cells) == 4 and "".join(cells[2]["source"]).split("\n", 1) == [
        MARKER_PREFIX + cells[2]["source"][0].split()[-1], code]
    assert cells[2]["execution_count"] is None  # added by the runner, not executed
    assert runs.read_text() == "ran\n"

    with kernel_environment(OPENAI_API_KEY=None, OPENAI_BASE_URL=None):  # no provider: Run All replays the %%agent cell
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    replayed = read_notebook(out)
    assert [c["id"] for c in replayed["cells"]] == [c["id"] for c in cells]  # nothing inserted again
    assert "Replaying this cell's recorded responses" in outputs_text(replayed["cells"][1]["outputs"])
    assert replayed["cells"][2]["execution_count"] is not None
    assert "{'Ada': 21.4}" in outputs_text(replayed["cells"][2]["outputs"])  # the inserted cell ran the code
    assert "SPENT {'Ada': 21.4}" in outputs_text(replayed["cells"][3]["outputs"])
    assert len(server.requests) == calls
    assert runs.read_text() == "ran\nran\n"  # once by the recorded run, once by the inserted cell
