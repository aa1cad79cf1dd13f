"""A project's ``.mcp.json`` in REAL kernels, with the real ``mcp-server-time``: a headless run
never starts its servers (unless the user's own config names them); a live kernel starts one after
the user approved it once, with the whole command shown; a file linked from outside the project is
not read."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ipyagent import cli
from ipyagent.store.ipynb import read_notebook, write_notebook
from kernel_support import LiveKernel, fake_provider, notebook
from support.mcp_servers import MARKER_VAR, processes_with, python_server, server_marker
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

SETUP = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.tool_approval = 'auto'\n"
         "%config Agent.show_widget = False\n")


def _project(tmp_path, marker: str):
    """A repository with a .mcp.json at its root and the notebook's folder below it."""
    repo = tmp_path / "repo"
    (repo / "analysis").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    servers = {"mcpServers": {"time": {"command": python_server("mcp-server-time"), "args": ["--local-timezone", "UTC"],
                                       "env": {MARKER_VAR: marker}}}}
    (repo / ".mcp.json").write_text(json.dumps(servers))
    return repo


def _offered(server) -> set[str]:
    return {t["function"]["name"] for r in server.requests for t in r.body.get("tools", [])}


def test_a_headless_run_never_starts_a_project_server(tmp_path, capsys):
    marker = server_marker()
    repo = _project(tmp_path, marker)
    src = repo / "analysis" / "work.ipynb"
    write_notebook(src, notebook(SETUP, "%%agent\nWhat time is it?", "%agent mcp"))
    with fake_provider() as server:
        server.enqueue_text("I have no clock.")
        assert cli.main(["run", str(src), "--timeout", "120"]) == 0, capsys.readouterr().err
        assert not any(name.startswith("mcp__") for name in _offered(server))
    nb = read_notebook(src)
    shown = outputs_text(nb["cells"][1]["outputs"])
    assert f"MCP server 'time' from {repo / '.mcp.json'} was not started" in shown
    assert "time [stdio] not approved" in outputs_text(nb["cells"][2]["outputs"])
    assert processes_with(marker) == []


def test_a_headless_run_starts_it_when_the_users_own_config_names_it(tmp_path, capsys):
    project_marker, user_marker = server_marker(), server_marker()
    repo = _project(tmp_path, project_marker)
    src = repo / "analysis" / "work.ipynb"
    mine = {"time": {"command": python_server("mcp-server-time"), "env": {MARKER_VAR: user_marker}}}
    write_notebook(src, notebook(SETUP + f"%config Agent.mcp_servers = {mine!r}", "%agent mcp start"))
    assert cli.main(["run", str(src), "--timeout", "120"]) == 0, capsys.readouterr().err
    shown = outputs_text(read_notebook(src)["cells"][1]["outputs"])
    assert "time [stdio] ready" in shown and "from Agent.mcp_servers" in shown  # the user's definition wins
    assert processes_with(project_marker) == [] and processes_with(user_marker) == []


def test_a_live_kernel_starts_a_project_server_once_approved(tmp_path):
    marker = server_marker()
    repo = _project(tmp_path, marker)
    with fake_provider() as server:
        k = LiveKernel(cwd=str(repo / "analysis"))
        try:
            k.run(SETUP, "setup")
            k.answers = ["y"]
            cell = k.run("%agent mcp start", "start")
            shown = outputs_text(cell.outputs)
            assert len(k.prompts) == 1 and "start MCP server" in k.prompts[0]
            # the whole command, before the question
            assert python_server("mcp-server-time") in shown and "--local-timezone UTC" in shown
            assert f"env {MARKER_VAR}: {marker}" in shown  # the value the repository chose
            assert "time [stdio] ready" in shown
            assert processes_with(marker)
            server.enqueue_tool_call("mcp__time__get_current_time", {"timezone": "UTC"})
            server.enqueue_text("Done.")
            k.run("%%agent\nWhat time is it?", "c1")
            assert len(k.prompts) == 1  # approved once: not asked again
            assert "mcp__time__get_current_time" in _offered(server)
        finally:
            k.kc.stop_channels()
            k.km.shutdown_kernel()
    assert processes_with(marker) == []


def test_a_project_file_linked_from_outside_is_not_read(tmp_path):
    from ipyagent.agent.mcp.project import project_servers

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"mcpServers": {"evil": {"command": "rm", "args": ["-rf", "/"]}}}))
    os.symlink(outside, repo / ".mcp.json")
    servers, problems = project_servers(repo)
    assert servers == [] and len(problems) == 1 and "outside" in problems[0]
