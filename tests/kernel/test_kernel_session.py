"""ipyagent in a REAL kernel against the fake provider: a session across cells, re-running cells
(forks), a kernel restart (the frontend's push, and hydration from disk), an interrupt."""

from __future__ import annotations

import json

import pytest

from ipyagent.bridge.headless import execute_notebook
from ipyagent.store.ipynb import write_notebook
from ipyagent.store.journal import JOURNAL_MIME
from kernel_support import SETUP, LiveKernel, fake_provider, notebook, path_of, user_messages
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel


def _texts(messages):
    return json.dumps(messages)


def test_session_across_cells_and_rerun_forks(tmp_path):
    with fake_provider() as server:
        server.enqueue_text("Noted: the number is 42.")
        server.enqueue_tool_call("python", {"code": "answer = 42\nanswer + 1"})
        server.enqueue_text("answer + 1 is 43.")
        nb = notebook(SETUP + "%config Agent.tool_approval = 'auto'",
                      "%%agent\nRemember the number 42.",
                      "answer = 0",
                      "%%agent\nSet answer to 42 and add one.",
                      "print(answer)")
        first = execute_notebook(nb, timeout=120, cwd=str(tmp_path))
        assert first.ok, first.error
        chat = [r for r in server.requests if r.kind == "chat"]
        assert len(chat) == 3
        assert "Noted: the number is 42." in _texts(chat[1].body["messages"])  # the second cell saw the first
        session = first.nb["metadata"]["ipyagent"]["sessions"]["default"]
        users = user_messages(session["entries"])
        assert [u["message"]["cellId"] for u in users] == ["cell-1", "cell-3"]
        # the user message carries the execution count the cell shows
        counts = [first.nb["cells"][i]["execution_count"] for i in (1, 3)]
        assert [u["message"]["executionCount"] for u in users] == counts
        assert counts[1] == counts[0] + 2
        assert "42" in outputs_text(first.nb["cells"][4]["outputs"])  # the tool ran in the kernel's namespace
        # the bridge acknowledged everything: no journal outputs
        assert not any(JOURNAL_MIME in (o.get("data") or {}) for c in first.nb["cells"] for o in c["outputs"])
        assert len(session["entries"]) == 7  # the system message, recorded once, then the two runs

        # Run All again on the executed notebook: the stored session is pushed, and each %%agent
        # cell forks from before its previous prompt, so the path is exactly the visible cells.
        server.enqueue_text("Noted again: 42.")
        server.enqueue_tool_call("python", {"code": "answer = 42\nanswer + 1"})
        server.enqueue_text("Again 43.")
        second = execute_notebook(first.nb, timeout=120, cwd=str(tmp_path))
        assert second.ok, second.error
    session = second.nb["metadata"]["ipyagent"]["sessions"]["default"]
    entries = session["entries"]
    assert {e["id"] for e in first.nb["metadata"]["ipyagent"]["sessions"]["default"]["entries"]} <= {
        e["id"] for e in entries}  # nothing lost
    cell1 = [u for u in user_messages(entries) if u["message"]["cellId"] == "cell-1"]
    assert len(cell1) == 2 and cell1[0]["parentId"] == cell1[1]["parentId"]  # siblings: a fork
    # what each prompt's cell said (the second also carries the notebook-activity block: `answer = 0` ran)
    on_path = [e["message"].get("cellPrompt", e["message"]["content"]) for e in user_messages(path_of(session))]
    assert on_path == ["Remember the number 42.", "Set answer to 42 and add one."]
    sent = _texts(server.requests[-1].body["messages"])
    assert "Noted again: 42." in sent and "Noted: the number is 42." not in sent


