"""No key stored, shown, sent to the frontend or exported, in a REAL kernel: a model that prints
``os.environ['OPENAI_API_KEY']`` with the python tool, runs ``env | grep`` with bash and echoes the
key in its reply, and a prompt with ``{environ}``, leave ``***`` in the notebook's metadata (what
the bridge carried), in every output, in ``%agent context``, in both exports and in what the model
is sent next; the CLI's export scrubs a notebook that already holds one; journals scrub too."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient

from ipyagent import cli
from ipyagent.store.ipynb import write_notebook
from ipyagent.store.journal import JOURNAL_MIME
from kernel_support import FAKE_KEY, SETUP, LiveKernel, fake_provider, notebook
from support.outputs import outputs_text

AWS_SECRET = "aws-secret-wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
SECRETS = (FAKE_KEY, AWS_SECRET)
SETUP_AUTO = SETUP + "%config Agent.tool_approval = 'auto'\nimport os\nfrom os import environ\n"


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _script(server) -> None:
    """The model's turns: python prints the key, python raises with the AWS secret, bash greps the
    environment, and the reply quotes the key."""
    server.enqueue_tool_calls([("python", {"code": "import os\nprint(os.environ['OPENAI_API_KEY'])"}),
                               ("python", {"code": "raise RuntimeError(os.environ['AWS_SECRET_ACCESS_KEY'])"}),
                               ("bash", {"command": "env | grep -E 'OPENAI|AWS'"})])
    server.enqueue_text(f"Your key is {FAKE_KEY} and the AWS secret is {AWS_SECRET}.")
    server.enqueue_text("I see your environment.")


@pytest.mark.kernel
def test_keys_never_reach_metadata_outputs_context_exports_or_the_model(tmp_path):
    with fake_provider() as server:
        _script(server)
        with LiveKernel(cwd=str(tmp_path), env={"AWS_SECRET_ACCESS_KEY": AWS_SECRET}) as kernel:
            assert kernel.run(SETUP_AUTO).status == "ok"
            run = kernel.run("%%agent\nWhat is my key?", cell_id="keys")
            assert run.status == "ok", run.outputs
            prompt = kernel.run("%%agent\nHere is my environment: {environ}", cell_id="environ")
            assert prompt.status == "ok", prompt.outputs
            context = kernel.run("%agent context")
            pi = kernel.run("%agent export --format pi")
            markdown = kernel.run("%agent export --format markdown")

            shown = outputs_text(run.outputs)
            assert "OPENAI_API_KEY=***" in shown and "Your key is ***" in shown  # the outputs say what was there
            stored = json.dumps(kernel.metadata)  # what the bridge carried, entry by entry
            assert "OPENAI_API_KEY=***" in stored and "RuntimeError: ***" in stored
            assert _leaks(stored) == []
            assert _leaks(kernel.snapshot()) == []  # every output of every cell, html and plain
            assert "Here is my environment" in outputs_text(context.outputs)
            assert _leaks(outputs_text(context.outputs)) == []
            assert '{"type":"session"' in outputs_text(pi.outputs) and _leaks(outputs_text(pi.outputs)) == []
            assert "What is my key?" in outputs_text(markdown.outputs)
            assert _leaks(outputs_text(markdown.outputs)) == []
        # the model never got the key back: the tool results and the prompt it was sent are scrubbed
        bodies = [json.dumps(r.body) for r in server.requests if r.kind == "chat"]
        assert len(bodies) == 3 and all(_leaks(b) == [] for b in bodies)
        assert "OPENAI_API_KEY=***" in bodies[1]


@pytest.mark.kernel
def test_journals_scrub_and_the_cli_export_scrubs_an_old_notebook(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    with fake_provider() as server:
        _script(server)
        nb = nbformat.from_dict(notebook(SETUP_AUTO, "%%agent\nWhat is my key?"))
        NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()  # no bridge
        nb = json.loads(json.dumps(nb))
        journal = [o for o in nb["cells"][1]["outputs"] if JOURNAL_MIME in o.get("data", {})]
        assert len(journal) == 1 and "OPENAI_API_KEY=***" in json.dumps(journal[0])
        assert _leaks(json.dumps(nb)) == []

        # a notebook saved before keys were scrubbed: its metadata holds the key, the exports do not
        entries = journal[0]["data"][JOURNAL_MIME]["entries"]
        entries[-1]["message"]["content"][0]["text"] = f"The key was {FAKE_KEY}."
        nb["metadata"]["ipyagent"] = {"version": 1, "active": "default", "sessions": {"default": {
            "header": journal[0]["data"][JOURNAL_MIME]["header"], "leaf": entries[-1]["id"], "settings": {},
            "entries": entries}}}
        old = tmp_path / "old.ipynb"
        write_notebook(old, nb)
        assert FAKE_KEY in old.read_text()
        capsys.readouterr()
        for form in ("pi", "markdown"):
            assert cli.main(["export", str(old), "--format", form]) == 0
            out = capsys.readouterr().out
            assert "The key was ***." in out and _leaks(out) == [], form


@pytest.mark.kernel
def test_a_session_stored_with_a_key_is_shown_and_exported_without_it(tmp_path):
    from ipyagent.core import Session
    from ipyagent.hooks import HookRegistry
    from ipyagent.session.entries import compaction_entry

    old = Session(hooks=HookRegistry())  # saved by an ipyagent that did not scrub yet
    old.append_message({"role": "user", "content": "What is my key?", "timestamp": 1})
    answer = old.append_message({"role": "assistant", "content": [{"type": "text", "text": f"It is {FAKE_KEY}."}],
                                 "api": "openai-completions", "provider": "openai", "model": "fake-model",
                                 "usage": {"input": 10, "output": 5}, "stopReason": "stop", "timestamp": 2})
    old.append(compaction_entry(f"## Goal\nIt is {FAKE_KEY}.", answer["id"], 100))
    with fake_provider(), LiveKernel(cwd=str(tmp_path)) as kernel:
        kernel.frontend.metadata = {"version": 1, "active": "default", "sessions": {"default": {
            "header": old.header, "leaf": old.leaf_id, "settings": {}, "entries": list(old.entries)}}}
        kernel.push()
        assert kernel.run(SETUP).status == "ok"
        for command in ("%agent context", "%agent summary", "%agent export --format pi",
                        "%agent export --format markdown"):
            shown = outputs_text(kernel.run(command).outputs)
            assert "It is ***." in shown and _leaks(shown) == [], command


URL_PASSWORD, SERVER_TOKEN = "S3cretPassw0rd99", "tok-SECRETVALUE-123456"


@pytest.mark.kernel
def test_agent_mcp_and_mcp_start_print_no_mcp_secret(tmp_path):
    """A URL's password and an env value the server echoes on stderr before it fails: `%agent mcp
    start` and `%agent mcp` name the failure (its last stderr line) with both scrubbed."""
    import sys
    from pathlib import Path

    unruly = str(Path(__file__).resolve().parents[1] / "agent" / "mcp_tools" / "unruly_server.py")
    servers = {"a": {"url": f"http://alice:{URL_PASSWORD}@127.0.0.1:9/mcp"},
               "b": {"command": sys.executable, "args": [unruly, "echo-env", "EVIL_TOKEN"],
                     "env": {"EVIL_TOKEN": SERVER_TOKEN}}}
    with fake_provider(), LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + f"%config Agent.mcp_servers = {servers!r}", "setup")
        start = outputs_text(k.run("%agent mcp start", "start", timeout=180).outputs)
        listing = outputs_text(k.run("%agent mcp", "list").outputs)
        for text in (start, listing):
            assert "b [stdio] failed" in text and "its last stderr line: starting with EVIL_TOKEN=***" in text, text
            assert "a [http] failed" in text and "http://***@127.0.0.1:9/mcp" in text, text
            assert URL_PASSWORD not in text and SERVER_TOKEN not in text
        assert URL_PASSWORD not in k.snapshot() and SERVER_TOKEN not in k.snapshot()
