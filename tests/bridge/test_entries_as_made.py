"""Entries reach the notebook as they are made, not when the cell ends (issue 21, item 1).

A kernel killed in the middle of a run (SIGKILL, as an out-of-memory kill would) leaves every
entry of the steps before in the output notebook of ``ipyagent run``; entries reach a frontend
while their cell still runs; and a run's messages do not repeat what was already sent.
"""

from __future__ import annotations

import pytest

from ipyagent import cli
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import SETUP, LiveKernel, fake_provider, notebook

AUTO = SETUP + '%config Agent.tool_approval = "auto"\n'
KILL = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"


def _enqueue_rounds(server, rounds: int) -> None:
    """``rounds`` python calls; the last kills its own kernel."""
    for i in range(1, rounds):
        server.enqueue_tool_call("python", {"code": f"print('round {i}', {i} * {i})"}, text=f"Round {i}.")
    server.enqueue_tool_call("python", {"code": KILL}, text="The last round.")
    server.enqueue_text("Never asked for: the kernel is dead by then.")


def _rounds_done(entries: list[dict]) -> list[str]:
    return [block["text"] for e in entries if e.get("type") == "message" and e["message"]["role"] == "toolResult"
            for block in e["message"]["content"] if block.get("type") == "text"]


@pytest.mark.kernel
def test_a_kernel_killed_in_the_sixth_tool_round_leaves_the_five_before(tmp_path, capsys):
    src, out = tmp_path / "killed.ipynb", tmp_path / "out.ipynb"
    write_notebook(src, notebook(AUTO, "%%agent\nRun the six rounds.", "print('never')"))
    with fake_provider() as server:
        _enqueue_rounds(server, 6)
        rc = cli.main(["run", str(src), "-o", str(out), "--timeout", "120"])
        assert server.chat_calls == 6  # the seventh request never came: the kernel died in round 6
    err = capsys.readouterr().err
    assert rc == 1 and "the kernel died" in err, err
    saved = read_notebook(out)
    entries = assemble(saved["metadata"])["sessions"]["default"]["entries"]
    done = _rounds_done(entries)
    assert [t.split()[:3] for t in done] == [["round", str(i), str(i * i)] for i in range(1, 6)]
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles[:2] == ["system", "user"]
    # every round's call and result; the sixth call (the step in flight) may or may not have left
    assert roles[2:12] == ["assistant", "toolResult"] * 5 and roles[12:] in ([], ["assistant"])
    # nothing came as a journal: the bridge delivered every entry
    mime = "application/vnd.ipyagent.entries+json"
    assert not [o for c in saved["cells"] for o in c.get("outputs", []) if mime in (o.get("data") or {})]


@pytest.mark.kernel
def test_entries_reach_the_frontend_while_the_cell_runs(tmp_path):
    """A tool call that looks at what the frontend holds: the user's prompt and the call itself
    are in the frontend's metadata before the cell ends. Each entry is sent once."""
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as kernel:
        kernel.run(AUTO)
        server.enqueue_tool_call("python", {"code": "print('tool ran')"}, text="Looking.")
        server.enqueue_tool_call("python", {"code": "print('again')"}, text="Once more.")
        server.enqueue_text("Done.")
        seen: list[list[str]] = []

        def during() -> bool:  # called before each message of the running cell is read
            meta = kernel.metadata.get("sessions", {}).get("default", {})
            seen.append([e["message"]["role"] for e in meta.get("entries", []) if e.get("type") == "message"])
            return False

        run = kernel.wait(kernel.send_execute("%%agent\nLook twice."), until=during)
        assert run is not None and run.status == "ok", run.outputs
        # before the cell's reply, the frontend already held the first round
        assert any(roles[:4] == ["system", "user", "assistant", "toolResult"] for roles in seen), seen
        kernel.drain()
        entries = kernel.metadata["sessions"]["default"]["entries"]
        roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
        assert roles == ["system", "user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
        assert kernel.frontend.entries_received == len(entries)  # each entry sent exactly once
        assert kernel.frontend.received >= 4  # in several messages, as they were made
        assert kernel.metadata["sessions"]["default"]["leaf"] == entries[-1]["id"]
