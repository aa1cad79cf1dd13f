"""Session notebooks in the tools users already run, from PyPI, as commands (docs/pipelines.md):
plain papermill and ``nbconvert --execute`` replay a recorded notebook with no key (they send no
cell ids and hand the kernel no session), ``papermill --engine ipyagent`` runs live with
parameters and keeps the session in the output's metadata, a failing ``%%agent`` cell fails each
runner, ``nbconvert --to html`` shows the budget and the explorer offline, a fresh clone through
nbstripout's git filter (default settings: ids renumbered, outputs stripped) replays, and so does
a notebook jupytext regenerated from its paired script (new ids). Every notebook written is valid
nbformat. One recording (an ``ipyagent run`` against the fake provider) serves every test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ipyagent import cli
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from ipyagent.store.journal import JOURNAL_MIME
from kernel_support import SETUP, fake_provider, notebook
from support.outputs import outputs_text

# every runner here starts a kernel (in its own process: the audit hook sees only the runner)
pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.xdist_group("pipelines")]

PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "IPYAGENT_MODEL",
                "IPYAGENT_REPLAY", "JPY_SESSION_NAME")
ANSWERS = ["The sales figures grew 4% this quarter.", "Next, compare the regions.", "Revenue is up 7%."]
PROMPTS = ["%%agent\nSummarise the {topic} figures.", "%%agent\nAnd what next?"]


def tool(*args: str, cwd: Path, key: bool = False) -> subprocess.CompletedProcess:
    """``python -m TOOL ARGS`` as a user runs it: with no provider configured unless ``key`` (then
    the fake provider's, from this process's environment)."""
    env = dict(os.environ) if key else {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    env["PYTHONWARNINGS"] = "ignore"
    # a virtualenv over the system's packages: nbconvert's templates are under the base's share/jupyter
    shared = [p for p in (env.get("JUPYTER_PATH"), os.path.join(sys.base_prefix, "share", "jupyter")) if p]
    env["JUPYTER_PATH"] = os.pathsep.join(shared)
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)


def valid(path: Path) -> dict:
    nb = read_notebook(path)
    nbformat.validate(nbformat.from_dict(nb))
    return nb


def session_of(nb: dict) -> dict:
    return assemble(nb["metadata"])["sessions"]["default"]


def answers_shown(nb: dict) -> str:
    return "\n".join(outputs_text(c.get("outputs", [])) for c in nb["cells"])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A notebook recorded by ``ipyagent run`` (live, the fake provider): a parameters cell, two
    %%agent cells around a code cell, and the compaction explorer."""
    folder = tmp_path_factory.mktemp("recorded")
    nb = notebook(SETUP, 'topic = "sales"', PROMPTS[0], "x = 41 + 1", PROMPTS[1], "%agent explore --window 8000")
    nb["cells"][1]["metadata"]["tags"] = ["parameters"]
    path = folder / "analysis.ipynb"
    write_notebook(path, nb)
    with fake_provider() as server:
        for answer in ANSWERS[:2]:
            server.enqueue_text(answer)
        assert cli.main(["run", str(path), "--timeout", "120", "--quiet"]) == 0
    return path


@pytest.fixture
def work(recorded, tmp_path) -> Path:
    """A copy of the recording in a folder of its own."""
    shutil.copy(recorded, tmp_path / recorded.name)
    return tmp_path / recorded.name


