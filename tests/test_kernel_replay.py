"""Replay in REAL kernels: a recorded notebook re-runs offline with ``ipyagent run`` (no key, no
server), reproduces its session, never re-runs recorded tool calls unless asked, and names the
cell where a live run departs from the recording."""

from __future__ import annotations

import os
import re

import pytest
from kernel_support import fake_provider, notebook, outputs_text

from ipyagent import cli
from ipyagent.notebook.ipynb import read_notebook, write_notebook
from ipyagent.session.messages import text_of

CONFIG = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.tool_approval = 'auto'\n"
          "%config Agent.context_window = 3200\n%config Agent.reserve_tokens = 800\n"
          "%config Agent.keep_recent_tokens = 500\n")


def cells(marker_dir) -> list[str]:
    return [CONFIG] + [f"%%agent\nStep {i}: count the lines of the listing and note them. " + "please " * 30
                       for i in range(4)] + ["%compact keep the line counts"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """One recorded notebook for the module (recording starts kernels; it is the slow part)."""
    return _record(tmp_path_factory.mktemp("recording"))


@pytest.fixture
def record(recording):
    """A copy of the recording whose tool calls write their markers into ``tmp_path``."""
    def copy(tmp_path):
        src = tmp_path / "recorded.ipynb"
        text = recording.read_text().replace(str(recording.parent), str(tmp_path))
        src.write_text(text)
        return src

    return copy


def _record(tmp_path):
    src = tmp_path / "recorded.ipynb"
    with fake_provider() as server:
        for i in range(4):
            server.enqueue_tool_call("bash", {"command": f"echo ran >> {tmp_path}/marker-{i}.txt; seq 1 120"})
            server.enqueue_text(f"Step {i}: the listing has 120 lines. " + "noted " * 40)
        write_notebook(src, notebook(*cells(tmp_path)))
        assert cli.main(["run", str(src), "--timeout", "120"]) == 0
        assert server.summary_calls >= 2
    for marker in tmp_path.glob("marker-*.txt"):
        marker.unlink()
    return src


def path_messages(nb) -> list[tuple[str, str]]:
    store = nb["metadata"]["ipyagent"]
    session = store["sessions"][store["active"]]
    by_id = {e["id"]: e for e in session["entries"]}
    path, current = [], by_id.get(session["leaf"])
    while current is not None:
        path.append(current)
        current = by_id.get(current.get("parentId"))
    out = []
    for entry in reversed(path):
        if entry["type"] == "message":
            out.append((entry["message"]["role"], text_of(entry["message"]["content"]) if entry["message"]["role"] != "assistant"
                        else str([(b.get("type"), b.get("text") or b.get("name")) for b in entry["message"]["content"]])))
        elif entry["type"] == "compaction":
            # the artifact ledger names the entries it came from, and a replay makes new ids
            out.append(("compaction", re.sub(r"\[entry [0-9a-f]{8}\]", "[entry]", entry["summary"])))
    return out


def offline_env():
    return {k: os.environ.pop(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "IPYAGENT_MODEL") if k in os.environ}


def test_recorded_notebook_replays_offline_and_reproduces_its_session(record, tmp_path, capsys):
    src = record(tmp_path)
    recorded = read_notebook(src)
    saved = offline_env()
    try:
        out = tmp_path / "replayed.ipynb"
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    finally:
        os.environ.update(saved)
    replayed = read_notebook(out)
    assert path_messages(replayed) == path_messages(recorded)
    assert sum(1 for m in path_messages(replayed) if m[0] == "compaction") >= 2
    assert list(tmp_path.glob("marker-*.txt")) == []  # recorded tool calls were not re-run
    assert "Replaying this cell's recorded responses" in outputs_text(replayed["cells"][1]["outputs"])


def test_a_changed_prompt_names_the_cell_and_fails_without_a_provider(record, tmp_path, capsys):
    src = record(tmp_path)
    nb = read_notebook(src)
    nb["cells"][2]["source"] = "%%agent\nSomething else entirely."
    write_notebook(src, nb)
    saved = offline_env()
    try:
        assert cli.main(["run", str(src), "-o", str(tmp_path / "out.ipynb"), "--replay", "--timeout", "120"]) == 0
    finally:
        os.environ.update(saved)
    out = read_notebook(tmp_path / "out.ipynb")
    text = outputs_text(out["cells"][2]["outputs"])
    assert "Replay of cell cell-2 diverged" in text and "No live provider" in text


def test_replay_tools_runs_recorded_calls_again(record, tmp_path):
    src = record(tmp_path)
    saved = offline_env()
    try:
        assert cli.main(["run", str(src), "-o", str(tmp_path / "out.ipynb"), "--replay", "--replay-tools",
                         "--timeout", "120"]) == 0
    finally:
        os.environ.update(saved)
    assert sorted(p.name for p in tmp_path.glob("marker-*.txt")) == [f"marker-{i}.txt" for i in range(4)]
