"""The MCP hub against a real stdio server (the SDK's own server library, run as a process):
calls, images through the image checks, a crashed server restarted once and then named in one
line, and no process left after ``close``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ipyagent.agent.mcp.hub import START_TIMEOUT, McpHub
from ipyagent.agent.mcp.server_definitions import parse_server
from support.mcp_servers import MARKER_VAR, processes_with, server_marker

pytestmark = pytest.mark.slow

SERVER = str(Path(__file__).with_name("crashing_server.py"))
UNRULY = str(Path(__file__).with_name("unruly_server.py"))


@pytest.fixture
def hub_and_marker():
    marker = server_marker()
    hub = McpHub()
    hub.start(parse_server("crashy", {"command": sys.executable, "args": [SERVER], "env": {MARKER_VAR: marker}}))
    assert hub.wait_ready(["crashy"], START_TIMEOUT) == []
    yield hub, marker
    hub.close()
    assert processes_with(marker) == []


def test_calls_text_and_images(hub_and_marker):
    hub, _ = hub_and_marker
    status = hub.status("crashy")
    assert status.state == "ready" and {t.name for t in status.tools} == {"echo", "crash", "picture"}
    assert hub.call("crashy", "echo", {"text": "hello"}).text == "hello"
    picture = hub.call("crashy", "picture", {})
    assert picture.text == "one pixel" and not picture.is_error
    assert [b["mimeType"] for b in picture.images] == ["image/png"]


def test_a_crashed_server_is_restarted_once_then_named_in_one_line(hub_and_marker):
    hub, marker = hub_and_marker
    first = hub.call("crashy", "crash", {})
    assert first.is_error and "restarted once" in first.text, first.text
    assert hub.wait_ready(["crashy"], START_TIMEOUT) == []
    assert hub.status("crashy").state == "ready"
    assert hub.call("crashy", "echo", {"text": "back"}).text == "back"  # the restarted server answers
    second = hub.call("crashy", "crash", {})
    assert second.is_error
    status = hub.status("crashy")
    assert status.state == "failed"
    assert "\n" not in status.error and "crashy" in status.error and "crashing on purpose" in status.error
    after = hub.call("crashy", "echo", {"text": "again"})
    assert after.is_error and after.text == status.error
    assert processes_with(marker) == []


def test_a_missing_command_fails_in_one_line():
    hub = McpHub()
    try:
        hub.start(parse_server("nothere", {"command": "/nonexistent/mcp-server-nothing"}))
        hub.wait_ready(["nothere"], START_TIMEOUT)
        hub.wait_ready(["nothere"], START_TIMEOUT)  # the one restart
        status = hub.status("nothere")
        assert status.state == "failed", status
        assert "/nonexistent/mcp-server-nothing" in status.error and "\n" not in status.error
    finally:
        hub.close()


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def test_a_server_flooding_stderr_costs_only_a_bounded_tail():
    flood_mb = 300  # what took a kernel from 32 MB to 1,257 MB when the whole of it was kept and read
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) restarts from here
    before = _memory_kb("VmRSS")
    hub = McpHub()
    try:
        hub.start(parse_server("flood", {"command": sys.executable, "args": [UNRULY, "flood", str(flood_mb)]}))
        hub.wait_ready(["flood"], START_TIMEOUT)
        hub.wait_ready(["flood"], START_TIMEOUT)  # the one restart: it floods again and exits again
        status = hub.status("flood")
        assert status.state == "failed", status
        assert status.error.endswith("its last stderr line: the last line after the flood (it was restarted once "
                                     "and stopped again; fix it and change Agent.mcp_servers, or %agent mcp "
                                     "restart NAME)"), status.error
    finally:
        hub.close()
    peak, after = _memory_kb("VmHWM"), _memory_kb("VmRSS")
    print(f"{2 * flood_mb} MB of stderr: RSS {before / 1024:.0f} MB before, {after / 1024:.0f} MB after, "
          f"peak {peak / 1024:.0f} MB")
    assert peak - before < flood_mb * 1024 // 4  # the tail is 64 KB; reading the flood whole was 300 MB and more
