"""A real ``git merge`` of two branches that each added a ``%%agent`` turn in JupyterLab (issue 33,
item 5): with ``ipyagent git-setup``'s merge driver the merge succeeds, the merged notebook holds
both branches' cells and every entry of both, the session tree has two leaves with this branch's
active, it opens in JupyterLab, ``%agent tree`` shows the fork, and a third turn continues from
this branch's leaf."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat

from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from support.lab_pages import open_notebook, run_cell, run_text, save_notebook, saved_notebook
from support.lab_pages import write_notebook as write_lab_notebook

SETUP = "%load_ext ipyagent"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)


def session_of(nb: dict) -> dict:
    return assemble(nb["metadata"])["sessions"]["default"]


def a_turn_in_lab(page, lab, repo, name: str, prompt: str, answer: str) -> dict:
    """Add a %%agent cell to the notebook on disk (as the branch has it), run it in JupyterLab,
    save; the saved notebook."""
    path = repo / "merge.ipynb"
    nb = read_notebook(path)
    nb["cells"].append(nbformat.v4.new_code_cell(f"%%agent\n{prompt}", id=name))
    before = len(session_of(nb)["entries"])
    write_notebook(path, nb)
    lab_path = f"{repo.name}/merge.ipynb"
    open_notebook(page, lab, lab_path)
    run_cell(page, lab_path, 0)
    lab.fake.enqueue_text(answer)
    assert answer in run_text(page, lab_path, len(nb["cells"]) - 1)
    save_notebook(page, lab_path)
    saved = saved_notebook(path, lambda saved: len(session_of(saved)["entries"]) > before and any(
        c.get("id") == name and c.get("outputs") for c in saved["cells"]), what=f"the turn of {name}")
    # the branch's work is done: its kernel goes (a kernel kept across a checkout would carry this
    # branch's session into the other one)
    page.goto("about:blank")
    lab.shutdown_kernels()
    return saved


def test_a_git_merge_of_two_branches_that_each_added_a_turn_in_jupyterlab(jupyterlab, context):
    lab = jupyterlab
    repo = lab.root / "gitmerge"
    repo.mkdir()
    page = context.new_page()
    write_lab_notebook(repo / "merge.ipynb", [SETUP, "%%agent\nWhat is in the data?"])
    lab_path = f"{repo.name}/merge.ipynb"
    open_notebook(page, lab, lab_path)
    run_cell(page, lab_path, 0)
    lab.fake.enqueue_text("The data holds sales by region.")
    assert "sales by region" in run_text(page, lab_path, 1)
    save_notebook(page, lab_path)
    base = saved_notebook(repo / "merge.ipynb", lambda nb: "ipyagent" in nb["metadata"], what="the first turn")
    page.goto("about:blank")
    lab.shutdown_kernels()
    assert git(repo, "init", "-q", "-b", "main").returncode == 0
    setup = subprocess.run([sys.executable, "-m", "ipyagent", "git-setup"], cwd=repo, capture_output=True, text=True,
                           env={**os.environ, **GIT_ENV, "HOME": str(lab.root)})
    assert setup.returncode == 0, setup.stderr
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "base").returncode == 0

    git(repo, "checkout", "-qb", "theirs")
    theirs = session_of(a_turn_in_lab(page, lab, repo, "their-turn", "Which region grew most?", "The north grew most."))
    assert git(repo, "commit", "-qam", "their turn").returncode == 0
    git(repo, "checkout", "-q", "main")
    ours = session_of(a_turn_in_lab(page, lab, repo, "our-turn", "Plot sales by month.", "Here is the plot."))
    assert git(repo, "commit", "-qam", "our turn").returncode == 0
    page.close()

    merged_run = git(repo, "merge", "--no-edit", "theirs")
    assert merged_run.returncode == 0, merged_run.stdout + merged_run.stderr
    merged = read_notebook(repo / "merge.ipynb")
    nbformat.validate(nbformat.from_dict(merged))
    assert [c.get("id") for c in merged["cells"]][-2:] == ["our-turn", "their-turn"]
    session = session_of(merged)
    ids = {e["id"] for e in session["entries"]}
    assert {e["id"] for e in ours["entries"]} | {e["id"] for e in theirs["entries"]} == ids
    assert len(ids) == len(session["entries"])  # every entry once
    leaves = ids - {e["parentId"] for e in session["entries"]}
    assert leaves == {ours["leaf"], theirs["leaf"]} and session["leaf"] == ours["leaf"]
    assert len(session_of(base)["entries"]) < len(ours["entries"])

    # the merged notebook opens; %agent tree shows the fork; a third turn continues from our leaf
    merged["cells"].append(nbformat.v4.new_code_cell("%agent tree", id="tree"))
    merged["cells"].append(nbformat.v4.new_code_cell("%%agent\nSummarise both findings.", id="third"))
    write_notebook(repo / "merge.ipynb", merged)
    page = context.new_page()
    open_notebook(page, lab, lab_path)
    run_cell(page, lab_path, 0)
    tree = run_text(page, lab_path, len(merged["cells"]) - 2)
    assert "Which region grew most?" in tree and "Plot sales by month." in tree
    lab.fake.enqueue_text("North grew most; the monthly plot shows it.")
    assert "North grew most" in run_text(page, lab_path, len(merged["cells"]) - 1)
    save_notebook(page, lab_path)
    final = saved_notebook(repo / "merge.ipynb", lambda nb: any(
        c.get("id") == "third" and c.get("outputs") for c in nb["cells"]), what="the third turn")
    nbformat.validate(nbformat.from_dict(final))
    after = session_of(final)
    by_id = {e["id"]: e for e in after["entries"]}
    path, current = [], by_id[after["leaf"]]
    while current is not None:
        path.append(current["id"])
        current = by_id.get(current.get("parentId"))
    assert ours["leaf"] in path and theirs["leaf"] not in path  # it continued this branch's conversation
    assert ids <= set(by_id)
    page.close()
    assert json.dumps(final).count("Which region grew most?") >= 1
