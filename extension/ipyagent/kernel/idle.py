"""Compaction in the kernel's idle time (``Agent.idle_compaction``).

When a ``%%agent`` run ends with the context above ``Agent.idle_compaction`` of the compaction
threshold, :class:`IdleCompactor` arms a job: once no cell has been executing for
``Agent.idle_compaction_delay`` seconds (IPython's ``pre_execute`` / ``post_execute`` events), a
worker thread compacts the session as the loop would (``AgentLoop.compact(reason="idle")``: the
same hooks and entry, with ``trigger: "idle"``), while ordinary cells run — cutting deep enough
that the next turn of typical size (the median of the latest turns) fits under the threshold, so
the next cell need not compact in the foreground; where even the deepest cut cannot leave that
much, no job is armed (``%agent status`` says why). The run's budget widget stays live meanwhile
("compacting in the background…", the summary's tokens as they arrive) and then shows the new
budget; the entry goes to the notebook through the bridge.

* A ``%%agent`` or ``%compact`` cell (and every ``%agent`` command that reads or changes the
  session) first :meth:`~IdleCompactor.join` s a running job, showing its progress. A job still
  waiting for the kernel to be idle is dropped by a ``%%agent`` or ``%compact`` cell (which
  compacts in the foreground as it always did, if it must) and left armed by an ``%agent``
  command (``%agent status`` after a run says it is armed; it starts once the kernel is idle).
* An interrupt (while the kernel is idle, or in any cell while the job runs), a model change, a
  branch or session switch and the kernel's end :meth:`~IdleCompactor.cancel` it: its summary
  request is stopped and no entry is written. A summary that has arrived is checked once more
  for a cancel right before the entry is made, so an entry is either whole or absent.
* It never runs in ``ipyagent run`` (the bridge's frontend says so), after a replayed cell or with
  ``Agent.replay = "on"``, without a kernel (plain IPython), or when automatic compaction is off
  or has stopped after failures.

``session/`` and ``compaction/`` know nothing of threads: :attr:`IdleCompactor.lock` is the one lock
around appending (a cell's run holds it, the worker holds it while it compacts), and every
main-thread path that writes a session settles the job first.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ipyagent import host
from ipyagent.agent import run_events as ev
from ipyagent.agent.budget import RequestBudget
from ipyagent.agent.ports import RunPorts
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools import ApprovalCallback
from ipyagent.bridge.comm import KernelBridge
from ipyagent.compaction.summarizer import SummarizerError, SummaryRequest, SummaryResponse
from ipyagent.core import CompactionCancelled
from ipyagent.display.journal_view import JournalOutput
from ipyagent.display.progress import ProgressLine
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.kernel.persistence import SessionSlot
from ipyagent.shapes import Entry

__all__ = ["HEADLESS_FRONTEND", "IdleCompactor", "IdleJob"]

HEADLESS_FRONTEND = "ipyagent-run"  # the bridge frontend of ``ipyagent run`` (bridge/headless.py)
BACKGROUND = "Compacting in the background…"
NO_THREADS = "no threads in this kernel (a browser page)"


@dataclass
class IdleJob:
    """One armed idle compaction: ``state`` goes waiting → running → done (or waiting → dropped)."""

    slot: Any
    config: Any
    view: Any = None  # the run's RunView, kept live until the job ends
    state: str = "waiting"
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    entry: Entry | None = None
    outcome: str = ""  # one line: how it ended
    cancelled_by: str = ""  # what cancelled it (``cancel(why)``)
    error: str = ""  # why the compaction left no entry
    tokens: int = 0  # the summary's tokens so far
    limit: int | None = None
    started: float = 0.0
    before: int = 0
    thread: threading.Thread | None = None
    journal: JournalOutput | None = None  # for the arming run's output


class _Cancellable:
    """The summariser of an idle job: a cancel that arrives while (or just after) the summary is
    made turns into ``CompactionCancelled``, which leaves the session unchanged and is no failure."""

    def __init__(self, inner: Any, cancel: threading.Event):
        self.inner, self.cancel = inner, cancel

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        try:
            response: SummaryResponse = self.inner.summarize(request)
        except SummarizerError:
            if self.cancel.is_set():
                raise CompactionCancelled("The background compaction was cancelled.") from None
            raise
        if self.cancel.is_set():
            raise CompactionCancelled("The background compaction was cancelled.")
        return response


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


class IdleRuntime(Protocol):
    """What the idle compactor uses of the kernel's runtime (``kernel/runtime.py``'s ``AgentRuntime``,
    which builds the compactor, so it is named by what it offers rather than imported)."""

    @property
    def config(self) -> AgentSettings: ...

    @property
    def shell(self) -> Any: ...  # the IPython shell (its ``kernel`` is None in plain IPython)

    @property
    def bridge(self) -> KernelBridge | None: ...

    def ports_for(self, *, approve: ApprovalCallback | None = None) -> RunPorts: ...

    def persist(self, slot: SessionSlot, config: RunConfig | None = None, *, force: bool = False,
                journal: Callable[[Mapping[str, object], Mapping[str, object]], bool] | None = None) -> str | None: ...


class IdleCompactor:
    """The kernel runtime's idle compactions (at most one job at a time); see the module."""

    def __init__(self, runtime: IdleRuntime, *, clock: Callable[[], float] = time.monotonic):
        self.runtime = runtime
        self.lock = threading.RLock()  # the one lock around appending to a session while a job may run
        self._clock = clock
        self._cond = threading.Condition()
        self._executing = 0
        self._quiet_since = clock()
        self.job: IdleJob | None = None
        self.last = ""  # how the latest job ended (``%agent status``)
        self._sigint_installed = False

    # ---- the kernel's activity (IPython events, on the main thread) -----------------------

    def listen(self, events: Any) -> None:
        """Hear the kernel's activity from IPython's ``shell.events`` (None: a shell without them)."""
        for name, callback in self._callbacks():
            if events is not None and callback not in events.callbacks.get(name, []):
                events.register(name, callback)

    def stop_listening(self, events: Any) -> None:
        for name, callback in self._callbacks():
            if events is not None and callback in events.callbacks.get(name, []):
                events.unregister(name, callback)

    def _callbacks(self) -> list[tuple[str, Callable[..., None]]]:
        return [("pre_execute", self.pre_execute), ("post_execute", self.post_execute),
                ("post_run_cell", self.post_run_cell)]

    def pre_execute(self) -> None:
        with self._cond:
            self._executing += 1
            self._cond.notify_all()

    def post_execute(self) -> None:
        with self._cond:
            self._executing = max(0, self._executing - 1)
            self._quiet_since = self._clock()
            self._cond.notify_all()

    def post_run_cell(self, result: Any) -> None:
        if isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt):
            self.cancel("interrupted")

    # ---- arming ------------------------------------------------------------------------------

    def why_not(self, run: Any) -> str | None:
        """Why the kernel would not compact in its idle time after ``run`` (None: it would)."""
        runtime = self.runtime
        share = float(runtime.config.idle_compaction or 0)
        if share <= 0:
            return "Agent.idle_compaction is off"
        if not host.can_start_threads():
            return NO_THREADS
        if getattr(runtime.shell, "kernel", None) is None:
            return "no kernel (plain IPython)"
        bridge = runtime.bridge
        if bridge is not None and bridge.frontend == HEADLESS_FRONTEND:
            return "ipyagent run"
        if run.replaying is not None or runtime.config.replay == "on":
            return "a replay"
        if not run.config.compaction.enabled or run.agent.failures.blocked:
            return "automatic compaction is off"
        return None

    def due(self, budget: RequestBudget) -> bool:
        """Whether the context is above the idle share of the compaction threshold."""
        try:
            threshold = budget.fitted().threshold
            share = float(self.runtime.config.idle_compaction)
            return threshold is not None and budget.request_tokens() > share * threshold
        except Exception:  # noqa: BLE001 - no window or model known: nothing to compact against
            return False

    def no_room(self, budget: RequestBudget) -> str:
        """Why an idle compaction would be no use ("" when it would): it cuts deep enough that the
        next turn of typical size fits under the threshold, and where even the deepest cut cannot
        leave that, the next cell would compact in the foreground anyway."""
        try:
            turn = budget.typical_turn()
            if budget.deepest_leaves_room(turn):
                return ""
        except Exception:  # noqa: BLE001 - no window or model known: nothing to compact against
            return ""
        return (f"no compaction leaves room for a turn of typical size (about {turn:,} tokens) under the "
                "threshold; the next cell compacts when it must")

    def arm(self, run: Any) -> bool:
        """After a run ends: arm a job if one is due; True when it took the run's view (then the job
        closes it when it ends)."""
        if self.why_not(run) is not None or not self.due(run.agent.budget):
            return False
        no_room = self.no_room(run.agent.budget)
        if no_room:
            self.last = f"not started after the last run: {no_room}"
            return False
        self.cancel("a new run ended")
        job = IdleJob(run.slot, run.config, view=run.view)
        self._watch_interrupts()
        with self._cond:
            self.job = job
        if job.view is not None and job.view.widget is not None:
            job.view.widget.set_status("The kernel compacts the context when it is idle…")
        job.thread = threading.Thread(target=self._work, args=(job,), name="ipyagent-idle-compaction", daemon=True)
        job.thread.start()
        return True

    def _watch_interrupts(self) -> None:
        """An interrupt while the kernel is idle cancels the job. ipykernel ignores SIGINT between
        requests and restores its saved handler after each one; this runs inside a request, so the
        handler it restores becomes ours (one that does nothing but cancel)."""
        kernel = getattr(self.runtime.shell, "kernel", None)
        if self._sigint_installed or kernel is None or not hasattr(kernel, "saved_sigint_handler"):
            return
        previous = kernel.saved_sigint_handler

        def on_interrupt(signum: int, frame: Any) -> None:
            self.cancel("interrupted", wait=False)
            if callable(previous) and previous not in (signal.default_int_handler,):
                previous(signum, frame)

        kernel.saved_sigint_handler = on_interrupt
        self._sigint_installed = True

    # ---- the worker --------------------------------------------------------------------------

    def _idle_long_enough(self, job: IdleJob) -> bool:
        """Wait until no cell has executed for the delay; False when the job was cancelled or dropped."""
        with self._cond:
            while job.state == "waiting" and not job.cancel.is_set():
                delay = float(self.runtime.config.idle_compaction_delay)
                if self._executing:
                    self._cond.wait()
                    continue
                remaining = self._quiet_since + delay - self._clock()
                if remaining <= 0:
                    job.state = "running"
                    return True
                self._cond.wait(remaining)
            return False

    def _work(self, job: IdleJob) -> None:
        try:
            if not self._idle_long_enough(job):
                job.outcome = "dropped: a cell started before the kernel was idle"
                return
            with self.lock:
                if job.cancel.is_set():
                    job.outcome = f"cancelled before it started ({job.cancelled_by or 'cancelled'})"
                    return
                unwanted = self._unwanted(job)
                if unwanted:
                    job.outcome = f"dropped: {unwanted}"
                    return
                self._compact(job)
        except Exception as exc:  # noqa: BLE001 - a background job must never take the kernel down
            job.outcome = f"failed: {type(exc).__name__}: {exc}"
        finally:
            self._finish(job)

    def _unwanted(self, job: IdleJob) -> str:
        """Why a job armed after a run no longer should start (the settings or the session changed
        while it waited: an ``%agent`` command or ``%config`` leaves a waiting job armed); "" when
        it should."""
        config = self.runtime.config
        if float(config.idle_compaction or 0) <= 0:
            return "Agent.idle_compaction was turned off"
        if config.replay == "on":
            return "replay was turned on"
        if not config.auto_compact:
            return "automatic compaction was turned off"
        if not self.due(job.slot.agent.budget):
            return "the context is below the idle share now"
        return ""

    def _compact(self, job: IdleJob) -> None:
        agent, runtime = job.slot.agent, self.runtime
        job.started, job.before = self._clock(), agent.budget.request_tokens()
        unsubscribe = agent.subscribe(lambda event: self._on_event(job, event))
        try:
            ports = runtime.ports_for()
            with agent.using(ports):
                summarizer = _Cancellable(agent.compactor.summarizer(job.cancel, "idle"), job.cancel)
                with agent.using(dataclasses.replace(ports, summarizer=summarizer)):
                    job.entry = agent.compact(reason="idle", cancel=job.cancel)
        finally:
            unsubscribe()
        elapsed = self._clock() - job.started
        if job.entry is None:
            job.outcome = (f"cancelled ({job.cancelled_by or 'cancelled'}): no entry written" if job.cancel.is_set()
                           else f"wrote nothing ({job.error or 'nothing to compact'})")
            return
        after = agent.budget.request_tokens()
        job.outcome = f"compacted in the background: {job.before:,} → {after:,} tokens in {elapsed:.1f} s"
        bridge = runtime.bridge
        if bridge is not None and bridge.connected:  # else the next run saves it (a journal output)
            # a journal (the page stopped acknowledging) goes into the run that armed the job, never
            # into the cell running now; without a place there, the next run's journal carries it
            if runtime.persist(job.slot, job.config, journal=lambda data, metadata: self._keep_journal(
                    job, data, metadata)) == "kept":
                job.outcome += "; the page did not acknowledge it: the next run saves it"

    @staticmethod
    def _keep_journal(job: IdleJob, data: Mapping[str, object], metadata: Mapping[str, object]) -> bool:
        """Keep the journal for the output of the run that armed ``job`` (its view writes it there
        when the job ends); False when that run has no output to write it in."""
        if job.view is None or getattr(job.view, "handle", None) is None or job.view.widget is None:
            return False
        job.journal = (data, metadata)
        return True

    def _on_event(self, job: IdleJob, event: Any) -> None:
        if isinstance(event, ev.CompactionProgress):
            job.tokens, job.limit = event.tokens, event.limit
        elif isinstance(event, ev.CompactionEnd) and event.error:
            job.error = event.error
        widget = job.view.widget if job.view is not None else None
        if widget is None or not isinstance(event, (ev.CompactionStart, ev.CompactionProgress)):
            return
        try:
            if isinstance(event, ev.CompactionStart):  # the line ticks while the server reads the
                # conversation (no token for a while), as the foreground one does; it stops when the view closes
                widget.start_ticker(lambda: f"{BACKGROUND} {self.progress_text(job)}", interval=0.5)
            else:
                widget.set_status(f"{BACKGROUND} {self.progress_text(job)}")
        except Exception:  # noqa: BLE001 - the widget must never break the job
            pass

    def progress_text(self, job: IdleJob) -> str:
        limit = f" / {job.limit:,}" if job.limit else ""
        elapsed = self._clock() - job.started if job.started else 0.0
        reading = "" if job.tokens else " (the server reads the conversation before the summary's first token)"
        return f"{job.tokens:,}{limit} tokens of summary, {elapsed:.1f} s{reading}"

    def _finish(self, job: IdleJob) -> None:
        with self._cond:
            if job.state in ("waiting", "running"):
                job.state = "done"
        try:
            if job.view is not None:  # the arming run's output: what became of the compaction its line
                # said it would run, and the journal if any
                said = job.outcome if job.entry is not None or not job.outcome else f"idle compaction {job.outcome}"
                job.view.close(_sentence(said) if said else "", journal=job.journal, background=True)
        except Exception:  # noqa: BLE001 - a closed comm (the page went away): nothing to update
            pass
        with self._cond:
            if self.job is job:
                self.job = None
            self.last = job.outcome
            self._cond.notify_all()
        job.done.set()

    # ---- settling a job from the main thread -------------------------------------------------

    def running(self) -> IdleJob | None:
        with self._cond:
            return self.job if self.job is not None and self.job.state == "running" else None

    def cancel(self, why: str = "cancelled", *, wait: bool = True) -> bool:
        """Stop the job, if any (its summary request too): no entry is written. True when one was
        stopped. ``wait``: until its thread has ended (not from a signal handler)."""
        with self._cond:
            job = self.job
            if job is None:
                return False
            job.cancelled_by = job.cancelled_by or why
            job.cancel.set()
            if job.state == "waiting":
                job.state = "dropped"
            self._cond.notify_all()
        if wait:
            job.done.wait()
        return True

    def join(self, *, show: bool = True, drop_waiting: bool = True) -> Entry | None:
        """Before a run: a job still waiting is dropped, a running one is waited for (a progress
        line in this cell meanwhile; an interrupt cancels it). Returns the entry it wrote.
        ``drop_waiting=False`` (an ``%agent`` command that compacts nothing) leaves a waiting job
        armed: it cannot start while the command's cell executes, and it plans from the session as
        the command leaves it."""
        with self._cond:
            job = self.job
            if job is None:
                return None
            if job.state == "waiting":
                if not drop_waiting:
                    return None
                job.state = "dropped"
                self._cond.notify_all()
        if job.state == "dropped":
            job.done.wait()
            return None
        line = ProgressLine("Waiting for the background compaction") if show else None
        try:
            while not job.done.wait(0.1):
                if line is not None:
                    line.update(self.progress_text(job), job.tokens, job.limit)
        except KeyboardInterrupt:
            self.cancel("interrupted")
            if line is not None:
                line.close("Background compaction cancelled by the interrupt; no entry was written.")
            raise
        if line is not None:
            line.close(_sentence(job.outcome) if job.outcome else None)
        return job.entry

    def status(self) -> str:
        """One line for ``%agent status``."""
        with self._cond:
            job = self.job
        if job is not None and job.state == "running":
            return f"idle compaction: running ({self.progress_text(job)})"
        if job is not None:
            return "idle compaction: armed (starts when the kernel has been idle a moment)"
        share = float(self.runtime.config.idle_compaction or 0)
        setting = f"above {share:.0%} of the threshold" if share > 0 else "off"
        if share > 0 and not host.can_start_threads():
            setting = f"off ({NO_THREADS}: each run compacts in the foreground)"
        return f"idle compaction: {setting}" + (f"; the last one {self.last}" if self.last else "")
