"""The parts of a headless run that need no kernel: papermill's parameters convention
(``ipyagent run -p/-r/-f``), the static views a run writes, the ids it gives cells without one,
and how a kernel that no runner handed a session finds its notebook by the running cell's text."""

from __future__ import annotations

import json

import pytest

from ipyagent.bridge.headless import static_views, with_cell_ids
from ipyagent.bridge.parameters import ParameterError, inject_parameters, parameters_from_yaml, parse_value
from ipyagent.cli import build_parser
from ipyagent.cli.run_command import _parameters
from ipyagent.store.hydration import find_notebook_by_cell, runner_notebooks
from ipyagent.store.ipynb import new_notebook, write_notebook


def cell(source: str, cell_id: str, tags: list[str] | None = None) -> dict:
    return {"cell_type": "code", "id": cell_id, "metadata": {"tags": tags} if tags else {}, "execution_count": None,
            "outputs": [], "source": source}


def test_parameters_go_after_the_parameters_cell_as_papermill_puts_them(tmp_path):
    (tmp_path / "p.yaml").write_text("regions: [north, south]\nlimit: 3\nwhen: 2025-01-31\n")
    args = build_parser().parse_args(["run", "x.ipynb", "-f", str(tmp_path / "p.yaml"), "-p", "topic", "revenue",
                                      "-p", "limit", "5", "-p", "draft", "False", "-r", "code", "007"])
    values = _parameters(args)
    assert values == {"regions": ["north", "south"], "limit": 5, "when": values["when"], "topic": "revenue",
                      "draft": False, "code": "007"}
    nb = new_notebook([cell("%load_ext ipyagent", "a"), cell('topic = "sales"', "b", ["parameters"]),
                       cell("%%agent\nSummarise {topic}.", "c")])
    inject_parameters(nb, values)
    injected = nb["cells"][2]
    assert injected["metadata"]["tags"] == ["injected-parameters"] and injected["id"] == "injected-parameters"
    namespace: dict = {}
    exec(injected["source"], namespace)  # the cell is Python that assigns every value
    assert namespace["regions"] == ["north", "south"] and namespace["topic"] == "revenue"
    assert namespace["when"] == "2025-01-31" and namespace["code"] == "007" and namespace["draft"] is False
    inject_parameters(nb, {"topic": "costs"})  # a second run replaces the injected cell
    assert [c["metadata"].get("tags") for c in nb["cells"]].count(["injected-parameters"]) == 1
    assert "topic = 'costs'" in nb["cells"][2]["source"]
    plain = new_notebook([cell("x = 1", "a")])
    assert inject_parameters(plain, {"x": 2})["cells"][0]["metadata"]["tags"] == ["injected-parameters"]


def test_bad_parameters_are_clear_errors(tmp_path):
    assert [parse_value(v) for v in ("True", "None", "1.5", "12", "text")] == [True, None, 1.5, 12, "text"]
    with pytest.raises(ParameterError, match="not a Python name"):
        inject_parameters(new_notebook([]), {"not a name": 1})
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ParameterError, match="mapping"):
        parameters_from_yaml(tmp_path / "list.yaml")


def test_static_views_drop_widget_views_and_state_and_keep_the_static_ones():
    view = {"model_id": "m", "version_major": 2, "version_minor": 0}
    nb = new_notebook([cell("%%agent\nx", "a")])
    nb["cells"][0]["outputs"] = [
        {"output_type": "display_data", "metadata": {}, "data": {
            "application/vnd.jupyter.widget-view+json": view, "text/html": "<div class='ipyagent-budget'></div>",
            "text/plain": "budget"}},
        {"output_type": "display_data", "metadata": {}, "data": {"application/vnd.jupyter.widget-view+json": view}}]
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    assert static_views(nb) == 1
    first, second = nb["cells"][0]["outputs"]
    assert set(first["data"]) == {"text/html", "text/plain"}
    assert set(second["data"]) == {"application/vnd.jupyter.widget-view+json"}  # nothing else to show: kept
    assert "widgets" not in nb["metadata"]


def test_cells_without_ids_get_ids_as_nbformat_4_5_has_them():
    nb = {"nbformat": 4, "nbformat_minor": 4, "metadata": {},
          "cells": [{"cell_type": "code", "source": "x", "metadata": {}, "outputs": [], "execution_count": None},
                    cell("y", "kept")]}
    with_cell_ids(nb)
    ids = [c["id"] for c in nb["cells"]]
    assert ids[1] == "kept" and ids[0] and ids[0] != "kept" and nb["nbformat_minor"] == 5


def test_a_kernel_finds_its_notebook_by_the_running_cells_text(tmp_path):
    with_session = new_notebook([cell("%load_ext ipyagent", "a"), cell("%%agent\nWhat is in it?", "b"),
                                 cell("%%agent\nAgain", "c"), cell("%%agent\nAgain", "d")])
    with_session["metadata"]["ipyagent"] = {"version": 1, "active": "default", "sessions": {}}
    write_notebook(tmp_path / "analysis.ipynb", with_session)
    write_notebook(tmp_path / "other.ipynb", new_notebook([cell("%%agent\nWhat is in it?", "z")]))  # no session
    found = find_notebook_by_cell("%%agent\nWhat is in it?\n", tmp_path)
    assert found is not None and found.path.name == "analysis.ipynb"
    assert found.cell_ids["%%agent\nWhat is in it?"] == "b"
    assert "%%agent\nAgain" not in found.cell_ids  # two cells say it: no id can be told
    assert find_notebook_by_cell("%%agent\nNever typed", tmp_path) is None
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    assert find_notebook_by_cell("%%agent\nWhat is in it?", elsewhere) is None
    assert find_notebook_by_cell("%%agent\nWhat is in it?", elsewhere, [tmp_path / "analysis.ipynb"]) is not None


def test_the_runners_command_line_names_its_notebooks(tmp_path):
    """(Linux's /proc, where CI runs; elsewhere the kernel's folder is looked in only.)"""
    import subprocess
    import sys

    script = ("import json, sys; from ipyagent.store.hydration import runner_notebooks; "
              "print(json.dumps([str(p) for p in runner_notebooks()]))")
    runner = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {script!r}])"
    parent = subprocess.run([sys.executable, "-c", runner, "in.ipynb", "sub/out.ipynb"], cwd=tmp_path,
                            capture_output=True, text=True, check=True)
    assert json.loads(parent.stdout) == [str(tmp_path / "in.ipynb"), str(tmp_path / "sub" / "out.ipynb")]
    assert runner_notebooks(pid=10**9) == []  # no such process: none
