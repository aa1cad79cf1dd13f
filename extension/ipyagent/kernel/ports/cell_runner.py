"""The ``python`` tool's code, run by IPython as a cell — inside the running ``%%agent`` cell.

:class:`IPythonCellRunner` implements the agent's ``CellRunner`` port with
``shell.run_cell(code, store_history=False)``: magics, ``!cmd``, ``%timeit``, input
transformations, the ``pre/post_run_cell`` events (autoreload, the inline matplotlib backend) all
apply, while the running cell keeps its execution count and the history is untouched. Whatever
the code shows is captured instead of reaching the ``%%agent`` cell's output area:

* ``sys.stdout`` / ``sys.stderr`` (their first 10 K and last 100 K characters: the rest is
  counted, never kept, so a print loop that never ends costs no memory), and file descriptors 1
  and 2 (``os.system``, subprocesses, C code) for the duration of the run (their last 1 MB);
* ``display()`` (a capturing display publisher that follows ``clear_output`` and display
  updates) and the last expression's value (its own display hook; a trailing ``;`` silences it);
* tracebacks: IPython's ``_showtraceback`` is redirected for the run, so an exception becomes the
  tool's error text and never an ``error`` output of the agent cell;
* matplotlib figures the code left open under a backend that shows nothing in the notebook
  (Agg, a GUI backend) are rendered to PNG, as the inline backend would have shown them.

An interrupt (KeyboardInterrupt, which IPython turns into a traceback) is raised again once
everything is restored, so the agent loop records it. Runs carry ``cell_id=TOOL_CELL_ID`` in the
``ExecutionInfo`` IPython hands to ``pre_run_cell`` / ``post_run_cell`` listeners, so those can
tell the agent's runs from the user's cells.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell

from ipyagent.agent.tools.cell import CellOutput, CellRun
from ipyagent.agent.tools.truncate import RollingText

__all__ = ["IPythonCellRunner", "TOOL_CELL_ID"]

TOOL_CELL_ID = "ipyagent-python-tool"
FD_TAIL_BYTES = 1_000_000  # at most this much of what went to the file descriptors is read back
_INLINE_BACKENDS = ("inline", "ipympl", "widget", "nbagg")


class _Publisher(DisplayPublisher):
    """Keeps displayed outputs in order; honours ``clear_output`` and updates by display id."""

    def __init__(self, outputs: list[CellOutput]):
        super().__init__()  # type: ignore[no-untyped-call]  # IPython's (untyped_calls_exclude misses super())
        self.captured = outputs
        self._by_display_id: dict[str, int] = {}

    def publish(self, data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None,
                update: Any = False, **kwargs: Any) -> None:
        display_id = (transient or {}).get("display_id")
        output = CellOutput(dict(data), dict(metadata or {}))
        if update:
            if display_id in self._by_display_id:
                self.captured[self._by_display_id[display_id]] = output
            return  # an update of an output shown before this run: nothing new to report
        if display_id:
            self._by_display_id[display_id] = len(self.captured)
        self.captured.append(output)

    def clear_output(self, wait: bool = False) -> None:
        self.captured.clear()
        self._by_display_id.clear()


class _ValueHook:
    """``sys.displayhook`` for the run: the last expression's value, formatted like Out[]."""

    def __init__(self, shell: Any, outputs: list[CellOutput], quiet: bool):
        self.shell = shell
        self.captured = outputs
        self.quiet = quiet

    def __call__(self, result: Any = None) -> None:
        if result is None or self.quiet:
            return
        data, metadata = self.shell.display_formatter.format(result)
        self.captured.append(CellOutput(dict(data), dict(metadata or {}), is_result=True))


def _quiet(code: str) -> bool:
    try:
        return bool(DisplayHook.semicolon_at_end_of_expression(code))
    except Exception:  # noqa: BLE001 - not tokenizable Python (a cell magic): IPython would not silence it either
        return False


class _FdCapture:
    """File descriptors 1 and 2 redirected to temporary files for the run, read back after."""

    def __init__(self) -> None:
        self.saved: dict[int, int] = {}
        self.files: dict[int, Any] = {}
        self.text: dict[int, str] = {1: "", 2: ""}

    def __enter__(self) -> _FdCapture:
        for fd in (1, 2):
            try:
                sink = tempfile.TemporaryFile()
                saved = os.dup(fd)
            except OSError:
                continue
            try:
                os.dup2(sink.fileno(), fd)
            except OSError:
                os.close(saved)
                sink.close()
                continue
            self.saved[fd], self.files[fd] = saved, sink
        return self

    def __exit__(self, *exc: Any) -> None:
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)
            os.close(saved)
            sink = self.files[fd]
            size = sink.seek(0, os.SEEK_END)
            sink.seek(max(0, size - FD_TAIL_BYTES))
            text = sink.read().decode("utf-8", errors="replace")
            sink.close()
            if size > FD_TAIL_BYTES:  # from the first whole line, and a word for what came before
                start = text.find("\n") + 1
                text = f"[... {size - FD_TAIL_BYTES + start:,} bytes left out here: not kept ...]\n{text[start:]}"
            self.text[fd] = text


