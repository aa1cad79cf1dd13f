"""Messages that said different things, or nothing, about one fact (issue 37, item 7), in a REAL
kernel whose page gives the notebook's path in its hello_ack as JupyterLab does: one plain line each,
true everywhere."""

from __future__ import annotations

import re

import nbformat
import pytest

from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

SETUP = "%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.show_widget = False"


def test_load_ext_the_notebook_path_compact_and_a_missing_variable(tmp_path, monkeypatch):
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "analysis.ipynb"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend="jupyterlab",
                                               path="analysis.ipynb") as k:
        loaded = outputs_text(k.run(SETUP, "setup").outputs)
        # no word about a missing push or path: the page's bridge is on its way (it pushes only
        # sessions it holds)
        assert loaded.strip() == "ipyagent: nothing stored to resume; the first %%agent cell starts the session."
        status = outputs_text(k.run("%agent status", "status").outputs)
        assert "bridge connected (jupyterlab)" in status and "notebook path: analysis.ipynb" in status, status
        context = outputs_text(k.run("%agent context", "context").outputs)
        assert f"- Notebook: {tmp_path / 'analysis.ipynb'}" in context, context  # not "unknown"

        compacted = outputs_text(k.run("%compact keep the revenue numbers per region", "compact").outputs)
        assert "Nothing to compact" in compacted and "Summary stopped" not in compacted, compacted

        server.enqueue_text("I have no figures for that.")
        asked = outputs_text(k.run("%%agent\nSummarise {by_region} for me.", "ask").outputs)
        note = ("left as written (no variable of that name in the kernel, whose namespace may be new): "
                "{by_region}")
        assert note in asked, asked  # the user reads it
        sent = server.requests[-1].body["messages"][-1]["content"]
        assert note in str(sent)  # and so does the model


def _count(text: str) -> int:
    [found] = re.findall(r"Context \[default\] ([\d,]+) / 8,000 tokens", text)
    return int(found.replace(",", ""))


def test_the_count_is_the_same_after_a_restart(tmp_path):
    # issue 37, item 10: llama-cpp-python sends no usage in streams, so every count is an estimate
    # scaled by the ratio of the server's tokenizer to chars/4, measured on a sample of the
    # request. A real tokenizer's ratio depends on the text, and after a restart the kernel asked
    # again with another sample (the whole context now): 652 → 486 → 1,235 for one summary. The
    # factor measured first is saved with the session and counts after the restart; here the
    # restarted server's tokenizer answers another ratio, as a real one does for another sample.
    with fake_provider(server_kind="llama-cpp-python") as server, \
            LiveKernel(cwd=str(tmp_path), frontend="jupyterlab") as k:
        server.chars_per_token = 2.5  # this tokenizer counts 1.6 of chars/4's tokens
        server.stream_usage = False
        k.run(SETUP + "\n%config Agent.context_window = 8000", "setup")
        for i in range(3):  # the tokenizer is asked in the background during the first; the factor is
            # saved with the session at the end of the run after that
            server.enqueue_text("The readings are steady. " * 40)
            k.run(f"%%agent\nDescribe the readings of station {i} in a few sentences.", f"ask-{i}")
        # after a compaction no reply in the context carries usage: the count is all estimate
        server.enqueue_text("The user asked about three stations; their readings were steady.")
        compacted = outputs_text(k.run("%compact", "compact").outputs)
        assert "Nothing to compact" not in compacted, compacted
        before = _count(outputs_text(k.run("%agent status", "status").outputs))
        saved = k.metadata["sessions"]["default"]["settings"]["token_factor"]
        assert abs(saved["factor"] - 1.6) < 0.01 and saved["model"] == "openai:fake-model", saved
        server.chars_per_token = 3.2  # another sample, another ratio (1.25)
        k.restart()  # the page pushes the sessions it holds
        k.run(SETUP + "\n%config Agent.context_window = 8000", "setup-again")
        after = _count(outputs_text(k.run("%agent status", "status-again").outputs))
        assert after == before, (before, after)
        server.enqueue_text("Still steady.")
        k.run("%%agent\nAnd station 3?", "ask-3")  # a run counts with it too, and keeps it
        assert k.metadata["sessions"]["default"]["settings"]["token_factor"] == saved


def test_the_wait_for_the_first_word_is_said_while_the_server_reads_the_request(tmp_path):
    # issue 37, item 12: a local server read 1,635 tokens of system prompt and tools for 82.9 s
    # before the first output, with nothing said meanwhile. The run's widget says what is happening,
    # with the seconds, until the first word arrives (the kernel's widget messages, as a page gets them)
    import threading

    first_word = threading.Event()
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend="jupyterlab") as k:
        k.run("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'", "setup")
        server.enqueue_text("The answer, at last.", hold=first_word)
        statuses: list[str] = []
        read = k.kc.get_iopub_msg

        def watched(*args, **kwargs):
            msg = read(*args, **kwargs)
            state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
            if isinstance(state.get("value"), str) and state["value"].startswith("<i>"):
                statuses.append(state["value"])
            return msg

        k.kc.get_iopub_msg = watched
        reading = "Waiting for the model: the server reads the request ("
        msg_id = k.send_execute("%%agent --no-tools\nWhat is the answer?", "ask")
        try:
            k.wait(msg_id, until=lambda: sum(reading in s for s in statuses) >= 2)  # it ticks
        finally:
            first_word.set()
        k.wait(msg_id)
    said = [s for s in statuses if reading in s]
    assert len(said) >= 2 and re.search(r"\(\d[\d,]* tokens\) before its first word… \d+\.\d s", said[-1]), said
    after = statuses[statuses.index(said[-1]) + 1:]
    assert after and not any(reading in s for s in after), statuses  # the first word ends it
