"""More real third-party MCP servers in a REAL kernel: ``mcp-server-git`` (PyPI, stdio) reads a
test repository's log, and ``@modelcontextprotocol/server-everything`` (npm) answers ``echo`` over
Streamable HTTP; a server whose definitions take more than a tenth of the window is warned about,
and its ``tools`` list offers only some. No process is left afterwards."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

from kernel_support import LiveKernel, fake_provider
from support.mcp_servers import MARKER_VAR, npm_server, processes_with, python_server, server_marker
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

SETUP = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.tool_approval = 'auto'\n"
         "%config Agent.show_widget = False\n")


def _results(k):
    entries = k.metadata["sessions"]["default"]["entries"]
    return [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]


def _shutdown(k):
    k.kc.stop_channels()
    k.km.shutdown_kernel()


def test_mcp_server_git_reads_a_repositorys_log(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=Test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for n, message in enumerate(["first: the data loader", "second: a plot of the loss"]):
        (repo / f"f{n}.txt").write_text(str(n))
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    marker = server_marker()
    servers = {"git": {"command": python_server("mcp-server-git"), "args": ["--repository", str(repo)],
                       "env": {MARKER_VAR: marker}}}
    with fake_provider() as server:
        k = LiveKernel(cwd=str(tmp_path))
        try:
            k.run(SETUP + f"%config Agent.mcp_servers = {servers!r}", "setup")
            assert "git [stdio] ready" in outputs_text(k.run("%agent mcp start", "start").outputs)
            server.enqueue_tool_call("mcp__git__git_log", {"repo_path": str(repo), "max_count": 5})
            server.enqueue_text("Two commits.")
            cell = k.run("%%agent\nWhat happened in the repository?", "c1")
            assert cell.status == "ok", outputs_text(cell.outputs)
            [result] = _results(k)
            text = result["content"][0]["text"]
            assert not result["isError"], text
            assert "first: the data loader" in text and "second: a plot of the loss" in text
        finally:
            _shutdown(k)
    assert processes_with(marker) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def everything():
    """server-everything over Streamable HTTP on a free port, started the way a user starts it."""
    marker, port = server_marker(), _free_port()
    env = {**os.environ, "PORT": str(port), MARKER_VAR: marker}
    process = subprocess.Popen([npm_server(), "streamableHttp"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:  # wait for the server's own "listening" line
            if "listening on port" in line:
                break
        else:
            raise AssertionError(f"server-everything did not start (exit code {process.wait()})")
        yield f"http://127.0.0.1:{port}/mcp", marker
    finally:
        process.terminate()
        process.wait(30)
    assert processes_with(marker) == []


def test_server_everything_answers_echo_over_streamable_http(everything):
    url, _ = everything
    servers = {"everything": {"url": url, "headers": {"X-Ipyagent-Test": "header-value-4e1f9a"}}}
    with fake_provider() as server:
        k = LiveKernel()
        try:
            # a small local model's window (SmolLM2's): the server's many tools take more than a tenth of it
            k.run(SETUP + "%config Agent.context_window = 8192\n" + f"%config Agent.mcp_servers = {servers!r}", "setup")
            report = outputs_text(k.run("%agent mcp start", "start").outputs)
            assert "everything [http] ready" in report and "WARNING: more than 10% of the window" in report, report
            # a server that echoes a header's value back: the value is scrubbed from what is stored
            server.enqueue_tool_call("mcp__everything__echo", {"message": "hello over HTTP header-value-4e1f9a"})
            server.enqueue_text("It echoed.")
            cell = k.run("%%agent\nEcho something.", "c1")
            assert cell.status == "ok", outputs_text(cell.outputs)
            shown = outputs_text(cell.outputs)
            assert "MCP server 'everything': its" in shown and "of the 8,192-token window" in shown
            [result] = _results(k)
            assert not result["isError"] and "hello over HTTP ***" in result["content"][0]["text"]
            many = {t["function"]["name"] for t in server.requests[0].body["tools"]}
            assert len([n for n in many if n.startswith("mcp__everything__")]) > 5
            # only some tools: the warning goes, and only echo is offered
            only = {"everything": {**servers["everything"], "tools": ["echo"]}}
            k.run(f"%config Agent.mcp_servers = {only!r}", "only-echo")
            report = outputs_text(k.run("%agent mcp start", "start-again").outputs)
            assert "1 tools (1 of " in report and "WARNING" not in report, report
            server.enqueue_text("Fine.")
            k.run("%%agent\nAnd now?", "c2")
            offered = {t["function"]["name"] for t in server.requests[-1].body["tools"]}
            assert [n for n in offered if n.startswith("mcp__")] == ["mcp__everything__echo"]
        finally:
            _shutdown(k)
    assert "header-value-4e1f9a" not in json.dumps(k.metadata)
    assert not any("header-value-4e1f9a" in json.dumps(c.outputs) for c in k.cells)