def test_papermill_replays_with_no_key_and_its_lifted_session_is_the_recorded_one(work):
    recorded = session_of(read_notebook(work))
    done = tool("papermill", work.name, "out.ipynb", "--kernel", "python3", cwd=work.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    out = valid(work.parent / "out.ipynb")
    shown = answers_shown(out)
    assert ANSWERS[0] in shown and ANSWERS[1] in shown and "No API key" not in shown
    journals = [o for c in out["cells"] for o in c.get("outputs", []) if JOURNAL_MIME in o.get("data", {})]
    assert journals == []  # a replay that reproduces its recording adds nothing
    assert cli.main(["lift", str(work.parent / "out.ipynb")]) == 0
    lifted = session_of(valid(work.parent / "out.ipynb"))
    assert [e["id"] for e in lifted["entries"]] == [e["id"] for e in recorded["entries"]]
    assert lifted["leaf"] == recorded["leaf"]


def test_papermill_engine_runs_live_with_parameters_and_keeps_the_session_in_the_metadata(work):
    recorded = session_of(read_notebook(work))
    with fake_provider() as server:
        server.enqueue_text(ANSWERS[2])
        server.enqueue_text(ANSWERS[1])
        done = tool("papermill", "--engine", "ipyagent", work.name, "out.ipynb", "-p", "topic", "revenue",
                    "--kernel", "python3", cwd=work.parent, key=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = valid(work.parent / "out.ipynb")
    assert ["injected-parameters"] in [c["metadata"].get("tags") for c in out["cells"]]
    session = session_of(out)
    ids = [e["id"] for e in session["entries"]]
    assert set(e["id"] for e in recorded["entries"]) <= set(ids)  # the recording is kept, a branch beside it
    by_id = {e["id"]: e for e in session["entries"]}
    path, current = [], by_id[session["leaf"]]
    while current is not None:
        path.append(current)
        current = by_id.get(current.get("parentId"))
    prompts = [e["message"] for e in reversed(path) if e["type"] == "message" and e["message"]["role"] == "user"]
    assert [p.get("cellPrompt") or p["content"] for p in prompts] == [PROMPTS[0][8:], PROMPTS[1][8:]]
    assert all(p.get("cellId") for p in prompts) and prompts[0]["cellId"] == out["cells"][3]["id"]
    assert "'revenue'" in json.dumps(prompts[0]["content"])  # the parameter reached the prompt
    assert ANSWERS[2] in answers_shown(out)
    text = (work.parent / "out.ipynb").read_text()
    assert "widget-view" not in text and '"widgets"' not in text  # static views, no widget state


def test_a_failing_agent_cell_fails_papermill_nbconvert_and_ipyagent_run(tmp_path, work):
    fresh = tmp_path / "fresh.ipynb"  # nothing recorded, no key: the model call fails
    write_notebook(fresh, notebook(SETUP, "%%agent\nHello?", "print('never runs')"))
    done = tool("papermill", fresh.name, "fresh.out.ipynb", "--kernel", "python3", cwd=tmp_path)
    assert done.returncode != 0 and "AgentCellError" in done.stderr and "No API key" in done.stderr
    out = valid(tmp_path / "fresh.out.ipynb")
    assert "never runs" not in answers_shown(out)  # Run All stopped at the failing cell
    done = tool("nbconvert", "--to", "notebook", "--execute", fresh.name, "--output", "fresh.nbconvert.ipynb",
                cwd=tmp_path)
    assert done.returncode != 0 and "AgentCellError" in done.stderr
    # a recorded notebook whose prompt was edited, ids renumbered (nothing left to find it by):
    # replay should serve it, cannot, and says so rather than call a model with no key
    edited = read_notebook(work)
    for number, cell in enumerate(edited["cells"]):
        cell["id"] = str(number)
    edited["cells"][2]["source"] = "%%agent\nSummarise the costs instead."
    write_notebook(work, edited)
    done = tool("ipyagent", "run", work.name, "-o", "edited.out.ipynb", cwd=work.parent)
    assert done.returncode == 1 and "ReplayUnavailable" in done.stderr, done.stderr[-3000:]
    assert "no provider is configured" in done.stderr
    valid(work.parent / "edited.out.ipynb")


def test_nbconvert_execute_replays_and_its_html_shows_the_budget_and_the_explorer_offline(work):
    done = tool("nbconvert", "--to", "notebook", "--execute", work.name, "--output", "executed.ipynb",
                cwd=work.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    executed = valid(work.parent / "executed.ipynb")
    assert ANSWERS[0] in answers_shown(executed) and ANSWERS[1] in answers_shown(executed)
    done = tool("nbconvert", "--to", "html", work.name, "--output", "page", cwd=work.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (work.parent / "page.html").read_text()
    assert 'class="ipyagent-budget' in page and 'class="ipyagent-explore"' in page  # the static views
    assert "widget-state+json" not in page and "widget-view+json" not in page  # nothing drawn blank


def test_a_fresh_clone_through_nbstripouts_git_filter_replays(work, tmp_path):
    repo = work.parent
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for args in (["init", "-q"],):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    done = tool("nbstripout", "--install", cwd=repo)  # default settings
    assert done.returncode == 0, done.stderr
    for args in (["add", work.name], ["commit", "-qm", "recorded"], ["clone", "-q", str(repo), str(tmp_path / "clone")]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    clone = tmp_path / "clone" / work.name
    stripped = valid(clone)
    assert [c["id"] for c in stripped["cells"]] == [str(i) for i in range(len(stripped["cells"]))]
    assert all(not c.get("outputs") for c in stripped["cells"])
    recorded = session_of(stripped)  # the session is in the metadata: nbstripout keeps it
    done = tool("ipyagent", "run", work.name, cwd=clone.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    again = valid(clone)
    assert ANSWERS[0] in answers_shown(again)
    replayed = session_of(again)
    assert [e["id"] for e in replayed["entries"]] == [e["id"] for e in recorded["entries"]]
    assert replayed["leaf"] == recorded["leaf"]


def test_a_notebook_jupytext_regenerated_from_its_script_replays(work):
    folder = work.parent
    recorded = session_of(read_notebook(work))
    done = tool("jupytext", "--set-formats", "ipynb,py:percent", "--update-metadata",
                '{"jupytext": {"notebook_metadata_filter": "all"}}', work.name, cwd=folder)
    assert done.returncode == 0, done.stderr
    work.unlink()
    done = tool("jupytext", "--to", "ipynb", "analysis.py", cwd=folder)  # the .ipynb regenerated: new cell ids
    assert done.returncode == 0, done.stderr
    regenerated = valid(work)
    assert session_of(regenerated)["leaf"] == recorded["leaf"]
    done = tool("ipyagent", "run", work.name, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    again = valid(work)
    assert ANSWERS[1] in answers_shown(again)
    assert [e["id"] for e in session_of(again)["entries"]] == [e["id"] for e in recorded["entries"]]
