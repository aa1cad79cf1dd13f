"""Project ``.mcp.json`` files: found from the notebook's folder up to the repository root (the
search of ``agent/containment.py``: the root, or home, ends it), read in the common shape
``{"mcpServers": {NAME: {...}}}``.

A project file comes with the repository, which may be a stranger's, so its servers are only
*defined* here; the kernel starts one after the user approved it (``kernel/mcp_servers.py``). Of two
files defining one name, the nearer one wins; a file whose real path leaves the project (a
symlink out of it) is not read, and neither is one over :data:`MAX_BYTES`. A project server
without a ``cwd`` runs in its file's folder, so a relative command means the project's own.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ipyagent.agent.containment import check_path, project_scope
from ipyagent.agent.mcp.server_definitions import ServerConfig, parse_servers

PROJECT_FILE = ".mcp.json"
MAX_BYTES = 1_000_000


def project_servers(start: str | Path, home: str | Path | None = None) -> tuple[list[ServerConfig], list[str]]:
    """The servers the project files define (nearest file first, each name once), and one line per
    file or definition that could not be used."""
    scope = project_scope(start, home)
    servers: dict[str, ServerConfig] = {}
    problems: list[str] = []
    for folder in scope.dirs:  # nearest first: the nearer definition of a name wins
        path = folder / PROJECT_FILE
        if not path.is_file():
            continue
        verdict = check_path(path, scope.root)
        if not verdict.inside:
            problems.append(f"{path}: not read ({verdict.reason()})")
            continue
        try:
            with open(verdict.real, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES:,} bytes")
            parsed = json.loads(data.decode("utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: not read ({exc})")
            continue
        found, more = parse_servers(parsed.get("mcpServers", {}) if isinstance(parsed, dict) else None, str(path))
        problems += more
        for server in found:
            if server.name not in servers:
                servers[server.name] = server if server.cwd or server.url else replace(server, cwd=str(folder))
    return list(servers.values()), problems
