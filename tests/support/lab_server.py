"""A real Jupyter server (JupyterLab or Notebook 7) on loopback for the browser tests and the
benchmarks: a random free port, a token, its own config, runtime, settings and workspace folders;
its kernels over IPC.

The browser tests' fixtures (tests/browser/conftest.py) start these; tests/benchmarks/long_notebook.py
too. Chromium is Debian's, started with the flags below (never a browser Playwright downloads).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get("IPYAGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# jupyter-collaboration (a test dependency) turns real-time collaboration on in every server of
# the environment; the servers of the other tests run without it (a no-op where it is absent)
NO_RTC = "--YDocExtension.disable_rtc=True"
FAKE_KEY = "sk-ipyagent-browser-test-key"  # the OPENAI_API_KEY the fake provider of the browser tests demands


def chromium_or_fail() -> str:
    """The chromium to launch; a test without it fails (never skips) saying how to install it."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        import pytest

        pytest.fail(
            f"chromium not found at {CHROMIUM}: the browser tests need Debian's chromium "
            "(apt-get update && apt-get install -y chromium; .ci/install-test-parts does this), "
            "or IPYAGENT_CHROMIUM=/path/to/chromium",
            pytrace=False,
        )
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path, runtime: Path):
        self.root = root
        self.port = port
        self.token = token
        self.proc = proc
        self.log = log
        self.runtime = runtime  # JUPYTER_RUNTIME_DIR: the kernels' connection files and IPC sockets

    def stop(self) -> None:
        stop_server(self.proc)
        shutil.rmtree(self.runtime, ignore_errors=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for k in self.api("/api/kernels"):
            self.api(f"/api/kernels/{k['id']}", method="DELETE")


def start_server(base: Path, module: str, extra: list[str], env_extra: dict | None = None) -> JupyterLab:
    root = base / "root"
    root.mkdir()
    settings = base / "settings"
    # no "news" toast over the page
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    # the test extra brings nbdime and jupytext (docs/pipelines.md's tools), whose server and lab
    # extensions would load into every JupyterLab here (jupytext's contents manager, nbdime's
    # buttons): the servers the browser tests start are JupyterLab with ipyagent alone
    config = base / "config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"jupyterlab-jupytext": True, "nbdime-jupyterlab": True}}))
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"jupyterlab_jupytext": False, "nbdime": False}}}))
    port = _free_port()
    token = secrets.token_hex(16)
    # The kernels talk over IPC: a TCP kernel binds ports its manager found free a moment before,
    # and beside other workers' kernels and servers one was sometimes taken by then (the kernel
    # dies with "Address already in use"). Each kernel's sockets are named after its connection
    # file, so the runtime folder is short (Unix socket paths are limited to ~100 characters).
    runtime = Path(tempfile.mkdtemp(prefix="jrt-"))
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("JPY_SESSION_NAME", None)
    env.update(env_extra or {})
    log = base / f"{module}.log"
    cmd = [
        sys.executable,
        "-m",
        module,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--allow-root",
        "--KernelManager.transport=ipc",
        *extra,
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    lab = JupyterLab(root, port, token, proc, log, runtime)
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            shutil.rmtree(runtime, ignore_errors=True)
            raise RuntimeError(f"{module} exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            lab.api("/api/status")
            return lab
        except Exception:  # noqa: BLE001 - the server is not up yet: try again until the deadline
            if time.time() > deadline:
                lab.stop()
                raise RuntimeError(f"{module} did not start:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.3)


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
