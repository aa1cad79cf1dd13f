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
