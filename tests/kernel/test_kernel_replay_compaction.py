"""Replay in REAL kernels compacts exactly where the recording compacted: a recorded automatic
attempt whose summary was rejected (it came back empty, so it left no entry) is
skipped, and the recorded compactions — automatic with a split turn, and a ``%compact`` cell's —
are made again at their places with their cuts, even when the replay's budget is not the
recording's (another window, a longer notebook path in the system prompt). The session in the
metadata comes back byte for byte.

The recording scripts the provider's usage, so where its budget asks for a compaction does not
depend on what the system prompt and the tool list weigh on this machine today: the first
automatic attempt comes before the last call of cell 2 and gets an empty summary (rejected);
the budget asks again after that call and compacts there, splitting the turn.
"""

from __future__ import annotations

import json

import pytest

from ipyagent import cli
from ipyagent.bridge.headless import kernel_environment
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import fake_provider, notebook, path_of
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel

WINDOW = 3800  # reserve 800: the budget asks above 3,000 tokens
CONFIG = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.tool_approval = 'auto'\n"
          f"%config Agent.context_window = {WINDOW}\n%config Agent.reserve_tokens = 800\n"
          "%config Agent.keep_recent_tokens = 500\n")
CELLS = [CONFIG,
         "%%agent\nList the numbers and say how many there are.",
         "%%agent\nNow look at three more listings, one after the other, and compare them. " + "carefully " * 20,
         "%%agent\nOne more listing, please, then a short report.",
         "%compact keep the counts",
         "%%agent\nAnd a last one."]
REJECTED = "the summarizer returned an empty summary"


def _usage(total: int) -> dict:
    return {"usage": {"input": total - 40, "output": 40, "cacheRead": 0, "cacheWrite": 0}}


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recording")
    src = folder / "recorded.ipynb"
    with fake_provider() as server:
        server.enqueue_summary("")  # the first attempt's summary: rejected
        script = [  # (command, usage) of each tool call, then (answer, usage)
            ([("seq 1 300", 1732)], ("There are 300 numbers. " + "noted " * 60, 2232)),
            ([("seq 1 200", 2323), ("seq 1 201", 2609), ("seq 1 202", 2897)],
             ("They have 200, 201 and 202 lines. " + "compared " * 60, 3322)),
            ([("seq 1 250", 2401)], ("Report: 250 lines. " + "done " * 60, 2822)),
            ([("seq 1 260", 2494)], ("Last: 260 lines. " + "finished " * 60, 2700)),
        ]
        for calls, (answer, total) in script:
            for command, used in calls:
                server.enqueue_tool_call("bash", {"command": command}, **_usage(used))
            server.enqueue_text(answer, **_usage(total))
        write_notebook(src, notebook(*CELLS))
        assert cli.main(["run", str(src), "--timeout", "120"]) == 0
        kinds = [r.kind for r in server.requests]
    nb = read_notebook(src)
    # the recording is the one this module is about: a rejected attempt before cell 2's last call
    # (its first summary request, empty, ends it), the automatic compaction after it, the %compact cell's
    assert kinds[:6] == ["chat"] * 5 + ["summary"] and kinds[6] == "chat", kinds
    assert REJECTED in outputs_text(nb["cells"][2]["outputs"])
    compactions = [e for e in path_of(_session(nb)) if e["type"] == "compaction"]
    assert [c.get("cellId") for c in compactions] == [None, "cell-4"]
    assert "split turn" in compactions[0]["summary"]
    return src


def _session(nb) -> dict:
    store = assemble(nb["metadata"])  # ipyagent run writes the labextension's layout
    return store["sessions"][store["active"]]


def _replay(src, out, capsys) -> dict:
    with kernel_environment(OPENAI_API_KEY=None, OPENAI_BASE_URL=None, IPYAGENT_MODEL=None):  # no provider
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    return read_notebook(out)


def test_a_recorded_rejected_attempt_replays_offline_and_the_session_comes_back_byte_for_byte(recording, capsys):
    recorded = read_notebook(recording)
    replayed = _replay(recording, recording.parent / "replayed.ipynb", capsys)
    assert json.dumps(replayed["metadata"]["ipyagent"]) == json.dumps(recorded["metadata"]["ipyagent"])
    shown = "\n".join(outputs_text(cell["outputs"]) for cell in replayed["cells"])
    assert "Replaying this cell's recorded responses" in shown
    assert "diverged" not in shown and REJECTED not in shown  # the attempt was skipped, not made again
    assert "Compacted (threshold)" in outputs_text(replayed["cells"][2]["outputs"])
    assert "Compacted:" in outputs_text(replayed["cells"][4]["outputs"])


@pytest.mark.parametrize("window", [WINDOW, 3600, 4200])
def test_a_longer_folder_and_another_window_still_reproduce_the_session(recording, tmp_path, capsys, window):
    """3,600: the budget asks where the recording did not compact; 4,200: it does not ask where
    the recording compacted. A longer folder makes the system prompt longer."""
    nb = read_notebook(recording)
    setup = "".join(nb["cells"][0]["source"])
    nb["cells"][0]["source"] = setup.replace(f"context_window = {WINDOW}", f"context_window = {window}")
    folder = tmp_path / ("a-much-longer-folder-name-for-the-same-notebook-" * 4)
    folder.mkdir()
    write_notebook(folder / "moved.ipynb", nb)
    replayed = _replay(folder / "moved.ipynb", folder / "replayed.ipynb", capsys)
    before, after = _session(nb), _session(replayed)
    for key in ("header", "leaf", "entries"):
        assert json.dumps(after[key]) == json.dumps(before[key]), key
    # the settings saved with the session are the replay's own: only the window changed
    assert after["settings"] == dict(before["settings"], context_window=window)
    if window == WINDOW:
        assert json.dumps(replayed["metadata"]["ipyagent"]) == json.dumps(nb["metadata"]["ipyagent"])
    assert "diverged" not in "\n".join(outputs_text(cell["outputs"]) for cell in replayed["cells"])
