"""Make docs/images/widget.png: the compaction tour, replayed in a real JupyterLab, with the
budget widget just after the first automatic compaction.

    python docs/make_screenshot.py        # needs Debian's chromium and the test extra

No provider is configured for the kernel, so the notebook replays its recorded session.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
NOTEBOOK = "how-compaction-works.ipynb"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    base = Path(tempfile.mkdtemp())
    root = base / "root"
    shutil.copytree(ROOT / "notebooks", root)
    port, token = free_port(), secrets.token_hex(8)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "IPYAGENT_MODEL")}
    env.update(JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTERLAB_WORKSPACES_DIR=str(base / "ws"))
    lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                            f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
                            f"--ServerApp.root_dir={root}", "--allow-root", "--LabApp.expose_app_in_browser=True"],
                           env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?reset&token={token}")
            page.wait_for_function(
                "() => { const a = window.jupyterapp; if (!a) return false;"
                " const w = [...a.shell.widgets('main')].find(w => w.context);"
                " const k = w && w.sessionContext.session && w.sessionContext.session.kernel;"
                " return !!(k && k.status === 'idle'); }", timeout=120_000)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(
                "() => { const w = [...window.jupyterapp.shell.widgets('main')].find(w => w.context);"
                " return w.sessionContext.session.kernel.status === 'idle' &&"
                " w.content.widgets.every(c => c.model.type !== 'code' || c.model.executionCount !== null"
                " || !c.model.sharedModel.getSource().trim()); }", timeout=300_000)
            widget = page.locator(".jupyter-widgets", has_text="1 compaction ").first
            widget.scroll_into_view_if_needed()
            out = ROOT / "docs" / "images" / "widget.png"
            widget.screenshot(path=str(out))
            print(f"wrote {out}")
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
