"""When and how the agent compacts: the budget check before every provider call (also inside tool
loops), the check that the request fits its window, the one compact-and-retry after an overflow,
and compaction by hand (``%compact``) or in the kernel's idle time.

Automatic compaction that fails is reported and counted: three failures in a row stop it until the
user acts (``compaction/compact.py``'s :class:`FailureTracker`). A :class:`Compactor` is made for
the agent's state of the moment (its budget and ports); what lasts across runs — the failures,
the listeners and the notices given — is held by the agent and passed in.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ipyagent.agent import run_events as ev
from ipyagent.agent.budget import RequestBudget
from ipyagent.agent.compaction_oracle import CompactionRuling
from ipyagent.agent.ports import RunPorts
from ipyagent.agent.provider_summarizer import summarizer_for
from ipyagent.agent.redaction import RedactedSummaries, Redactor
from ipyagent.compaction.compact import FailureTracker
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import should_compact
from ipyagent.compaction.summarizer import Summarizer, SummarizerError
from ipyagent.core import CompactionCancelled, NothingToCompact
from ipyagent.session import masking
from ipyagent.session.context import edits_by_target
from ipyagent.shapes import Entry

__all__ = ["OVERFLOW_GAVE_UP", "AgentRunError", "Compactor"]

OVERFLOW_GAVE_UP = ("Context overflow recovery failed after one compact-and-retry attempt. "
                    "Reduce the context (%compact with a focus, or a new session) or switch to a larger-context model.")

# AgentLoop.compact's reason -> the trigger its entry records
_TRIGGER_OF = {"manual": "manual", "threshold": "foreground", "overflow": "overflow", "idle": "idle"}


class AgentRunError(RuntimeError):
    """The run stopped on an error the user must act on; the session stays valid."""


@dataclass
class Compactor:
    budget: RequestBudget  # the session, its settings and what the next request holds
    ports: RunPorts  # the run's summariser, compaction oracle and namespace describer
    output: ev.RunOutput  # where events go and appended entries are counted
    failures: FailureTracker  # automatic compactions failed in a row (kept across runs)
    cancel: threading.Event  # the run's interrupt: stops a summary request

    def redactor(self) -> Redactor:
        config = self.budget.config
        return Redactor.configured(config.provider_options, extra=config.secrets)

    def summarizer(self, cancel: threading.Event | None = None, reason: str = "threshold") -> Summarizer:
        """The run's summariser (the ports', else one from the settings that reports its progress as
        :class:`~ipyagent.agent.run_events.CompactionProgress` and stops on ``cancel``, default the run's)."""
        if self.ports.summarizer is not None:
            return self.ports.summarizer
        config = self.budget.config
        window = self.budget.window() if config.model else None
        started = time.monotonic()

        def progress(tokens: int, limit: int | None) -> None:
            self.output.emit(ev.CompactionProgress(reason, tokens, limit, time.monotonic() - started))

        return summarizer_for(config, cancel=cancel or self.cancel, session_window=window, progress=progress,
                              providers=self.budget.providers)

    def compact(self, focus: str | None = None, *, reason: str = "manual", extra: Entry | None = None,
                plan: CompactionPlan | None = None, cancel: threading.Event | None = None,
                trigger: str | None = None) -> Entry | None:
        """Compact now (see :meth:`ipyagent.agent.loop.AgentLoop.compact`). Manual compaction raises on
        failure; automatic compaction reports and counts it, and returns None."""
        oracle = self.ports.compaction_oracle
        if plan is None and reason == "manual" and oracle is not None:
            ruling = oracle.rule(self.budget.session, manual=True)
            plan = self._ruled_plan(ruling)
            trigger = trigger or (ruling.trigger if ruling is not None and ruling.compact else None)
        extra = {**(extra or {}), "trigger": trigger or _TRIGGER_OF.get(reason, "foreground")}
        started = time.monotonic()
        self.output.emit(ev.CompactionStart(reason, self.budget.request_tokens()))  # what the trigger saw
        try:
            entry = self._compact_session(focus, reason, extra, plan, cancel)
        except KeyboardInterrupt:
            self.output.emit(ev.CompactionEnd(reason, aborted=True, duration=time.monotonic() - started))
            raise
        except (NothingToCompact, CompactionCancelled, SummarizerError) as exc:
            self._failed(exc, reason, time.monotonic() - started)
            if reason == "manual":
                raise
            return None
        self.output.appended(entry)
        self.failures.succeeded()
        self.output.emit(ev.CompactionEnd(reason, entry=entry, will_retry=reason == "overflow",
                                          duration=time.monotonic() - started))
        return entry

    def _compact_session(self, focus: str | None, reason: str, extra: Entry, plan: CompactionPlan | None,
                         cancel: threading.Event | None) -> Entry:
        budget = self.budget.fitted()
        summarizer = RedactedSummaries(self.summarizer(cancel, reason), self.redactor())
        return self.budget.session.compact(summarizer, budget.settings(self.budget.config.compaction.enabled),
                                           focus=focus, reason=reason,
                                           summary_input_tokens=self.budget.summary_input_tokens(), extra=extra,
                                           describe=self.ports.describe_namespace, plan=plan,
                                           room=self.budget.room(budget))

    def _failed(self, exc: Exception, reason: str, duration: float) -> None:
        """Tell a compaction that did not happen (an automatic one skipped for the same reason is
        said once a run), and count a failed summary."""
        said = self.output.said_this_run(str(exc))
        if not (reason != "manual" and isinstance(exc, NothingToCompact) and said):
            self.output.emit(ev.CompactionEnd(reason, error=str(exc), aborted=isinstance(exc, CompactionCancelled),
                                              duration=duration, skipped=isinstance(exc, NothingToCompact)))
        if reason != "manual" and isinstance(exc, SummarizerError):
            self.failures.failed(str(exc))
            if self.failures.blocked:
                self.output.emit(ev.AgentError(self.failures.message(), kind="compaction"))

    def _ruled_plan(self, ruling: CompactionRuling | None) -> CompactionPlan | None:
        """The plan with the oracle's cut (None: planned as usual)."""
        if ruling is None or not ruling.compact or ruling.first_kept_entry_id is None:
            return None
        return self.budget.session.prepare_compaction(self.budget.settings(),
                                                      first_kept_entry_id=ruling.first_kept_entry_id)

    def check_budget(self) -> Entry | None:
        """Compact if the context is over the threshold; called before every provider call."""
        config = self.budget.config
        if not config.compaction.enabled or self.failures.blocked:
            return None
        oracle = self.ports.compaction_oracle
        ruling = oracle.rule(self.budget.session, manual=False) if oracle else None
        if ruling is not None:
            return self.compact(reason="threshold", plan=self._ruled_plan(ruling),
                                trigger=ruling.trigger) if ruling.compact else None
        budget = self.budget.fitted()
        if budget.problem:
            self.output.notice_once(budget.problem, budget.problem)
        settings, window = budget.settings(config.compaction.enabled), budget.window
        if not should_compact(self.budget.request_tokens(), window, settings):
            return None
        if not self.budget.fits_after_deepest_compaction():
            return None  # no summary makes room: the request's check says what is too large
        if config.auto_mask_turns is not None and self._auto_mask(config.auto_mask_turns) \
                and not should_compact(self.budget.request_tokens(), window, settings):
            return None  # masking old tool results made room: no summary needed
        return self.compact(reason="threshold")

    def _auto_mask(self, recent_turns: int) -> int:
        """Mask the tool results before the last ``recent_turns`` turns (Agent.auto_mask_turns);
        how many were masked."""
        session = self.budget.session
        state = session.context_state()
        targets = masking.tool_results_before(state.projection, edits_by_target(session.path()), recent_turns)
        for entry in targets:
            self.output.append(session, masking.mask_edit(entry), self.redactor(), message=False)
        return len(targets)

    def check_request_fits(self) -> None:
        """Refuse to send a request known not to fit the window, saying what is too large and
        what to do; compact first where that may still make room."""
        fit = self.budget.request_fits()
        if fit.fits:
            return
        if self.budget.config.compaction.enabled and not self.failures.blocked \
                and self.budget.fits_after_deepest_compaction():
            self.compact(reason="threshold")
            fit = self.budget.request_fits()
            if fit.fits:
                return
        assert fit.window is not None
        raise AgentRunError(self.budget.too_large(fit.tokens, fit.window, self._why_no_room()))

    def recover_from_overflow(self, reason: str) -> None:
        """Compact once after the provider said the request overflowed (``reason``); raises
        :class:`AgentRunError` where no compaction can make room."""
        fit = self.budget.request_fits()
        if fit.window and not self.budget.fits_after_deepest_compaction():
            raise AgentRunError(f"Context overflow ({reason}). "
                                + self.budget.too_large(fit.tokens, fit.window, self._why_no_room()))
        self.output.emit(ev.AgentError(f"Context overflow ({reason}); compacting and retrying once.",
                                       kind="overflow"))
        if self.compact(reason="overflow") is None:
            raise AgentRunError(f"Context overflow, and compaction was not possible. {OVERFLOW_GAVE_UP}")

    def _why_no_room(self) -> str:
        if not self.budget.config.compaction.enabled:
            return "and automatic compaction is off (Agent.auto_compact = False; %compact compacts by hand)"
        if self.failures.blocked:
            return "and automatic compaction has stopped after failing (see above; %compact retries)"
        if not self.budget.fits_after_deepest_compaction():
            return "even after the deepest compaction (so none was run)"
        return "and compaction cannot make it smaller"
