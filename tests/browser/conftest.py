"""Fixtures for the browser tests: a real JupyterLab on loopback, driven by Playwright with
Debian's chromium (never a downloaded browser build).

The helpers the tests call (open a notebook, run a cell, read outputs) are functions in
tests/support/lab_pages.py; the servers are started by tests/support/lab_server.py.

These tests are not skipped when something is missing: without chromium, Playwright, JupyterLab
or the built labextension they fail with a message saying what to install.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.lab_pages import ARTIFACTS
from support.lab_server import (
    CHROMIUM_ARGS,
    FAKE_KEY,
    NO_RTC,
    JupyterLab,
    chromium_or_fail,
    start_server,
)


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


def _start(base: Path, module: str, extra: list[str], env_extra: dict | None = None) -> JupyterLab:
    try:
        return start_server(base, module, extra, env_extra)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def fresh_kernels(jupyterlab):
    """Shut down every kernel of ``jupyterlab`` after the test (a module opts in with
    ``pytestmark = pytest.mark.usefixtures("fresh_kernels")``)."""
    yield
    try:
        jupyterlab.shutdown_kernels()
    except Exception:  # noqa: BLE001 - the kernels may be gone already
        pass


@pytest.fixture(scope="session")
def fake_provider():
    """ipyagent's loopback fake model server; the kernels JupyterLab starts use it."""
    from ipyagent.testing import FakeProviderServer

    with FakeProviderServer() as server:
        yield server


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory, labextension_installed, fake_provider) -> JupyterLab:
    """JupyterLab 4 on 127.0.0.1, a random free port, a token, a temporary root directory."""
    lab = _start(
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
    lab.stop()


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
    lab = _start(
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
    lab.stop()


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory, labextension_installed) -> JupyterLab:
    """Jupyter Notebook 7, started the same way."""
    try:
        import notebook  # noqa: F401
    except ImportError:
        pytest.fail("notebook (Jupyter Notebook 7) is not installed: pip install -e '.[test]'", pytrace=False)
    nb = _start(
        tmp_path_factory.mktemp("nb7"), "notebook", ["--JupyterNotebookApp.expose_app_in_browser=True", NO_RTC]
    )
    yield nb
    nb.stop()


@pytest.fixture(scope="session")
def browser(chromium_path, playwright):
    b = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
    yield b
    b.close()


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
