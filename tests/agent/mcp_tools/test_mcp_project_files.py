"""Project ``.mcp.json`` files (pure, on real folders): found from the notebook's folder up to the
repository root and no further, the nearest definition of a name wins, a project server runs in
its file's folder, and broken files are reported in one line each."""

from __future__ import annotations

import json

from ipyagent.agent.mcp.project import project_servers


def _write(folder, servers):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_nearest_wins_up_to_the_repository_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _write(tmp_path, {"above": {"command": "never-read"}})  # above the repository: not searched
    _write(repo, {"db": {"command": "db-server", "args": ["--root"]}, "tracker": {"url": "http://h/mcp"}})
    _write(repo / "analysis", {"db": {"command": "db-server", "args": ["--analysis"]}})
    servers, problems = project_servers(repo / "analysis", home=tmp_path / "home")
    assert problems == []
    by_name = {s.name: s for s in servers}
    assert sorted(by_name) == ["db", "tracker"]
    assert by_name["db"].args == ("--analysis",) and by_name["db"].cwd == str(repo / "analysis")
    assert by_name["db"].origin == str(repo / "analysis" / ".mcp.json") and by_name["db"].from_project
    assert by_name["tracker"].cwd is None  # an HTTP server has no folder


def test_broken_files_and_definitions_are_named(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".mcp.json").write_text("{not json")
    _write(repo / "sub", {"bad": {"command": "x", "url": "http://h/mcp"}})
    servers, problems = project_servers(repo / "sub", home=tmp_path / "home")
    assert servers == [] and len(problems) == 2
    assert all("\n" not in p for p in problems)


def test_a_project_servers_question_shows_what_the_repository_chose(ip, tmp_path, monkeypatch):
    """In a shell nobody can answer: the question shows the env values the file sets (one equal
    to a configured key as ***), and the refusal names what does start a project server."""
    from IPython.utils.capture import capture_output

    key = "sk-proj-a-key-the-repository-copied-42"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _write(repo, {"tool": {"command": "python", "args": ["-m", "tool"],
                           "env": {"PYTHONPATH": "./hooks-from-the-repo", "COPIED": key}}})
    (repo / "analysis").mkdir()
    ip.run_line_magic("config", f"Agent.notebook_path = {str(repo / 'analysis' / 'work.ipynb')!r}")
    with capture_output() as cap:
        ip.run_line_magic("agent", "mcp start")
    shown = cap.stdout
    assert "start MCP server" in shown and "command: python -m tool" in shown, shown
    assert "env PYTHONPATH: ./hooks-from-the-repo" in shown and "env COPIED: ***" in shown, shown
    assert key not in shown
    refusal = shown[shown.index("Refused `start MCP server`"):]
    assert "tool_approval" not in refusal and "Agent.mcp_servers names it" in refusal, refusal
