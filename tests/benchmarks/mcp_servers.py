"""Benchmark of the MCP servers the tests use (no thresholds asserted): each one's start-up time
through ipyagent's hub (process start, ``initialize`` and ``tools/list``), and the tokens its tool
definitions take as the budget counts them (chars/4 of the definitions as sent).

    python tests/benchmarks/mcp_servers.py [--runs 3]

Needs the servers of tests/mcp_servers (.ci/install-test-parts installs them).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for support.mcp_servers

from ipyagent.agent.mcp.hub import START_TIMEOUT, McpHub
from ipyagent.agent.mcp.mcp_tool import offered_tools
from ipyagent.agent.mcp.server_definitions import parse_server
from ipyagent.kernel.mcp_servers import tool_tokens
from support.mcp_servers import npm_server, python_server


def _measure(spec: dict, name: str, runs: int) -> tuple[list[float], int, int]:
    times, tokens, count = [], 0, 0
    for _ in range(runs):
        hub = McpHub()
        try:
            started = time.monotonic()
            hub.start(parse_server(name, spec))
            hub.wait_ready([name], START_TIMEOUT)
            times.append(time.monotonic() - started)
            status = hub.status(name)
            assert status is not None and status.state == "ready", status
            tools = offered_tools([(status.config, status.tools)], hub)
            tokens, count = tool_tokens(tools), len(tools)
        finally:
            hub.close()
    return times, tokens, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = subprocess.Popen([npm_server(), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert http.stderr is not None
        for line in http.stderr:
            if "listening on port" in line:
                break
        servers = {
            "time": {"command": python_server("mcp-server-time")},
            "git": {"command": python_server("mcp-server-git"), "args": ["--repository", str(Path.cwd())]},
            "everything": {"url": f"http://127.0.0.1:{port}/mcp"},
        }
        print(f"{'server':12} {'transport':10} {'start-up (median of %d)' % args.runs:26} {'tools':>5} {'tokens':>7}")
        for name, spec in servers.items():
            times, tokens, count = _measure(spec, name, args.runs)
            kind = "http" if "url" in spec else "stdio"
            print(f"{name:12} {kind:10} {statistics.median(times):6.2f} s (min {min(times):.2f} s){'':6} "
                  f"{count:5} {tokens:7,}")
    finally:
        http.terminate()
        http.wait(30)


if __name__ == "__main__":
    main()
