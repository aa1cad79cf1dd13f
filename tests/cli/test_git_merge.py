"""Notebooks in git: ``ipyagent git-setup`` and the merge driver under a real ``git merge`` of two
branches that each added a turn (each branch's cell and entries kept, two leaves, this branch's
active, every notebook valid), and the merge's rules where the branches disagree (a cell both
changed is kept twice; a session both started afresh is kept twice; nbdime merges where it can)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import nbformat

from ipyagent import cli
from ipyagent.store.chunks import assemble, chunk_keys, layout_of
from ipyagent.store.ipynb import new_notebook, read_notebook, sessions_from_notebook, write_notebook
from ipyagent.store.notebook_merge import MERGED_THEIRS_TAG, merge_notebooks
from ipyagent.store.schema import NotebookSessions
from ipyagent.store.validation import foreign_session_name
from support.builders import assistant, new_session, user

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": ""}


def git(repo, *args, check=True) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=check)


def code(source: str, cell_id: str) -> dict:
    return {"cell_type": "code", "id": cell_id, "metadata": {}, "execution_count": None, "outputs": [],
            "source": source}


def add_turn(path, prompt: str, cell_id: str) -> list[str]:
    """What a run of a new %%agent cell leaves in the notebook: the cell, and its turn's entries."""
    nb = read_notebook(path)
    sessions, _ = sessions_from_notebook(nb)
    session = sessions.to_session()
    before = {e["id"] for e in session.entries}
    session.append({"type": "message", "message": user(prompt) | {"cellId": cell_id}})
    session.append({"type": "message", "message": assistant(f"answer to {prompt}")})
    sessions.from_session("default", session)
    nb["cells"].append(code(f"%%agent\n{prompt}", cell_id))
    from ipyagent.store.ipynb import write_sessions_into_notebook

    write_notebook(path, write_sessions_into_notebook(nb, sessions))
    return [e["id"] for e in session.entries if e["id"] not in before]


