"""Replay without cell ids, in-process (issue 33, item 1): a recorded turn is found by what was
typed — the prompt as written, at the cell's place among the agent cells run — when the runner
sends no cell id (nbclient, papermill, nbconvert) or ids the recording does not know (nbstripout's
``0, 1, …``, jupytext's new ones); a prompt repeated in two cells replays each one's own answer;
the session stays as recorded; a cell replay should serve and cannot fails, saying why."""

from __future__ import annotations

import pytest

from ipyagent.kernel.cell_run import ReplayUnavailable
from ipyagent.kernel.replay_control import ReplayController
from support.shell import run, runtime_of

PROMPTS = ["What is in the data?", "Which region grew most?", "What is in the data?"]
ANSWERS = ["Sales by region.", "The north.", "Still sales by region, now for 2025."]


def _recorded(ip, server):
    for answer in ANSWERS:
        server.enqueue_text(answer)
    for number, prompt in enumerate(PROMPTS):
        run(ip, "", prompt, f"cell-{number}")
    session = runtime_of(ip).slot().session
    return [e["id"] for e in session.entries], session.leaf_id


def _as_a_new_kernel(ip, monkeypatch):
    """The recorded session, loaded as a new kernel loads it, and no provider configured."""
    runtime = runtime_of(ip)
    slot = runtime.slot()
    slot.agent = None
    runtime.replay = ReplayController(runtime.providers)
    runtime.replay.capture(slot.name, slot.session)
    slot.earlier = {e["id"] for e in slot.session.entries}
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    return slot


def _shown(cap) -> str:
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


@pytest.mark.parametrize("ids", [None, ["0", "1", "2"]], ids=["no cell ids", "renumbered ids"])
def test_cells_replay_by_what_was_typed_and_the_session_stays_as_recorded(ip, server, monkeypatch, ids):
    recorded, leaf = _recorded(ip, server)
    calls = len(server.requests)
    slot = _as_a_new_kernel(ip, monkeypatch)
    for number, prompt in enumerate(PROMPTS):
        cap = run(ip, "", prompt, ids[number] if ids else None)
        assert ANSWERS[number] in _shown(cap), _shown(cap)  # the repeated prompt: its own cell's answer
        assert "Replaying this cell's recorded responses" in _shown(cap)
    assert len(server.requests) == calls  # nothing was sent
    assert [e["id"] for e in slot.session.entries] == recorded and slot.session.leaf_id == leaf


def test_a_cell_replay_should_serve_and_cannot_fails_saying_why(ip, server, monkeypatch):
    recorded, _ = _recorded(ip, server)
    slot = _as_a_new_kernel(ip, monkeypatch)
    run(ip, "", PROMPTS[0])
    cap = run(ip, "", "Something nobody asked before.", fails=True)
    assert isinstance(cap.error, ReplayUnavailable)
    assert "no recorded prompt says what it says" in str(cap.error) and "no provider is configured" in str(cap.error)
    assert [e["id"] for e in slot.session.entries] == recorded  # nothing was added


def test_with_a_provider_a_rerun_without_ids_forks_like_a_rerun_in_jupyterlab(ip, server):
    recorded, leaf = _recorded(ip, server)
    runtime = runtime_of(ip)
    runtime.replay = ReplayController(runtime.providers)
    runtime.replay.capture("default", runtime.slot().session)  # a new kernel: cells counted from the first
    server.enqueue_text("A new first answer.")
    run(ip, "", PROMPTS[0])
    session = runtime.slot().session
    prompt = next(e for e in session.path() if e["type"] == "message" and e["message"]["role"] == "user")
    first = next(e for e in session.entries if e["id"] in recorded and e["type"] == "message"
                 and e["message"]["role"] == "user")
    assert prompt["parentId"] == first["parentId"]  # the session forked from before the first prompt
    assert set(recorded) <= {e["id"] for e in session.entries} and session.leaf_id != leaf
