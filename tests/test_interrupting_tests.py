"""The tests that interrupt themselves pass whatever SIGINT disposition the runner gave pytest.

A test that calls ``_thread.interrupt_main()`` or sends ``SIGINT`` to its own process (what the
kernel's interrupt does) relies on Python's handler raising ``KeyboardInterrupt`` in the main
thread. A runner that starts pytest with SIGINT ignored (bash does so for a job started with
``&`` when job control is off; the ignored disposition survives exec) makes both do nothing: three
such tests once failed there. Each asks for the ``sigint_raises`` fixture (tests/conftest.py),
which installs Python's handler for the test. The kernels' interrupts need nothing: ipykernel
installs that handler itself around each request, and ``kernel/idle.py`` its own between them.
"""

from __future__ import annotations

import ast
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SELF_INTERRUPT = re.compile(r"interrupt_main|SIGINT")
FIXTURE = "sigint_raises"


def _asks_for_the_fixture(function: ast.FunctionDef) -> bool:
    if FIXTURE in [a.arg for a in function.args.args]:
        return True
    return any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "usefixtures"
               and any(isinstance(a, ast.Constant) and a.value == FIXTURE for a in d.args)
               for d in function.decorator_list)


def self_interrupting_tests() -> list[tuple[str, bool]]:
    """Every test function whose code interrupts its own process, and whether it asks for the fixture."""
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path == Path(__file__).resolve() or "node_modules" in path.parts:
            continue
        source = path.read_text(encoding="utf-8")
        if not SELF_INTERRUPT.search(source):
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                if SELF_INTERRUPT.search(ast.get_source_segment(source, node) or ""):
                    found.append((f"{path.relative_to(TESTS.parent)}::{node.name}", _asks_for_the_fixture(node)))
    return found


def test_every_test_that_interrupts_itself_installs_pythons_sigint_handler():
    found = self_interrupting_tests()
    assert len(found) >= 4  # the stream, the tool, the network wait and bash's process group
    assert [name for name, asks in found if not asks] == []


@pytest.mark.slow  # it runs them in a pytest of its own: one waits 20 s on the network
def test_they_pass_under_a_runner_that_ignores_sigint():
    names = [name for name, _ in self_interrupting_tests()]

    def ignore_sigint() -> None:  # in the child, before exec: as bash does for a background job
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *names],
                          cwd=TESTS.parent, capture_output=True, text=True, preexec_fn=ignore_sigint, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(names)} passed" in done.stdout, done.stdout[-2000:]
