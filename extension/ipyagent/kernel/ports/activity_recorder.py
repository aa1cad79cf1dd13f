"""Recording notebook activity in the kernel, from IPython's ``pre_run_cell`` / ``post_run_cell``.

For each cell that runs (not ``%%agent`` / ``%compact`` cells, nor anything that runs during an
agent run): its execution count and source, its value's text repr (what IPython's display hook
stored in ``history_manager.output_hist_reprs``), its error (type, message, the last frames of the
traceback) and what it printed or displayed. Printed and displayed text is read in the kernel:
ipykernel's ``OutStream`` copies every write to its ``echo`` stream, where a small recorder sits
(chaining to any echo already there), and its display publisher takes a hook; under a plain
terminal IPython there is neither, and output is simply not recorded.

Every text is bounded when recorded and the log keeps the newest :data:`KEEP` cells, so the
per-prompt cost stays flat however long the notebook runs. Each session has a mark (the log
position and a namespace snapshot); :meth:`ActivityRecorder.activity` gives what happened since
it, :meth:`ActivityRecorder.mark` moves it once a prompt's run is over.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import traceback
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import IPython

from ipyagent.agent.prompt.activity_block import clip
from ipyagent.agent.prompt.notebook_context import CellError, CellRecord, NotebookActivity
from ipyagent.kernel.ports import namespace as ns

KEEP = 256  # cells kept in the log
ERRORS_KEPT = 512  # errors kept by execution count, for {Err[n]}
SOURCE_CHARS, VALUE_CHARS, OUTPUT_CHARS = 6000, 3000, 4000
FRAMES = 3
_IPYTHON_DIR = os.path.dirname(IPython.__file__) + os.sep
# cells that only talk to ipyagent itself are not notebook activity
_AGENT_CELL = re.compile(r"^\s*%%(agent|compact)\b")
_AGENT_LINE = re.compile(r"^\s*(%agent\b|%compact\b|%(re)?load_ext\s+ipyagent\b|%config\s+Agent\b|#|$)")


def is_agent_cell(source: str) -> bool:
    if _AGENT_CELL.match(source):
        return True
    return all(_AGENT_LINE.match(line) for line in source.splitlines()) and bool(source.strip())


class BoundedText:
    """Appended text kept as its head and its tail (``limit`` characters in all), counting the rest."""

    def __init__(self, limit: int):
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = ""
        self.head_full = self.head_limit == 0
        self.tail: list[str] = []
        self.tail_len = 0
        self.compact_at = 8 * self.tail_limit
        self.dropped = 0

    def write(self, text: str) -> None:
        if self.head_full:  # the common case in a long print loop: as little work as possible
            self.tail.append(text)
            self.tail_len += len(text)
            if self.tail_len > self.compact_at:
                self._compact()
            return
        room = self.head_limit - len(self.head)
        self.head += text[:room]
        self.head_full = len(self.head) >= self.head_limit
        if len(text) > room:
            self.tail.append(text[room:])
            self.tail_len += len(text) - room
            if self.tail_len > self.compact_at:
                self._compact()

    def _compact(self) -> None:
        joined = "".join(self.tail)
        self.dropped += len(joined) - self.tail_limit
        self.tail = [joined[-self.tail_limit:]]
        self.tail_len = self.tail_limit

    def text(self) -> str:
        tail = "".join(self.tail)
        dropped = self.dropped + max(0, len(tail) - self.tail_limit)
        tail = tail[-self.tail_limit:] if dropped else tail
        if dropped:
            return f"{self.head}\n[… {dropped:,} characters not kept …]\n{tail}"
        return self.head + tail


@dataclass
class _Running:
    source: str
    cell_id: str | None
    skip: bool
    output: BoundedText = field(default_factory=lambda: BoundedText(OUTPUT_CHARS))


@dataclass
class Mark:
    seq: int
    names: ns.Snapshot


class _EchoTee:
    """Sits in an ``OutStream``'s ``echo`` slot: records writes for the running cell, passes them on."""

    def __init__(self, recorder: ActivityRecorder, forward: Any):
        self.recorder, self.forward = recorder, forward

    def write(self, text: str) -> None:
        sink = self.recorder.sink
        if sink is not None:
            sink(text)
        if self.forward is not None:
            self.forward.write(text)

    def flush(self) -> None:
        if self.forward is not None:
            self.forward.flush()


