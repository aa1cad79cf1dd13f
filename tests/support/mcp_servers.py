"""The real MCP servers the MCP tests run, installed by .ci/install-test-parts (tests/mcp_servers/README.md):
``mcp-server-time`` and ``mcp-server-git`` from PyPI in their own virtualenv (they need the SDK's
2.x line; the client side uses 1.x), ``@modelcontextprotocol/server-everything`` from npm.

``server_marker`` gives a server an environment variable no other process has, and
``processes_with`` finds the processes that carry it in /proc: "no server process is left" is
then a check of the process table, not of the kernel's bookkeeping.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
MARKER_VAR = "IPYAGENT_TEST_MCP_MARK"


def python_server(name: str) -> str:
    """The path of a PyPI server's executable (``mcp-server-time``, ``mcp-server-git``)."""
    path = SERVERS / ".venv" / "bin" / name
    assert path.exists(), f"{path} is missing: run the MCP section of .ci/install-test-parts (tests/mcp_servers/README.md)"
    return str(path)


def npm_server(name: str = "mcp-server-everything") -> str:
    path = SERVERS / "node_modules" / ".bin" / name
    assert path.exists(), f"{path} is missing: npm ci --prefix tests/mcp_servers (tests/mcp_servers/README.md)"
    return str(path)


def server_marker() -> str:
    return f"mark-{uuid.uuid4().hex}"


def processes_with(marker: str) -> list[int]:
    """The pids of the live processes whose environment holds ``MARKER_VAR=marker``."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if needle in environ and state != b"Z":
            found.append(int(entry))
    return found
