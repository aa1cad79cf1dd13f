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

from ipyagent.bridge.push import INBOX_ATTRIBUTE, PushInbox, inbox_of
from ipyagent.kernel import extension


def start_ipython() -> InteractiveShell:
    globalipapp.start_ipython()
    return InteractiveShell.instance()


def forget_extension(shell: InteractiveShell) -> None:
    """Drop what an earlier load left on the shared shell: its runtime, its push inbox and its
    ``Agent`` config (each test's shell is as a new kernel's)."""
    shell.config.pop("Agent", None)  # %config Agent.… also lands in the shell's config
    fresh_inbox(shell)
    runtime = extension.get_runtime(shell)
    if runtime is not None:
        if runtime.config in shell.configurables:
            shell.configurables.remove(runtime.config)
        delattr(shell, extension._RUNTIME_ATTR)


def fresh_inbox(shell: InteractiveShell) -> PushInbox:
    """The shell's push inbox, empty, as a new kernel's (what an earlier test pushed is gone)."""
    vars(shell).pop(INBOX_ATTRIBUTE, None)
    return inbox_of(shell)


@contextlib.contextmanager
def extension_shell(model: str = "openai:fake-model") -> Iterator[tuple[InteractiveShell, Any]]:
    """The shell with a freshly loaded extension and ``Agent.model`` set; unloaded afterwards."""
    shell = start_ipython()
    forget_extension(shell)
    # The shell is shared by every test of a worker, and its display hook decides whether to show a
    # value by tokenizing the last *stored* cell (DisplayHook.quiet): a cell another test stored that
    # does not tokenize alone ("EOF in multi-line statement") made a later `%config Agent.x` raise.
    # A new history starts at cell 1, as `%reset` leaves it: IPython numbers its input list by
    # the execution count, and a count left running on past an emptied list reads another cell's value.
    # `reset` keeps the shown values (output_hist_reprs) that a later cell of the same number would
    # be read with.
    shell.history_manager.reset()
    shell.history_manager.output_hist_reprs.clear()
    shell.execution_count = 1
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


def run(shell: InteractiveShell, line: str, cell: str, cell_id: str | None = None) -> Any:
    """Run ``%%agent line`` with body ``cell`` (as the cell ``cell_id``); its captured output."""
    if cell_id is not None:
        shell.get_parent = lambda: {"metadata": {"cellId": cell_id}}
    elif "get_parent" in shell.__dict__:
        del shell.get_parent
    with capture_output() as cap:
        shell.run_cell_magic("agent", line, cell)
    return cap
