"""What the platform under the kernel offers: threads, or none (a Pyodide kernel in a browser page).

ipyagent runs in CPython kernels and in JupyterLite's Pyodide kernel (``sys.platform ==
"emscripten"``, the tour in the docs). Pyodide has the ``threading`` module, its locks and events,
but ``Thread.start`` raises ("can't start new thread"), and nothing reaches the kernel while a cell
runs: the frontend's messages wait for the cell's end. The few places that start a worker thread
(the price warm-up, the widget's ticker, idle compaction) or wait for a frontend's answer inside a
cell ask here first, and do without in the browser.

It reads ``sys.platform`` at each call, so a test can force the browser's answers in CPython.
"""

from __future__ import annotations

import sys

__all__ = ["can_start_threads", "in_browser"]


def in_browser() -> bool:
    """Whether this Python runs in a web page (Pyodide, Emscripten's WebAssembly)."""
    return sys.platform == "emscripten"


def can_start_threads() -> bool:
    """Whether a worker thread can be started here, and a message from the frontend can reach
    the kernel while a cell runs (both need a second thread; a browser page's kernel has one)."""
    return not in_browser()