def test_restart_push_then_hydration_from_disk(tmp_path):
    with fake_provider() as server:
        with LiveKernel(cwd=str(tmp_path)) as k:
            k.run(SETUP, "setup")
            server.enqueue_text("Noted: the secret word is PAPAYA.")
            cell = k.run("%%agent\nThe secret word is PAPAYA.", "c1")
            assert cell.status == "ok", outputs_text(cell.outputs)
            stored = k.metadata["sessions"]["default"]["entries"]
            assert len(stored) == 3  # system message, prompt, answer: delivered through the bridge and acknowledged
            assert not any(JOURNAL_MIME in (o.get("data") or {}) for o in cell.outputs)

            k.restart()  # the frontend pushes the stored sessions into the new kernel
            k.run(SETUP, "setup")
            server.enqueue_text("It was PAPAYA.")
            cell = k.run("%%agent\nWhat was the secret word?", "c2")
            assert cell.status == "ok", outputs_text(cell.outputs)
            sent = server.requests[-1].body["messages"]
            text = _texts(sent)
            assert "The secret word is PAPAYA." in text and "Noted: the secret word is PAPAYA." in text
            assert "namespace was reset" in text
            resets = [e for e in k.metadata["sessions"]["default"]["entries"]
                      if e.get("customType") == "ipyagent.kernel_reset"]
            assert len(resets) == 1
            saved = {"cells": [], "metadata": {"ipyagent": k.metadata}, "nbformat": 4, "nbformat_minor": 5}

        # No frontend at all now: a fresh kernel finds its notebook on disk (JPY_SESSION_NAME).
        path = tmp_path / "saved.ipynb"
        write_notebook(path, saved)
        with LiveKernel(cwd=str(tmp_path), env={"JPY_SESSION_NAME": str(path)}) as k2:
            cell = k2.run(SETUP, "setup")
            assert "resumed default" in outputs_text(cell.outputs)
            server.enqueue_text("Still PAPAYA.")
            k2.run("%%agent\nAnd now?", "c3")
            text = _texts(server.requests[-1].body["messages"])
            assert "PAPAYA" in text and "It was PAPAYA." in text


def test_interrupt_during_agent_cell_keeps_a_valid_session(tmp_path):
    with fake_provider(chunk_delay=0.03) as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + "%config Agent.show_widget = False", "setup")
        # a minute of streaming (the interrupt ends it within the first second): a loaded machine
        # cannot reach the end before the interrupt lands
        server.enqueue_text("Once upon a time " + "there was a very long story " * 600)
        msg_id = k.send_execute("%%agent\nTell me a long story.", "c1")

        def streaming():
            return any("Once upon" in outputs_text([o]) for o in k.cells[-1].outputs)

        cell = k.interrupt_when(streaming, msg_id)
        assert cell.status == "error" and cell.error["ename"] == "KeyboardInterrupt", \
            (cell.error, outputs_text(cell.outputs))
        assert "Interrupted" in outputs_text(cell.outputs)
        # one line, not a traceback through the loop's internals (issue 37)
        assert cell.error["traceback"] == ["KeyboardInterrupt"], cell.error["traceback"]
        roles = k.evaluate("[(e['message']['role'], e['message'].get('stopReason')) for e in "
                           "__import__('ipyagent.kernel.extension', fromlist=['x']).get_runtime(get_ipython())"
                           ".slot().session.path() if e['type'] == 'message']")
        assert roles == [["system", None], ["user", None], ["assistant", "aborted"]]

        server.enqueue_text("Sorry, here is a short one.")
        cell = k.run("%%agent\nA short one, please.", "c2")
        assert cell.status == "ok", outputs_text(cell.outputs)
        sent = server.requests[-1].body["messages"]
        assert [m["role"] for m in sent if m["role"] != "system"][-1] == "user"
        stored = k.metadata["sessions"]["default"]["entries"]
        assert any(e["type"] == "message" and e["message"].get("stopReason") == "aborted" for e in stored)


