"""The fixtures several test modules use (``server``, ``ip``, ``registry``) and
the markers' hooks (support/markers.py). Builders of messages and sessions are plain functions in
``support/builders.py``; nothing imports this file.

``tests/`` is on ``sys.path`` (pytest's rootdir conftest), so ``from support.builders import …``
works in every test module, whichever folder of tests/ it is in.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer

# the markers' hooks (folder markers, the check that only tests marked `kernel` start kernels)
from support.markers import pytest_collection_modifyitems, pytest_runtest_makereport, pytest_runtest_protocol  # noqa: F401
from support.shell import extension_shell

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (some shells set it): pytest keeps
# its rewritten test modules, and the kernels and commands the tests start keep ipyagent compiled,
# instead of rewriting and compiling them again in every process of every run (about 10 CPU
# seconds of each worker's collection). __pycache__ is ignored by git.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """Python's own SIGINT handler (``KeyboardInterrupt`` in the main thread) for a test that
    interrupts itself with ``_thread.interrupt_main()`` or ``os.kill(os.getpid(), SIGINT)``, as the
    kernel's interrupt does. A runner that starts pytest with SIGINT ignored (bash starts a
    background job so, and the ignored disposition survives exec) makes both do nothing; the
    handler the test found is put back after it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def registry() -> HookRegistry:
    return HookRegistry()


@pytest.fixture
def server(monkeypatch):
    """The fake provider, with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` pointing at it (modules
    that talk to it another way define their own ``server``)."""
    with FakeProviderServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        yield srv


@pytest.fixture
def ip(monkeypatch, tmp_path):
    """The in-process shell with the extension loaded (support/shell.py), in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with extension_shell() as (shell, runtime):
        yield shell
    assert runtime is not None




@pytest.fixture(scope="session")
def playwright() -> Iterator[Any]:
    """The worker's one Playwright (its sync API runs one instance per thread: tests/browser and
    tests/lite may share a worker, and a second ``sync_playwright().start()`` there fails with
    "using Playwright Sync API inside the asyncio loop")."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[test]'", pytrace=False)
    pw = sync_playwright().start()
    yield pw
    pw.stop()
