"""Replay in REAL kernels: a recorded notebook re-runs offline with ``ipyagent run`` (no key, no
server), reproduces its session, never re-runs recorded tool calls unless asked, and names the
cell where a live run departs from the recording."""

from __future__ import annotations

import json
import os
import re

import pytest

from ipyagent import cli
from ipyagent.session.messages import text_of
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import fake_provider, notebook, path_of
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel

# The window leaves ~2,400 tokens above the reserve for the system prompt, the tools and the work:
# small enough for several compactions. Where the budget asks for them depends on what the system
# prompt (it holds the notebook's path) and the tool list weigh, so the recording may hold an
# automatic attempt whose summary was rejected (it would not shrink the context): replay skips it
# and compacts where the recording did (agent/replayer.py ReplayCompactions).
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
    store = assemble(nb["metadata"])
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
    assert json.dumps(assemble(replayed["metadata"])) == json.dumps(assemble(recorded["metadata"]))
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


def _stranger_notebook(tmp_path, secret_path):
    """A notebook from someone else: its recorded ``%%agent`` cell holds a ``read`` call of a file
    outside the notebook's folder, with no result, followed by a final answer."""
    from ipyagent.core import Session
    from ipyagent.session.messages import user_message
    from ipyagent.store.ipynb import write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    def answer(*content, stop):
        return {"role": "assistant", "content": list(content), "api": "openai-completions", "provider": "openai",
                "model": "fake-model", "usage": {"input": 50, "output": 10, "totalTokens": 60},
                "stopReason": stop, "timestamp": 1}

    session = Session()
    session.append_message(user_message("Show me the file, please.", cellId="cell-1", timestamp=1))
    session.append_message(answer({"type": "toolCall", "id": "call-read-1", "name": "read",
                                   "arguments": {"path": str(secret_path)}}, stop="toolUse"))
    session.append_message(answer({"type": "text", "text": "Here it is."}, stop="stop"))
    folder = tmp_path / "shared"
    folder.mkdir()
    nb = notebook("%load_ext ipyagent\n%config Agent.tool_approval = 'auto'", "%%agent\nShow me the file, please.")
    write_sessions_into_notebook(nb, NotebookSessions.from_session("default", session,
                                                                   {"model": "openai:fake-model"}))
    write_notebook(folder / "stranger.ipynb", nb)
    return folder / "stranger.ipynb"


def test_a_recorded_call_without_a_result_is_not_run_on_replay(tmp_path, capsys):
    secret = tmp_path / "private.txt"
    secret.write_text("PRIVATE-CONTENT-7f3a\n")
    src = _stranger_notebook(tmp_path, secret)
    out = tmp_path / "out.ipynb"
    saved = offline_env()
    try:
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    finally:
        os.environ.update(saved)
    assert "PRIVATE-CONTENT" not in out.read_text()  # the file was never read
    replayed = read_notebook(out)
    shown = outputs_text(replayed["cells"][1]["outputs"])
    assert "the recording has no result for tool call read (call-read-1)" in shown and "was not run" in shown
    store = assemble(replayed["metadata"])["sessions"]["default"]
    results = [e["message"] for e in store["entries"] if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert len(results) == 1 and results[0]["toolCallId"] == "call-read-1" and results[0]["isError"] is True
    assert text_of(results[0]["content"]) == "Not run: the user interrupted the run."  # as an interrupted call
    assert [e["message"]["role"] for e in path_of(store) if e["type"] == "message"] == [
        "user", "assistant", "toolResult", "assistant"]


def test_a_diverging_replay_puts_the_reset_notice_on_its_new_branch(record, tmp_path, capsys):
    src = record(tmp_path)
    nb = read_notebook(src)
    recorded = assemble(nb["metadata"])["sessions"]["default"]
    nb["cells"] = nb["cells"][:5]  # the setup and four %%agent cells
    nb["cells"][4]["source"] = "%%agent\nA question the recording never saw."
    write_notebook(src, nb)
    before = {e["id"]: e for e in recorded["entries"]}
    prompt4 = next(e for e in recorded["entries"] if e["type"] == "message" and e["message"].get("cellId") == "cell-4")
    with fake_provider() as server:  # a live provider takes over where the replay departs
        server.enqueue_text("A live answer.")
        out = tmp_path / "out.ipynb"
        assert cli.main(["run", str(src), "-o", str(out), "--replay", "--timeout", "120"]) == 0, capsys.readouterr().err
        live = [r.body for r in server.requests if "A question the recording never saw." in str(r.body)]
    store = assemble(read_notebook(out)["metadata"])["sessions"]["default"]
    entries = {e["id"]: e for e in store["entries"]}
    assert all(entries[i] == e for i, e in before.items())  # the recording is untouched
    resets = [e for e in store["entries"] if e.get("customType") == "ipyagent.kernel_reset"]
    assert len(resets) == 1
    assert resets[0]["parentId"] == prompt4["parentId"]  # where the replay departed, not a root
    path = path_of(store)
    after = [e for e in path[path.index(resets[0]) + 1:] if e["type"] == "message" and e["message"]["role"] == "user"]
    assert resets[0] in path and after[0]["message"]["content"] == "A question the recording never saw."
    assert [e["id"] for e in store["entries"] if e["parentId"] is None] == [store["entries"][0]["id"]]
    assert live and "namespace was reset" in str(live[0]["messages"])
