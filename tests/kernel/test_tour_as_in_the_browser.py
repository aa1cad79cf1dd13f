"""The tour as JupyterLite's Pyodide kernel runs it, in this process (issue 36): what the browser
lacks is taken away (``sys.platform == "emscripten"``: no thread; no ``regex``, no ``nh3``), the
shell keeps the parent header on its ``kernel`` as the Pyodide kernel does (no ``get_parent`` of
its own, no ``__session__``), and the notebook sits in the kernel's folder under the drive.

Every cell of the tour runs without an error; the session is found on the drive by the running
cell's id and replays its recording: the same compactions at the same points, no journal lost.
tests/lite runs the same tour in the real Pyodide kernel in chromium (slower, in CI).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest
from IPython.utils.capture import capture_output

from ipyagent import patterns
from ipyagent.display import untrusted
from ipyagent.kernel import extension
from ipyagent.store import hydration
from support.shell import forget_extension, fresh_inbox, start_ipython

pytestmark = pytest.mark.slow

TOUR = Path(__file__).resolve().parents[2] / "notebooks" / "how-compaction-works.ipynb"
BEFORE = re.compile(r"Compacted \(threshold\): ([\d,]+) tokens")


class PyodideLikeKernel:
    """What the Pyodide kernel offers of itself: the current request's parent header."""

    def __init__(self) -> None:
        self.parent: dict = {}

    def get_parent(self) -> dict:
        return self.parent


@pytest.fixture
def browser_like(monkeypatch, tmp_path):
    shell = start_ipython()  # before threads are taken away: IPython's history thread starts with it
    drive = tmp_path / "drive"
    (drive / "lessons").mkdir(parents=True)
    shutil.copy(TOUR, drive / "lessons" / TOUR.name)
    monkeypatch.chdir(drive / "lessons")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(hydration, "DRIVE", str(drive))
    monkeypatch.setattr(patterns, "_regex", None)
    monkeypatch.setitem(sys.modules, "nh3", None)
    untrusted._markdown_cleaner.cache_clear()
    untrusted._tool_cleaner.cache_clear()
    started: list[str] = []

    def no_thread(self, *args, **kwargs):
        started.append(self.name)
        raise RuntimeError("can't start new thread")  # what Pyodide says

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    fresh_inbox(shell)  # a new kernel's: nothing an earlier test pushed
    forget_extension(shell)
    kernel = PyodideLikeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    monkeypatch.setattr(sys, "platform", "emscripten")
    try:
        yield shell, kernel, started
    finally:
        extension.unload(shell)
        forget_extension(shell)
        untrusted._markdown_cleaner.cache_clear()
        untrusted._tool_cleaner.cache_clear()


def test_the_tour_runs_as_in_the_pyodide_kernel(browser_like):
    shell, kernel, started = browser_like
    nb = json.loads(TOUR.read_text(encoding="utf-8"))
    shown: dict[str, str] = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        kernel.parent = {"header": {"msg_type": "execute_request"}, "metadata": {"cellId": cell["id"]}}
        with capture_output() as captured:
            result = shell.run_cell("".join(cell["source"]), store_history=True)
        assert result.success, (cell["id"], result.error_before_exec or result.error_in_exec, captured.stdout)
        shown[cell["id"]] = captured.stdout + "\n".join(str(o.data.get("text/plain", "")) for o in captured.outputs)

    assert "resumed default (46 entries, from disk)" in shown["tour-setup"]  # found on the drive
    recorded = [BEFORE.findall("".join(o.get("data", {}).get("text/plain", "")))
                for c in nb["cells"] for o in c.get("outputs", [])]
    assert BEFORE.findall("\n".join(shown.values())) == [b for found in recorded for b in found] == \
        ["3,509", "3,713", "3,534"]
    runtime = extension.get_runtime(shell)
    slot = runtime.slots["default"]
    stored = nb["metadata"]["ipyagent"]["sessions"]["default"]
    assert slot.session.leaf_id == stored["leaf"]  # the replay moved along the recording
    assert [e["id"] for e in slot.session.entries] == [e["id"] for e in stored["entries"]]
    assert not started  # nothing tried to start a thread
    with capture_output() as captured:
        shell.run_line_magic("agent", "status")
    assert "idle compaction: off (no threads in this kernel (a browser page)" in captured.stdout