class ActivityRecorder:
    def __init__(self, shell: Any, *, keep: int = KEEP):
        self.shell = shell
        self.cells: deque[CellRecord] = deque(maxlen=keep)
        self.seq = 0  # cells recorded so far (the log's position)
        self.errors: OrderedDict[int, CellError] = OrderedDict()
        self.marks: dict[str, Mark] = {}
        self.baseline = Mark(0, {})
        self._running: list[_Running] = []
        self._paused = 0
        self.sink: Any = None  # where printed text goes now: the running cell's buffer, or nowhere
        self._tees: list[tuple[Any, _EchoTee]] = []
        self._display_hooked = False
        self.started = False

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self.baseline = Mark(self.seq, self._snapshot())
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self._install_output_capture()

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        for event, callback in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            with contextlib.suppress(ValueError):
                self.shell.events.unregister(event, callback)
        for stream, tee in self._tees:
            if getattr(stream, "echo", None) is tee:
                stream.echo = tee.forward
        self._tees.clear()
        publisher: Any = getattr(self.shell, "display_pub", None)
        if self._display_hooked and hasattr(publisher, "unregister_hook"):
            publisher.unregister_hook(self._display_hook)
        self._display_hooked = False
        self._running.clear()
        self.sink = None

    def _install_output_capture(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            if not hasattr(stream, "echo") or isinstance(getattr(stream, "echo", None), _EchoTee):
                continue  # not an ipykernel OutStream, or already recorded
            try:
                tee = _EchoTee(self, stream.echo)
                stream.echo = tee
            except Exception:  # noqa: BLE001 - a stream that cannot be wrapped is not recorded
                continue
            self._tees.append((stream, tee))
        publisher: Any = getattr(self.shell, "display_pub", None)
        if not self._display_hooked and hasattr(publisher, "register_hook"):
            publisher.register_hook(self._display_hook)  # thread-local: the shell's (main) thread
            self._display_hooked = True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Record nothing while an agent run (and the code it runs) is going on."""
        self._paused += 1
        self._update_sink()
        try:
            yield
        finally:
            self._paused -= 1
            self._update_sink()

    def _update_sink(self) -> None:
        top = self._running[-1] if self._running else None
        self.sink = top.output.write if top is not None and not top.skip and not self._paused else None

    # ---- IPython events ------------------------------------------------------------------------

    def pre_run_cell(self, info: Any) -> None:
        source = getattr(info, "raw_cell", "") or ""
        source = source if isinstance(source, str) else str(source)
        skip = bool(self._paused) or is_agent_cell(source) or any(r.skip for r in self._running)
        self._running.append(_Running(source, getattr(info, "cell_id", None), skip))
        self._update_sink()
        if not skip:
            try:
                self._install_output_capture()  # a stream replaced since: record it too
            except Exception:  # noqa: BLE001 - recording must never break the user's cell
                pass

    def post_run_cell(self, result: Any) -> None:
        if not self._running:
            return  # the cell that loaded the extension: its start was not seen
        running = self._running.pop()
        self._update_sink()
        if running.skip or self._paused:
            return
        try:
            self.cells.append(self._record(running, result))
            self.seq += 1
        except Exception:  # noqa: BLE001 - recording must never break the user's cell
            pass

    def _output(self, text: str) -> None:
        sink = self.sink
        if sink is not None and isinstance(text, str):
            sink(text)

    def _display_hook(self, msg: Any) -> Any:
        try:
            if msg.get("msg_type") == "display_data" or msg.get("header", {}).get("msg_type") == "display_data":
                text = ((msg.get("content") or {}).get("data") or {}).get("text/plain")
                if isinstance(text, str) and text:
                    self._output(f"[display] {text}\n")
        except Exception:  # noqa: BLE001 - recording must never break the user's cell
            pass
        return msg

    # ---- records -------------------------------------------------------------------------------

    def _record(self, running: _Running, result: Any) -> CellRecord:
        count = getattr(result, "execution_count", None)
        value = None
        if count is not None and getattr(result, "result", None) is not None:
            shown = getattr(getattr(self.shell, "history_manager", None), "output_hist_reprs", {}).get(count)
            if isinstance(shown, str):
                value = clip(shown, VALUE_CHARS)
        error = None
        exc = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
        if isinstance(exc, BaseException):
            error = self.describe_error(exc)
            if count is not None:
                self.errors[count] = error
                while len(self.errors) > ERRORS_KEPT:
                    self.errors.popitem(last=False)
        return CellRecord(count, clip(running.source, SOURCE_CHARS), value, running.output.text(), error,
                          running.cell_id)

    def describe_error(self, exc: BaseException) -> CellError:
        kind = type(exc)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        if isinstance(exc, SyntaxError):
            frames = (f"  line {exc.lineno}: {(exc.text or '').strip()}",) if exc.lineno else ()
            return CellError(name, clip(str(exc.msg or ""), 600), frames)
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - the user's exception may fail in str()
            message = "(the exception's str() failed)"
        return CellError(name, clip(message, 600), self._frames(exc))

    def _frames(self, exc: BaseException) -> tuple[str, ...]:
        try:
            summary = traceback.extract_tb(exc.__traceback__)
        except Exception:  # noqa: BLE001 - a broken traceback: no frames
            return ()
        cells = getattr(getattr(self.shell, "compile", None), "_filename_map", None) or {}
        frames = []
        stack: list[traceback.FrameSummary] = list(summary)
        while len(stack) > 1 and stack[0].filename.startswith(_IPYTHON_DIR):
            stack.pop(0)  # IPython running the cell (run_code), as IPython's own traceback leaves out
        for frame in stack[-FRAMES:]:
            count = cells.get(frame.filename)
            where = f"Cell In[{count}]" if count is not None else f'File "{frame.filename}"'
            text = f"  {where}, line {frame.lineno}, in {frame.name}"
            if frame.line:
                text += f"\n    {clip(frame.line.strip(), 200)}"
            frames.append(text)
        return tuple(frames)

    # ---- per session ---------------------------------------------------------------------------

    def _snapshot(self) -> ns.Snapshot:
        return ns.snapshot(self.shell.user_ns, getattr(self.shell, "user_ns_hidden", None))

    def activity(self, session: str) -> NotebookActivity:
        """What happened since ``session``'s mark (since the extension loaded, for a new session)."""
        mark = self.marks.get(session, self.baseline)
        new = self.seq - mark.seq
        kept = min(new, len(self.cells))
        cells = [self.cells[-1 - i] for i in range(kept)]
        changes, _ = ns.diff(mark.names, self.shell.user_ns, getattr(self.shell, "user_ns_hidden", None))
        return NotebookActivity(cells, new - kept, changes)

    def mark(self, session: str) -> None:
        self.marks[session] = Mark(self.seq, self._snapshot())

    def error(self, count: int) -> CellError | None:
        return self.errors.get(count)
