"""An in-process IPython shell with ipyagent loaded: what the magic tests drive with
``run_line_magic``/``run_cell_magic`` (a real kernel is in tests/kernel/test_kernel_*.py).

tests/conftest.py makes it the fixture ``ip``; ``runtime_of`` and ``run`` below are what its tests use
on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output

from ipyagent.bridge import comm as bridge_mod
from ipyagent.kernel import extension


def start_ipython() -> InteractiveShell:
    globalipapp.start_ipython()
    return InteractiveShell.instance()


def forget_extension(shell: InteractiveShell) -> None:
    """Drop what an earlier load left on the shared shell: its runtime and its ``Agent`` config."""
    shell.config.pop("Agent", None)  # %config Agent.… also lands in the shell's config
    runtime = extension.get_runtime(shell)
    if runtime is not None:
        if runtime.config in shell.configurables:
            shell.configurables.remove(runtime.config)
        delattr(shell, extension._RUNTIME_ATTR)


@contextlib.contextmanager
def extension_shell(model: str = "openai:fake-model") -> Iterator[tuple[InteractiveShell, Any]]:
    """The shell with a freshly loaded extension and ``Agent.model`` set; unloaded afterwards."""
    shell = start_ipython()
    bridge_mod._reset_for_tests()
    forget_extension(shell)
    runtime = extension.load(shell)
    try:
        shell.run_line_magic("config", f"Agent.model = {model!r}")
        yield shell, runtime
    finally:
        extension.unload(shell)
        forget_extension(shell)
        if "get_parent" in shell.__dict__:
            del shell.get_parent


def runtime_of(shell: InteractiveShell) -> Any:
    """The extension's runtime on ``shell``."""
    return extension.get_runtime(shell)


def run(shell: InteractiveShell, line: str, cell: str, cell_id: str | None = None, *, fails: bool = False) -> Any:
    """Run ``%%agent line`` with body ``cell`` (as the cell ``cell_id``); its captured output.
    ``fails``: the cell must fail as a failing cell does (``AgentCellError``: the model's error, a
    replay that cannot serve it); the exception is then on ``cap.error``."""
    from ipyagent.kernel.cell_run import AgentCellError

    if cell_id is not None:
        shell.get_parent = lambda: {"metadata": {"cellId": cell_id}, "content": {"code": f"%%agent {line}\n{cell}"}}
    elif "get_parent" in shell.__dict__:
        del shell.get_parent
    error = None
    with capture_output() as cap:
        try:
            shell.run_cell_magic("agent", line, cell)
        except AgentCellError as exc:
            if not fails:
                raise
            error = exc
    if fails:
        assert error is not None, "the %%agent cell did not fail"
    cap.error = error
    return cap
