"""The test markers, applied and kept honest (pyproject.toml registers them; README "Developing").

* ``browser`` and ``interop`` come from the folder: every test under ``tests/browser`` or
  ``tests/interop`` gets its folder's marker, and every test under ``tests/lite`` (the tour in
  JupyterLite) ``browser``.
* ``kernel`` is written on the test (or the module's ``pytestmark``) and checked: an audit hook
  sees every process this interpreter starts, and a test that starts a kernel — ipykernel's
  launcher (jupyter_client, nbclient) or an ``ipyagent run`` subprocess — without being marked
  ``kernel`` (or ``browser`` / ``interop``) errors at teardown. So ``-m "not kernel and not browser
  and not interop and not slow"`` starts no kernel.
* Under pytest-xdist (``-n 3 --dist loadgroup``, the README's commands) tests/browser is one
  ``xdist_group`` (one worker runs all of it: one JupyterLab and one chromium for all of them), and
  tests/lite another. tests/interop is none: its tests go to whichever worker is free, and each
  worker starts the llama.cpp servers its tests ask for (a server starts in ~2 s; its tests take
  minutes, and in one group they were a serial tail of a quarter of an hour beside the browser's).
* ``slow`` is written on the tests that take over ~10 s and belong to none of the above; they run
  in CI like every other test.

tests/conftest.py imports the hooks below, which registers them.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Generator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
# folder -> its tests' marker: tests/lite (the tour in JupyterLite's Pyodide kernel) is a browser
# test, in a group of its own, so that it runs beside tests/browser's serial run, not after it
FOLDER_MARKERS = {"browser": "browser", "interop": "interop", "lite": "browser"}
GROUPED = ("browser", "lite")  # the folders whose tests one worker runs (see above)
MAY_START_KERNELS = ("kernel", *set(FOLDER_MARKERS.values()))
# what launching a kernel looks like in an argv (basenames): python -m ipykernel_launcher (the
# kernelspec jupyter_client runs), python -m ipykernel, python -m ipyagent run / ipyagent run
_LAUNCHERS = {"ipykernel_launcher", "ipykernel_launcher.py"}
_PAIRS = {("-m", "ipykernel"), ("ipyagent", "run"), ("ipyagent.cli", "run")}
_ARGV = {"subprocess.Popen": 1, "os.posix_spawn": 1, "os.exec": 1, "os.spawn": 2, "os.system": 0}

_started: list[str] = []  # kernel launches (their argv) during the test that runs now


def starts_a_kernel(argv: Any) -> bool:
    """Whether ``argv`` (a list, or a command line as one string) launches a kernel."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        text = os.fsdecode(argv)
        try:
            args = shlex.split(text)
        except ValueError:  # unbalanced quotes
            args = text.split()
    else:
        args = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
    names = [os.path.basename(a) for a in args]
    return bool(_LAUNCHERS.intersection(names)) or any(pair in _PAIRS for pair in pairwise(names))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    at = _ARGV.get(event)
    if at is not None and len(args) > at and starts_a_kernel(argv := args[at]):
        _started.append(argv if isinstance(argv, str) else shlex.join(map(str, argv)))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one only records


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # a test outside tests/ (a path given on the command line)
            continue
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])
            if folder in GROUPED and item.config.pluginmanager.hasplugin("xdist"):  # one worker: one server for all
                item.add_marker(pytest.mark.xdist_group(folder))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _started.clear()
    try:
        return (yield)
    finally:
        _started.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (report.when == "teardown" and report.passed and _started
            and not any(item.get_closest_marker(name) for name in MAY_START_KERNELS)):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} started a kernel but is not marked kernel (add "
                           f"@pytest.mark.kernel, or pytestmark in the module):\n  " + "\n  ".join(_started))
    return report
