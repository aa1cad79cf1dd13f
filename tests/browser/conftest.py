"""Fixtures for the browser tests: a real JupyterLab on loopback, driven by Playwright with
Debian's chromium (never a downloaded browser build).

These tests are not skipped when something is missing: without chromium, Playwright, JupyterLab
or the built labextension they fail with a message saying what to install.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from support.chromium import CHROMIUM_ARGS, chromium_or_fail

ARTIFACTS = Path(__file__).parent / "artifacts"
# jupyter-collaboration (a test dependency) turns real-time collaboration on in every server of
# the environment; the servers of the other tests run without it (a no-op where it is absent)
NO_RTC = "--YDocExtension.disable_rtc=True"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    return chromium_or_fail()


@pytest.fixture(scope="session")
def labextension_installed() -> None:
    """The bridge must be installed where JupyterLab looks (pip install -e . puts it there)."""
    try:
        from jupyterlab.labextensions import LabExtensionApp  # noqa: F401
    except ImportError:
        pytest.fail("jupyterlab is not installed: pip install -e '.[test]'", pytrace=False)
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
    )
    text = out.stdout + out.stderr
    if "ipyagent-bridge" not in text:
        pytest.fail(
            "the ipyagent-bridge labextension is not installed (pip install -e . builds it into "
            "share/jupyter/labextensions/ipyagent-bridge; it needs Node.js at build time):\n" + text,
            pytrace=False,
        )


class JupyterLab:
    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.root = root
        self.port = port
        self.token = token
        self.proc = proc
        self.log = log

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


def _start_server(base: Path, module: str, extra: list[str], env_extra: dict | None = None) -> JupyterLab:
    root = base / "root"
    root.mkdir()
    settings = base / "settings"
    # no "news" toast over the page
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port = _free_port()
    token = secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
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
        *extra,
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    lab = JupyterLab(root, port, token, proc, log)
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{module} exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            lab.api("/api/status")
            return lab
        except Exception:  # noqa: BLE001 - the server is not up yet: try again until the deadline
            if time.time() > deadline:
                _stop(proc)
                pytest.fail(f"{module} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


FAKE_KEY = "sk-ipyagent-browser-test-key"


@pytest.fixture(scope="session")
def fake_provider():
    """ipyagent's loopback fake model server; the kernels JupyterLab starts use it."""
    from ipyagent.testing import FakeProviderServer

    with FakeProviderServer() as server:
        yield server


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory, labextension_installed, fake_provider) -> JupyterLab:
    """JupyterLab 4 on 127.0.0.1, a random free port, a token, a temporary root directory."""
    lab = _start_server(
        tmp_path_factory.mktemp("jlab"),
        "jupyterlab",
        ["--LabApp.expose_app_in_browser=True", NO_RTC],
        env_extra={
            "OPENAI_BASE_URL": fake_provider.openai_base_url,
            "OPENAI_API_KEY": FAKE_KEY,
            "IPYAGENT_MODEL": "openai:fake-model",
        },
    )
    lab.fake = fake_provider
    yield lab
    _stop(lab.proc)


@pytest.fixture(scope="session")
def collaborative_lab(tmp_path_factory, labextension_installed, fake_provider) -> JupyterLab:
    """JupyterLab with real-time collaboration (jupyter-collaboration): its Y store in a file of
    its own (``lab.ystore``), the rest as ``jupyterlab``."""
    try:
        import jupyter_server_ydoc  # noqa: F401
    except ImportError:
        pytest.fail("jupyter-collaboration is not installed: pip install -e '.[test]'", pytrace=False)
    base = tmp_path_factory.mktemp("rtc")
    ystore = base / "ystore.db"
    lab = _start_server(
        base,
        "jupyterlab",
        ["--LabApp.expose_app_in_browser=True", "--YDocExtension.disable_rtc=False",
         f"--SQLiteYStore.db_path={ystore}"],
        env_extra={
            "OPENAI_BASE_URL": fake_provider.openai_base_url,
            "OPENAI_API_KEY": FAKE_KEY,
            "IPYAGENT_MODEL": "openai:fake-model",
        },
    )
    lab.fake = fake_provider
    lab.ystore = ystore
    yield lab
    _stop(lab.proc)


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory, labextension_installed) -> JupyterLab:
    """Jupyter Notebook 7, started the same way."""
    try:
        import notebook  # noqa: F401
    except ImportError:
        pytest.fail("notebook (Jupyter Notebook 7) is not installed: pip install -e '.[test]'", pytrace=False)
    nb = _start_server(
        tmp_path_factory.mktemp("nb7"), "notebook", ["--JupyterNotebookApp.expose_app_in_browser=True", NO_RTC]
    )
    yield nb
    _stop(nb.proc)


@pytest.fixture(scope="session")
def browser(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[test]'", pytrace=False)
    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
    yield b
    b.close()
    pw.stop()


@pytest.fixture
def context(browser, request):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    logs: list[str] = []
    ctx.logs = logs  # type: ignore[attr-defined]
    ctx.on("console", lambda m: logs.append(f"{m.type}: {m.text}"))
    yield ctx
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        for i, page in enumerate(ctx.pages):
            try:
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failed-{i}.png"))
            except Exception:  # noqa: BLE001 - a screenshot of a page that is gone
                pass
        (ARTIFACTS / f"{request.node.name}-console.log").write_text("\n".join(logs))
    ctx.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
