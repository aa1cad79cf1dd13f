"""An in-process IPython shell with ipyagent loaded: what the magic tests drive with
``run_line_magic``/``run_cell_magic`` (a real kernel is in tests/test_kernel_*.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ipyagent.bridge import comm as bridge_mod
from ipyagent.kernel import extension
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing import globalipapp


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
