"""``ipyagent run`` and the journal fallback, in REAL kernels: the CLI writes the sessions into the
output notebook and fails on a cell error; without a bridge every run leaves one journal output
that ``ipyagent lift`` moves into the metadata; "ask" approval headless refuses clearly; the API
key in the kernel's environment never reaches the notebook."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient

from ipyagent import cli
from ipyagent.bridge.headless import execute_notebook, push_code
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from ipyagent.store.journal import JOURNAL_MIME
from kernel_support import FAKE_KEY, SETUP, fake_provider, notebook, user_messages
from support.outputs import outputs_text


@pytest.mark.kernel
def test_cli_run_writes_sessions_and_fails_on_a_cell_error(tmp_path, capsys):
    src = tmp_path / "in.ipynb"
    with fake_provider() as server:
        server.enqueue_text("Hello from the model.")
        write_notebook(src, notebook(SETUP, "%%agent\nSay hello."))
        assert cli.main(["run", str(src), "-o", str(tmp_path / "out.ipynb"), "--timeout", "120"]) == 0
        out = read_notebook(tmp_path / "out.ipynb")
        session = assemble(out["metadata"])["sessions"]["default"]
        assert [e["message"]["role"] for e in session["entries"]] == ["system", "user", "assistant"]
        assert assemble(out["metadata"])["active"] == "default"
        assert "Hello from the model." in outputs_text(out["cells"][1]["outputs"])
        assert "wrote" in capsys.readouterr().out

        server.enqueue_text("Second.")
        write_notebook(src, notebook(SETUP, "%%agent\nAgain.", "1 / 0", "print('never')"))
        assert cli.main(["run", str(src), "--timeout", "120"]) == 1  # in place
        failed = read_notebook(src)
        assert len(assemble(failed["metadata"])["sessions"]["default"]["entries"]) == 3  # system message, prompt, answer
        assert "ZeroDivisionError" in capsys.readouterr().err


@pytest.mark.kernel
def test_journal_fallback_then_lift(tmp_path):
    with fake_provider() as server:
        server.enqueue_text("First answer.")
        server.enqueue_text("Second answer.")
        nb = nbformat.from_dict(notebook(SETUP, "%%agent\nFirst.", "%%agent\nSecond."))
        NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()  # no bridge
    nb = json.loads(json.dumps(nb))
    journal_ids = []
    for cell in nb["cells"][1:]:
        journals = [o for o in cell["outputs"] if JOURNAL_MIME in o.get("data", {})]
        assert len(journals) == 1 and journals[0] is cell["outputs"][-1]  # ONE, and the run's last output
        assert journals[0]["metadata"]["ipyagent"]["final"] is True
        journal_ids += [e["id"] for e in journals[0]["data"][JOURNAL_MIME]["entries"]]
    assert "ipyagent" not in nb["metadata"]
    path = tmp_path / "journal.ipynb"
    write_notebook(path, nb)
    before = read_notebook(path)
    assert cli.main(["lift", str(path)]) == 0
    lifted = read_notebook(path)
    session = lifted["metadata"]["ipyagent"]["sessions"]["default"]
    assert [e["id"] for e in session["entries"]] == journal_ids
    assert len(journal_ids) == 5  # the system message, then two turns
    assert lifted["cells"] == before["cells"]  # the visible cells are untouched


@pytest.mark.kernel
def test_ask_approval_headless_is_a_clear_refusal(tmp_path):
    with fake_provider() as server:
        server.enqueue_tool_call("bash", {"command": "touch created-by-agent.txt"})
        server.enqueue_text("I was not allowed to run it.")
        out = execute_notebook(notebook(SETUP, "%%agent\nCreate a file."), timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
    assert not (tmp_path / "created-by-agent.txt").exists()
    entries = out.nb["metadata"]["ipyagent"]["sessions"]["default"]["entries"]
    result = [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"][0]
    assert result["isError"] and "nobody can answer" in result["content"][0]["text"]
    shown = outputs_text(out.nb["cells"][1]["outputs"])
    assert "Refused `bash`" in shown and 'tool_approval = "auto"' in shown


@pytest.mark.kernel
def test_api_key_never_reaches_the_notebook(tmp_path):
    with fake_provider(context_window=4000) as server:
        server.enqueue_tool_call("python", {"code": "import os\nlen(os.environ.get('OPENAI_API_KEY', ''))"})
        server.enqueue_text("The key has some length.")
        server.enqueue_auth_error()
        for i in range(4):
            server.enqueue_text(f"Answer {i}: " + "details about the columns " * 30)
        cells = [SETUP + "%config Agent.tool_approval = 'auto'\n%config Agent.context_window = 4000\n"
                 "%config Agent.reserve_tokens = 800\n%config Agent.keep_recent_tokens = 400",
                 "%%agent\nHow long is the key?", "%%agent\nThis one fails.",
                 *[f"%%agent\nQuestion {i}: " + "what about the columns " * 20 for i in range(4)],
                 "%compact", "%agent status", "%agent config", "%agent context"]
        out = execute_notebook(notebook(*cells), timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
    text = json.dumps(out.nb)
    assert FAKE_KEY not in text and "RECOGNISABLE" not in text
    assert "Model error" in outputs_text(out.nb["cells"][2]["outputs"])  # the 401 is shown, readably
    assert len(user_messages(out.nb["metadata"]["ipyagent"]["sessions"]["default"]["entries"])) == 6


def test_push_code_survives_quotes_and_backslashes():
    md = {"sessions": {"default": {"entries": [{"id": "a", "text": "'''\\ \" '''\\"}]}}}
    namespace: dict = {}
    received = []
    code = push_code(md).replace("import ipyagent.bridge.comm as _ipyagent_b", "pass").replace(
        "_ipyagent_b.receive_push", "received.append").replace("    del _ipyagent_b\n", "")
    exec(code.replace(", source='ipyagent-run')", ")"), {"received": received}, namespace)
    assert json.loads(received[0]) == md