def test_interrupt_during_a_tool_closes_the_call(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + "%config Agent.tool_approval = 'auto'\n%config Agent.show_widget = False", "setup")
        marker = tmp_path / "tool-started"
        code = f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\nfor _ in range(600): time.sleep(0.1)"
        server.enqueue_tool_calls([("python", {"code": code}), ("python", {"code": "print('second call')"})])
        msg_id = k.send_execute("%%agent\nWait a minute.", "c1")

        def tool_running():
            return marker.exists()

        cell = k.interrupt_when(tool_running, msg_id)
        assert cell.status == "error" and cell.error["ename"] == "KeyboardInterrupt", \
            (cell.error, outputs_text(cell.outputs))
        server.enqueue_text("All right, I stopped.")
        cell = k.run("%%agent\nWhat happened?", "c2")
        assert cell.status == "ok", outputs_text(cell.outputs)
        sent = server.requests[-1].body["messages"]
        calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        assert len(calls) == 2 and sorted(calls) == sorted(results)  # every call has its result
        assert "Interrupted by the user" in json.dumps(sent) and "second call" not in json.dumps(
            [m for m in sent if m["role"] == "tool"])


def test_ask_approval_through_input_in_a_kernel(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")
        server.enqueue_tool_call("bash", {"command": "echo yes > approved.txt"})
        server.enqueue_tool_call("bash", {"command": "echo no > refused.txt"})
        server.enqueue_text("One of two.")
        k.answers = ["y", "n"]
        cell = k.run("%%agent\nWrite two files.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        assert k.prompts == ["Allow `bash` as shown above? [y/N] "] * 2
        shown = outputs_text(cell.outputs)  # the whole call, above the question
        assert "ipyagent: approve this `bash` call?\n  command: echo yes > approved.txt" in shown
        assert (tmp_path / "approved.txt").exists() and not (tmp_path / "refused.txt").exists()
        results = [e["message"] for e in k.metadata["sessions"]["default"]["entries"]
                   if e["type"] == "message" and e["message"]["role"] == "toolResult"]
        assert not results[0]["isError"] and results[1]["isError"] and "declined" in json.dumps(results[1])


def test_a_chunk_key_of_5000_digits_breaks_neither_load_ext_nor_run(tmp_path, capsys):
    """A notebook with a chunk key over Python's integer-string limit: ``%load_ext`` resumes its
    session from disk (the key set aside and said), and ``ipyagent run`` runs it."""
    from ipyagent import cli
    from ipyagent.store.chunks import assemble
    from ipyagent.store.ipynb import read_notebook, write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions, StoredSession
    from support.builders import chain

    header = {"type": "session", "version": 3, "id": "3f0c2b9e-0000-4000-a000-000000000005",
              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": ""}
    nb = write_sessions_into_notebook(notebook("%load_ext ipyagent", "%agent sessions"), NotebookSessions(
        "default", {"default": StoredSession(header, "00000002", {}, chain(3))}), 3)
    huge = "ipyagent/" + "7" * 5000
    nb["metadata"][huge] = {"session": "default", "ids": [], "entries": "[]"}
    path = tmp_path / "hostile.ipynb"
    path.write_text(json.dumps(nb))
    with LiveKernel(cwd=str(tmp_path), env={"JPY_SESSION_NAME": str(path)}) as k:
        cell = k.run("%load_ext ipyagent", "c0")
        text = outputs_text(cell.outputs)
        assert cell.status == "ok" and "resumed default (3 entries" in text, text
        assert "set aside" in text or "kept here" in text, text  # the key is said, not silently dropped
        cell = k.run("%agent sessions", "c1")
        assert "default" in outputs_text(cell.outputs) and "no sessions yet" not in outputs_text(cell.outputs)
    out = tmp_path / "out.ipynb"
    assert cli.main(["run", str(path), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    stored = assemble(read_notebook(out)["metadata"])
    assert [e["id"] for e in stored["sessions"]["default"]["entries"]] == ["00000000", "00000001", "00000002"]
    assert huge in [item["where"] for item in stored.get("set_aside", [])]
