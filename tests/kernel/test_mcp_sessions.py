"""MCP calls in sessions, in REAL kernels (``ipyagent run``) with the real ``mcp-server-time``:
calls and results are recorded like any tool's; replaying the notebook offline starts no server
and gives the recorded results; a recorded MCP call without a result is not run; the values of a
server's ``env`` and ``headers`` reach neither the notebook, its outputs nor its exports."""

from __future__ import annotations

import json

import pytest

from ipyagent import cli
from ipyagent.bridge.headless import kernel_environment
from ipyagent.session.messages import text_of
from ipyagent.store.chunks import assemble
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import fake_provider, notebook
from support.mcp_servers import MARKER_VAR, processes_with, python_server, server_marker
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

SECRET_ENV = "env-secret-9d41c2-never-saved"
SECRET_HEADER = "Bearer header-secret-5b7e08-never-saved"


def _setup(marker: str) -> str:
    """The user's setup cell: the secrets come from the environment, as a user's would."""
    servers = ("{'time': {'command': %r, 'env': {%r: %r, 'TIME_TOKEN': os.environ['MCP_TEST_TOKEN']}},"
               " 'tracker': {'url': 'http://127.0.0.1:9/mcp', 'headers': {'Authorization': os.environ['MCP_TEST_AUTH']},"
               " 'disabled': True}}") % (python_server("mcp-server-time"), MARKER_VAR, marker)
    return ("import os\n%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n"
            f"%config Agent.tool_approval = 'auto'\n%config Agent.mcp_servers = {servers}\n%config Agent")


def _results(nb) -> list[dict]:
    entries = assemble(nb["metadata"])["sessions"]["default"]["entries"]
    return [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]


@pytest.fixture
def secrets():
    with kernel_environment(MCP_TEST_TOKEN=SECRET_ENV, MCP_TEST_AUTH=SECRET_HEADER):
        yield


def offline_env():
    return kernel_environment(OPENAI_API_KEY=None, OPENAI_BASE_URL=None, IPYAGENT_MODEL=None)


def test_recorded_mcp_calls_replay_without_the_server_and_no_secret_is_saved(tmp_path, secrets, capsys):
    marker = server_marker()
    src = tmp_path / "mcp.ipynb"
    write_notebook(src, notebook(_setup(marker), "%agent mcp start", "%%agent\nWhat time is it in UTC?",
                                 "%agent mcp"))
    with fake_provider() as server:
        server.enqueue_tool_call("mcp__time__get_current_time", {"timezone": "UTC"})
        server.enqueue_text("It is the time the tool said.")
        assert cli.main(["run", str(src), "--timeout", "120"]) == 0, capsys.readouterr().err
    assert processes_with(marker) == []  # the headless run's kernel stopped its server
    recorded = read_notebook(src)
    [result] = _results(recorded)
    assert result["toolName"] == "mcp__time__get_current_time" and not result["isError"]
    assert json.loads(text_of(result["content"]))["timezone"] == "UTC"
    shown = outputs_text(recorded["cells"][3]["outputs"])
    assert "time [stdio] ready" in shown and "TIME_TOKEN" in shown and "tracker [http] disabled" in shown
    assert "~" in shown and "tokens of definitions" in shown

    # secrets: not in the notebook (metadata, outputs), nor in either export
    exports = []
    for fmt in ("pi", "markdown"):
        out = tmp_path / f"export.{fmt}"
        assert cli.main(["export", str(src), "--format", fmt, "-o", str(out)]) == 0
        exports.append(out.read_text())
    for text in [src.read_text(), *exports]:
        assert SECRET_ENV not in text and "header-secret-5b7e08" not in text
    assert "mcp__time__get_current_time" in exports[0]  # the call is in the exported session

    # replay, offline: no provider, and the server is never started
    replay_marker = server_marker()
    src.write_text(src.read_text().replace(marker, replay_marker))
    with offline_env():
        out = tmp_path / "replayed.ipynb"
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    replayed = read_notebook(out)
    assert _results(replayed) == [result]  # the recorded result, as recorded
    assert "MCP servers are not started" in outputs_text(replayed["cells"][1]["outputs"])
    assert "Replaying this cell's recorded responses" in outputs_text(replayed["cells"][2]["outputs"])
    assert processes_with(replay_marker) == []


def test_a_recorded_mcp_call_without_a_result_is_not_run(tmp_path, secrets, capsys):
    from ipyagent.core import Session
    from ipyagent.session.messages import user_message
    from ipyagent.store.ipynb import write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    def answer(*content, stop):
        return {"role": "assistant", "content": list(content), "api": "openai-completions", "provider": "openai",
                "model": "fake-model", "usage": {"input": 50, "output": 10, "totalTokens": 60},
                "stopReason": stop, "timestamp": 1}

    session = Session()
    session.append_message(user_message("What time is it?", cellId="cell-1", timestamp=1))
    session.append_message(answer({"type": "toolCall", "id": "call-time-1", "name": "mcp__time__get_current_time",
                                   "arguments": {"timezone": "UTC"}}, stop="toolUse"))
    session.append_message(answer({"type": "text", "text": "I could not tell."}, stop="stop"))
    marker = server_marker()
    nb = notebook(_setup(marker), "%%agent\nWhat time is it?")
    write_sessions_into_notebook(nb, NotebookSessions.from_session("default", session, {"model": "openai:fake-model"}))
    src = tmp_path / "stranger.ipynb"
    write_notebook(src, nb)
    with offline_env():
        out = tmp_path / "out.ipynb"
        assert cli.main(["run", str(src), "-o", str(out), "--timeout", "120"]) == 0, capsys.readouterr().err
    [result] = _results(read_notebook(out))
    assert result["toolCallId"] == "call-time-1" and result["isError"]
    assert text_of(result["content"]) == "Not run: the user interrupted the run."
    assert "no result for tool call mcp__time__get_current_time" in outputs_text(read_notebook(out)["cells"][1]["outputs"])
    assert processes_with(marker) == []