def _figures() -> dict[int, Any]:
    """The open matplotlib figures by id (empty when pyplot was never imported)."""
    if "matplotlib.pyplot" not in sys.modules:
        return {}
    from matplotlib._pylab_helpers import Gcf

    return {id(m.canvas.figure): m.canvas.figure for m in Gcf.get_all_fig_managers()}


def _undisplayed_figures(before: dict[int, Any]) -> list[CellOutput]:
    """New open figures under a backend that shows nothing inline, as PNG outputs."""
    if "matplotlib" not in sys.modules:
        return []
    import matplotlib

    if any(name in matplotlib.get_backend().lower() for name in _INLINE_BACKENDS):
        return []
    outputs = []
    for key, figure in _figures().items():
        if key in before:
            continue
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", bbox_inches="tight")
        except Exception:  # noqa: BLE001 - a figure that cannot be drawn is left out
            continue
        import base64

        outputs.append(CellOutput({"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                                   "text/plain": repr(figure)}))
    return outputs


_MISSING = object()


@contextlib.contextmanager
def _restored(obj: Any, *names: str) -> Iterator[None]:
    """Put ``obj``'s attributes back as they were: instance attributes and traits get their old
    value, an attribute set on the instance over a class method (``_showtraceback``) goes away."""
    saved = {name: (name in vars(obj), getattr(obj, name, _MISSING)) for name in names}
    try:
        yield
    finally:
        for name, (in_dict, value) in saved.items():
            if in_dict:
                vars(obj)[name] = value
                continue
            vars(obj).pop(name, None)
            if value is not _MISSING and hasattr(getattr(type(obj), name, None), "__set__"):
                setattr(obj, name, value)  # a trait or property


class IPythonCellRunner:
    """Runs the agent's code through ``shell.run_cell``, capturing what it shows."""

    def __init__(self, shell: Any):
        self.shell = shell
        # ipykernel's run_cell takes (*args, **kwargs) and passes them on: ask IPython's own
        self._takes_cell_id = "cell_id" in inspect.signature(InteractiveShell.run_cell).parameters

    def run(self, code: str) -> CellRun:
        shell = self.shell
        outputs: list[CellOutput] = []
        tracebacks: list[str] = []
        stdout, stderr = RollingText(), RollingText()  # a head and a tail: printing without end costs no memory
        for stream in (sys.stdout, sys.stderr):  # what the agent cell printed so far goes out first
            with contextlib.suppress(Exception):
                stream.flush()
        figures = _figures()

        def show_traceback(etype: Any, evalue: Any, stb: list[str]) -> None:
            tracebacks.append(shell.InteractiveTB.stb2text(stb))

        displayhook = getattr(shell, "displayhook", None)
        trap = getattr(shell, "display_trap", None)  # sets sys.displayhook when no cell is running
        saved_streams = sys.stdout, sys.stderr, sys.displayhook
        saved_pub = shell.display_pub
        saved_trap_hook = getattr(trap, "hook", None)
        saved_exec_result = getattr(displayhook, "exec_result", None)
        kwargs = {"cell_id": TOOL_CELL_ID} if self._takes_cell_id else {}
        with _restored(shell, "_showtraceback", "_last_traceback", "_last_traceback_during_displayhook",
                       "last_execution_succeeded", "last_execution_result"), _FdCapture() as fds:
            try:
                sys.stdout, sys.stderr = stdout, stderr
                sys.displayhook = _ValueHook(shell, outputs, _quiet(code))
                if trap is not None:
                    trap.hook = sys.displayhook
                shell.display_pub = _Publisher(outputs)
                shell._showtraceback = show_traceback
                result = shell.run_cell(code, store_history=False, silent=False, **kwargs)
            finally:
                sys.stdout, sys.stderr, sys.displayhook = saved_streams
                shell.display_pub = saved_pub
                if trap is not None:
                    trap.hook = saved_trap_hook
                if displayhook is not None and hasattr(displayhook, "exec_result"):
                    displayhook.exec_result = saved_exec_result
        if isinstance(result.error_in_exec, KeyboardInterrupt):
            raise KeyboardInterrupt
        outputs += _undisplayed_figures(figures)
        failed = not result.success
        error = "\n".join(tracebacks) if tracebacks else None
        if failed and error is None:
            exc = result.error_before_exec or result.error_in_exec
            error = f"{type(exc).__name__}: {exc}" if exc is not None else "The code failed."
        out, err = stdout.getvalue(), stderr.getvalue()
        return CellRun(stdout=out + fds.text[1], stderr=err + fds.text[2], outputs=outputs,
                       error=error if failed else None, left_out_lines=stdout.left_out_lines + stderr.left_out_lines)
