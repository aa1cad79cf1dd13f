"""Progress on a long wait inside a ``%%agent`` cell (``display/progress.py``), in-process against
the fake provider: MCP servers starting (a real stdio server whose start the test holds) and window
discovery (the fake server's metadata requests held): while the cell waits it shows a live progress
bar, and its saved output holds one static line. And prices: loading genai-prices is never waited
for by a cell (``providers/pricing.py``).

Every wait is on an event: the live line appearing in the cell's outputs, a request reaching the
fake server, a named pipe the test opens."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.utils.capture import capture_output

from ipyagent.providers import window_discovery as discovery

UNRULY = str(Path(__file__).resolve().parents[1] / "agent" / "mcp_tools" / "unruly_server.py")
WIDGET = "application/vnd.jupyter.widget-view+json"


def saved(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outputs as a notebook saves them: each ``update_display_data`` applied by display id."""
    out: list[dict[str, Any]] = []
    where: dict[str, list[int]] = {}
    for o in outputs:
        display_id = (o.get("transient") or {}).get("display_id")
        if o.get("update"):
            for i in where.get(display_id, []):
                out[i] = {**out[i], "data": o["data"]}
            continue
        if display_id:
            where.setdefault(display_id, []).append(len(out))
        out.append(dict(o))
    return out


def _live_line(ip: Any, label: str) -> Callable[[], dict[str, Any] | None]:
    """The cell's output that is ``label``'s live progress bar, once it is shown (else None)."""
    def find() -> dict[str, Any] | None:
        for o in list(getattr(ip.display_pub, "outputs", [])):
            data = o.get("data") or {}
            if not o.get("update") and WIDGET in data and label in str(data.get("text/html")):
                return o
        return None
    return find


def _when(found: Callable[[], Any], then: Callable[[Any], None], timeout: float = 60) -> threading.Thread:
    """A helper thread that waits (up to ``timeout``) until ``found()`` returns something true,
    then calls ``then`` with it (None when it never came); the cell runs meanwhile on the main thread."""
    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not (seen := found()) and time.monotonic() < deadline:
            time.sleep(0.02)
        then(seen or None)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _static(outputs: list[dict[str, Any]], start: str) -> list[dict[str, Any]]:
    return [o for o in saved(outputs) if str((o.get("data") or {}).get("text/plain", "")).startswith(start)]


def test_mcp_servers_starting_show_a_live_line_then_a_static_one(ip, server, tmp_path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    ip.run_line_magic("config", "Agent.mcp_project_files = False")
    ip.run_line_magic("config", "Agent.mcp_start_wait = 60.0")  # the wait is the subject: never the limit
    ip.run_line_magic("config", f"Agent.mcp_servers = {{'held': {{'command': {sys.executable!r}, "
                                f"'args': [{UNRULY!r}, 'gate', {str(gate)!r}]}}}}")
    server.enqueue_text("Ready.")
    seen: list[Any] = []

    def release(line: Any) -> None:
        seen.append(line)
        with open(gate, "w", encoding="utf-8") as pipe:  # the server reads a line and serves
            pipe.write("go\n")

    try:
        with capture_output() as cap:
            watcher = _when(_live_line(ip, "Starting MCP servers"), release)
            ip.run_cell_magic("agent", "", "What can you do?")
        watcher.join(10)
        assert seen and seen[0] is not None, "no live progress line while the server was starting"
        outputs = [{"data": o.data, "transient": o.transient, "update": o.update} for o in cap.outputs]
        lines = _static(outputs, "MCP servers:")
        assert len(lines) == 1 and WIDGET not in lines[0]["data"], saved(outputs)
        assert lines[0]["data"]["text/plain"].startswith("MCP servers: 1 of 1 ready after")
        offered = [t["function"]["name"] for t in server.requests[-1].body["tools"]]
        assert "mcp__held__echo" in offered  # the cell waited for it and then offered its tool
    finally:
        if not seen:  # never let the server wait on the pipe for ever
            with open(gate, "w", encoding="utf-8") as pipe:
                pipe.write("go\n")


def test_window_discovery_shows_a_live_line_then_a_static_one(ip, tmp_path, monkeypatch):
    from ipyagent.testing import FakeProviderServer

    with FakeProviderServer(server_kind="llamacpp", served_window=16384) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        fake.meta_gate = gate = threading.Event()  # the server's listing waits until the test says
        fake.enqueue_text("Hello.")
        seen: list[Any] = []
        try:
            with capture_output() as cap:
                watcher = _when(lambda: fake.meta_requests and _live_line(ip, "Asking the server")(),
                                seen.append)
                ip.run_cell_magic("agent", "", "Hello?")
            watcher.join(10)
        finally:
            gate.set()
        assert seen and seen[0] is not None, "no live progress line while the server was asked for the window"
        outputs = [{"data": o.data, "transient": o.transient, "update": o.update} for o in cap.outputs]
        lines = _static(outputs, "Asking the server for the model's context window:")
        # the prompt waits discovery.DEFAULT_WAIT at most, then goes on without the answer
        assert len(lines) == 1 and WIDGET not in lines[0]["data"], saved(outputs)
        assert "no window known" in lines[0]["data"]["text/plain"]
        assert [r.kind for r in fake.requests] == ["chat"]  # the prompt went on
        assert discovery.DEFAULT_WAIT > 0


PRICES_AT_LOAD = """
import sys, threading
from IPython.core.interactiveshell import InteractiveShell
from ipyagent.kernel import extension
from ipyagent.providers import pricing

shell = InteractiveShell.instance()
assert "genai_prices" not in sys.modules
extension.load(shell)  # no model, no provider call
warming = pricing._warming
assert warming is not None, "loading the extension did not start loading the prices"
assert warming.name == "ipyagent-prices" and warming is not threading.current_thread()
warming.join(120)
assert "genai_prices" in sys.modules
print("PRICES LOADED IN THE BACKGROUND")
"""


def test_prices_load_in_the_background_from_load_ext_so_no_reply_waits_for_them(tmp_path):
    """genai-prices (about half a second to load) is loaded by a thread that ``%load_ext``
    starts, before any prompt is written; only a reply that ended within that half second after
    loading the extension could wait for the rest. A fresh interpreter: this one has it loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "IPYAGENT_"))}
    done = subprocess.run([sys.executable, "-c", PRICES_AT_LOAD], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "PRICES LOADED IN THE BACKGROUND" in done.stdout, done.stdout + done.stderr