def test_a_git_merge_of_two_branches_that_each_added_a_turn_keeps_both(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    session = new_session(user("first"), assistant("one"))
    nb = new_notebook([code("%load_ext ipyagent", "setup"), code("%%agent\nfirst", "first")])
    sessions = NotebookSessions.from_session("default", session, {"model": "openai:m"})
    from ipyagent.store.ipynb import write_sessions_into_notebook

    path = repo / "analysis.ipynb"
    write_notebook(path, write_sessions_into_notebook(nb, sessions, 4))
    old = cli.main  # git-setup from the repository's folder
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        env = {k: os.environ.get(k) for k in GIT_ENV}
        os.environ.update({**GIT_ENV, "HOME": str(tmp_path)})
        assert old(["git-setup"]) == 0
    finally:
        os.chdir(cwd)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert "added '*.ipynb merge=ipyagent'" in capsys.readouterr().out
    assert (repo / ".gitattributes").read_text() == "*.ipynb merge=ipyagent\n"
    assert "merge-driver %O %A %B %P" in git(repo, "config", "merge.ipyagent.driver").stdout
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "other")
    theirs = add_turn(path, "their question", "their-cell")
    git(repo, "commit", "-qam", "their turn")
    git(repo, "checkout", "-q", "main")
    ours = add_turn(path, "our question", "our-cell")
    git(repo, "commit", "-qam", "our turn")
    done = git(repo, "merge", "-q", "--no-edit", "other", check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    merged = read_notebook(path)
    nbformat.validate(nbformat.from_dict(merged))
    assert [c["id"] for c in merged["cells"]] == ["setup", "first", "our-cell", "their-cell"]
    assert layout_of(merged["metadata"]) == 4
    stored = assemble(merged["metadata"])["sessions"]["default"]
    ids = [e["id"] for e in stored["entries"]]
    assert set(ours) <= set(ids) and set(theirs) <= set(ids) and len(ids) == len(set(ids)) == 6
    assert stored["leaf"] == ours[-1]  # this branch's leaf is the active one
    leaves = set(ids) - {e["parentId"] for e in stored["entries"]}
    assert leaves == {ours[-1], theirs[-1]}  # the tree has both branches
    assert cli.main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def _nb(cells, session=None):
    nb = new_notebook(cells)
    if session is not None:
        nb["metadata"]["ipyagent"] = NotebookSessions.from_session("default", session, {}).to_dict()
    return nb


def _ids(taken):
    return f"copy{len(taken)}"


def test_a_cell_both_branches_changed_is_kept_twice_and_reported():
    base = _nb([code("x = 1", "a"), code("y = 2", "b")])
    ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
    ours["cells"][0]["source"] = "x = 10"
    theirs["cells"][0]["source"] = "x = 20"
    theirs["cells"][1]["source"] = "y = 3"  # changed on one side only: taken
    result = merge_notebooks(base, ours, theirs, _ids)
    sources = [(c["id"], c["source"]) for c in result.nb["cells"]]
    assert sources[0] == ("a", "x = 10") and sources[1][1] == "x = 20" and sources[2] == ("b", "y = 3")
    assert MERGED_THEIRS_TAG in result.nb["cells"][1]["metadata"]["tags"]
    assert len(result.conflicts) == 1 and not result.clean


def test_nbdime_merges_the_cells_where_it_can():
    base = _nb([code("x = 1", "a"), code("y = 2", "b")])
    ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
    ours["cells"][0]["source"] = "x = 10"
    theirs["cells"][1]["source"] = "y = 3"
    result = merge_notebooks(base, ours, theirs, _ids)
    assert result.clean and "cells merged by nbdime" in result.notes
    assert [c["source"] for c in result.nb["cells"]] == ["x = 10", "y = 3"]


def test_a_session_each_branch_started_afresh_is_kept_as_two():
    base = _nb([])
    ours_session, theirs_session = new_session(user("ours")), new_session(user("theirs"))
    result = merge_notebooks(base, _nb([], ours_session), _nb([], theirs_session), _ids)
    sessions, _ = sessions_from_notebook(result.nb)
    assert sessions.active == "default"
    assert [e["id"] for e in sessions.sessions["default"].entries] == [e["id"] for e in ours_session.entries]
    other = sessions.sessions[foreign_session_name("default", theirs_session.header["id"])]
    assert [e["id"] for e in other.entries] == [e["id"] for e in theirs_session.entries]


def test_a_layout_1_side_and_a_chunked_side_merge_into_layout_4_keeping_the_chunks(tmp_path):
    session = new_session(user("first"), assistant("one"))
    base = _nb([], session)
    ours = copy.deepcopy(base)
    theirs_session = copy.deepcopy(session)
    theirs_session.append({"type": "message", "message": user("more")})
    theirs = _nb([])
    from ipyagent.store.ipynb import write_sessions_into_notebook

    write_sessions_into_notebook(theirs, NotebookSessions.from_session("default", theirs_session, {}), 4)
    result = merge_notebooks(base, ours, theirs, _ids)
    metadata = result.nb["metadata"]
    assert layout_of(metadata) == 4
    assert set(chunk_keys(theirs["metadata"])) <= set(chunk_keys(metadata))
    assert [e["id"] for e in assemble(metadata)["sessions"]["default"]["entries"]] == \
        [e["id"] for e in theirs_session.entries]


PRE_COMMIT = """\
repos:
  - repo: local
    hooks:
      - id: ipyagent-lift
        name: ipyagent lift (journal outputs into the metadata)
        entry: ipyagent lift
        language: system
        files: \\.ipynb$
      - id: nbstripout
        name: nbstripout
        entry: nbstripout
        language: system
        files: \\.ipynb$
"""


def test_pre_commit_lifts_journals_before_nbstripout_strips_the_outputs(tmp_path):
    """The configuration docs/pipelines.md gives: a session only in journal outputs (a frontend
    without the bridge) would go with the outputs nbstripout strips; lifted first, it stays."""
    from ipyagent.display.journal_view import journal_bundle
    from ipyagent.store.journal import JOURNAL_MIME

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(PRE_COMMIT)
    session = new_session(user("hello"), assistant("hi"))
    data, meta = journal_bundle("default", session.header, session.leaf_id, {}, session.entries)
    cell = code("%%agent\nhello", "c1") | {"outputs": [{"output_type": "display_data", "data": data, "metadata": meta}]}
    write_notebook(repo / "vscode.ipynb", new_notebook([cell]))
    assert JOURNAL_MIME in (repo / "vscode.ipynb").read_text()
    git(repo, "add", "-A")
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path), "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    first = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert first.returncode == 1 and "files were modified by this hook" in first.stdout, first.stdout + first.stderr
    stripped = read_notebook(repo / "vscode.ipynb")
    assert stripped["cells"][0]["outputs"] == []
    stored = sessions_from_notebook(stripped)[0].sessions["default"]
    assert [e["id"] for e in stored.entries] == [e["id"] for e in session.entries]
    nbformat.validate(nbformat.from_dict(stripped))
    git(repo, "add", "-A")
    again = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr


def test_git_setup_after_nbdimes_config_makes_ipyagent_the_merge_driver_and_leaves_nbdimes_diff(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    for args in (["nbdime", "config-git", "--enable"], ["ipyagent", "git-setup"], ["ipyagent", "git-setup"]):
        done = subprocess.run([sys.executable, "-m", *args], cwd=repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    attributes = (repo / ".gitattributes").read_text()
    assert attributes.count("merge=ipyagent") == 1 and attributes.rstrip().endswith("*.ipynb merge=ipyagent")
    checked = git(repo, "check-attr", "merge", "diff", "--", "analysis.ipynb").stdout
    assert "merge: ipyagent" in checked and "diff: jupyternotebook" in checked
