"""MCP servers end with the kernel, in a REAL kernel, even when they do not cooperate: a server
that ignores SIGTERM and the end of its stdin, and one still starting (it never answers), are both
ended when the extension unloads, when the kernel restarts and when it shuts down gracefully (as
Jupyter asks it to: a shutdown request, then a kill after 5 s). The servers run in their own
session, so a kernel killed before it ended them would leave them running; the process table is
the check. The test prints the seconds each graceful restart and shutdown took."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from kernel_support import LiveKernel, fake_provider
from support.mcp_servers import MARKER_VAR, processes_with, server_marker
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

UNRULY = str(Path(__file__).resolve().parents[1] / "agent" / "mcp_tools" / "unruly_server.py")
# The prompt that starts the server that never gets ready waits Agent.mcp_start_wait for it (30 s by
# default; that wait is tests/kernel/test_mcp_servers.py's subject): 1 s here, where only the end of
# the servers with the kernel is tested (three prompts of 30 s were 90 of this test's 111 s).
SETUP = ("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.show_widget = False\n"
         "%config Agent.mcp_start_wait = 1\n")


def unruly(mode: str, marker: str) -> dict:
    return {"command": sys.executable, "args": [UNRULY, mode], "env": {MARKER_VAR: marker}}


def wait_for(predicate, what: str, timeout: float = 120.0) -> None:
    """Wait for ``predicate()`` (an event in another process); the timeout only ends a broken run."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


def start_two(k: LiveKernel, server, phase: str) -> tuple[str, str]:
    """A ready server that ignores SIGTERM, and one still starting; their markers."""
    stubborn, starting = server_marker(), server_marker()
    servers = {"stubborn": unruly("ignore-term", stubborn)}
    k.run(f"%config Agent.mcp_servers = {servers!r}", f"{phase}-config")
    started = outputs_text(k.run("%agent mcp start", f"{phase}-start", timeout=120).outputs)
    assert "stubborn [stdio] ready" in started, started
    servers["starting"] = unruly("hang", starting)
    k.run(f"%config Agent.mcp_servers = {servers!r}", f"{phase}-config2")
    server.enqueue_text("Hello.")
    cell = k.run("%%agent\nhi", f"{phase}-prompt", timeout=120)
    assert "'starting' is still starting" in outputs_text(cell.outputs)
    wait_for(lambda: processes_with(starting), "the starting server's process runs")
    assert processes_with(stubborn)
    return stubborn, starting


def test_servers_that_ignore_sigterm_end_on_unload_restart_and_shutdown(tmp_path):
    seconds = {}
    left: list[str] = []
    with fake_provider() as server:
        k = LiveKernel(cwd=str(tmp_path))
        try:
            k.run(SETUP, "setup")
            left = list(start_two(k, server, "unload"))
            k.run("%unload_ext ipyagent", "unload")
            assert [processes_with(m) for m in left] == [[], []], "ended when the extension unloads"

            k.run(SETUP, "setup-again")
            left = list(start_two(k, server, "restart"))
            k.kc.stop_channels()
            began = time.monotonic()
            k.km.restart_kernel(now=False)  # graceful: a shutdown request (restart), as Jupyter sends it
            seconds["restart (with the new kernel's start)"] = time.monotonic() - began
            k._connect()
            assert [processes_with(m) for m in left] == [[], []], "ended when the kernel restarts"

            k.run(SETUP, "setup-after-restart")
            left = list(start_two(k, server, "shutdown"))
            k.kc.stop_channels()
            began = time.monotonic()
            k.km.shutdown_kernel(now=False)
            seconds["shutdown"] = time.monotonic() - began
            assert [processes_with(m) for m in left] == [[], []], "ended when the kernel shuts down"
        finally:
            k.shutdown()
            for marker in left:  # a failed run leaves nothing behind either
                for pid in processes_with(marker):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
    print("graceful kernel " + ", ".join(f"{what}: {s:.1f} s" for what, s in seconds.items()))
