"""Fixtures of the JupyterLite test: the site built by docs/lite/build_lite.py, served on
loopback by this process, and Debian's chromium with every host but 127.0.0.1 refused.

The site is built by ``.ci/run`` before the tests (``python docs/lite/build_lite.py``); where it
is missing or older than the checkout's package, the fixture builds it (about a minute, once).
Nothing is skipped: without chromium, Playwright or the Lite tools the test fails saying what to
install.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.lab_server import CHROMIUM_ARGS, chromium_or_fail

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "_build" / "lite"
# every host name resolves to nothing, except loopback: a request that would leave the machine
# fails in the resolver (the route check in the test counts any that tries)
ONLY_LOOPBACK = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def _stale(site: Path) -> bool:
    """Whether the site is missing, or older than a source of ipyagent's wheel or the tour."""
    built = site / "pyodide-pins.txt"
    if not built.exists():
        return True
    sources = [*(ROOT / "extension" / "ipyagent").rglob("*.py"), ROOT / "notebooks" / "how-compaction-works.ipynb",
               ROOT / "docs" / "lite" / "build_lite.py", ROOT / "pyproject.toml"]
    return max(p.stat().st_mtime for p in sources) > built.stat().st_mtime


@pytest.fixture(scope="session")
def lite_site() -> Path:
    if _stale(SITE):
        subprocess.run([sys.executable, str(ROOT / "docs" / "lite" / "build_lite.py"), "--output", str(SITE)],
                       check=True)
    return SITE


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json",
                      ".whl": "application/zip", ".ipynb": "application/json"}

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def lite_server(lite_site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (port from the OS), as a static host would serve it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(lite_site)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="lite-site", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="session")
def loopback_browser(playwright):
    chromium = chromium_or_fail()
    b = playwright.chromium.launch(executable_path=chromium, args=[*CHROMIUM_ARGS, ONLY_LOOPBACK], headless=True)
    yield b
    b.close()
