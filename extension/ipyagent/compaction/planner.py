"""Planning a compaction that makes room, and summarising until it does (pure).

Pi plans a compaction once (``prepareCompaction``) and summarises what the plan says. A small
window needs more: the next request must fit under the trigger's threshold *after* compacting,
next to the system prompt and tools, so the compaction cuts deeper — a smaller kept tail, down to
the last message — where the usual cut would leave the context over it. What the next request
leaves the compaction is one value, :class:`CompactionRoom`; :class:`CompactionPlanner` plans
over one path (the usual cut, and the deeper ones); :func:`summarize_until_it_fits` asks for the
summary, and for another one deeper when the summary left no room. The session appends the
result (``core.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ipyagent.compaction.compact import MIN_SUMMARY_TOKENS, CompactionResult, SummaryDoesNotShrink, compact
from ipyagent.compaction.file_ops import FileOperation, format_file_lists
from ipyagent.compaction.ledger import Describe
from ipyagent.compaction.prepare import CompactionPlan, prepare_compaction
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import Summarizer
from ipyagent.session.context import ContextState
from ipyagent.session.entries import Entry
from ipyagent.session.tokens import Estimator

__all__ = ["CompactionPlanner", "CompactionRoom", "SummaryAsk", "summarize_until_it_fits"]


@dataclass(frozen=True)
class CompactionRoom:
    """What the next request leaves a compaction: it must stay under ``threshold`` (the trigger's:
    window − reserve) next to ``fixed`` tokens (the system prompt and the tools), the compacted
    messages counted as their estimates × ``factor`` (the server's tokens per estimated one)."""

    threshold: int
    fixed: int = 0
    factor: float = 1.0

    def fits(self, estimated: int) -> bool:
        """Whether a context of ``estimated`` tokens (summary and kept tail) leaves the next request under it."""
        return self.fixed + math.ceil(estimated * self.factor) <= self.threshold

    def for_summary(self, kept: int) -> int:
        """The tokens left to a summary next to ``kept`` estimated tokens kept verbatim."""
        return self.threshold - self.fixed - math.ceil(kept * self.factor)


@dataclass(frozen=True)
class SummaryAsk:
    """How the summary is asked for: the user's focus, the most a summary request may hold, and
    what describes the kernel's variables for the artifact ledger (None: names only)."""

    focus: str | None = None
    input_tokens: int | None = None
    describe: Describe | None = None


@dataclass(frozen=True)
class CompactionPlanner:
    """The plans for compacting one path (root→leaf) with its context ``state`` and ``settings``:
    the usual cut (Pi's ``prepareCompaction``) and deeper ones."""

    path: Sequence[Entry]
    state: ContextState
    estimator: Estimator
    settings: CompactionSettings = field(default_factory=CompactionSettings)
    operations_cache: dict[str, tuple[FileOperation, ...]] | None = None

    def plan(self, first_kept_entry_id: str | None = None, *, keep: int | None = None) -> CompactionPlan | None:
        """The plan (None: nothing to summarise); ``first_kept_entry_id`` fixes the cut, ``keep``
        replaces the settings' kept-tail budget."""
        settings = self.settings if keep is None else replace(self.settings, keep_recent_tokens=keep)
        return prepare_compaction(self.path, settings, estimator=self.estimator, state=self.state,
                                  operations_cache=self.operations_cache, first_kept_entry_id=first_kept_entry_id)

    def estimated_tokens(self) -> int:
        """The whole context by the estimator alone (no provider usage): what a summary's
        effect is measured against, so before and after are counted the same way."""
        return sum(self.state.estimates)

    def kept_tokens(self, plan: CompactionPlan) -> int:
        """Estimated tokens of what stays verbatim after compacting with ``plan`` (system
        messages aside: the compaction records them as its checkpoint)."""
        total = 0
        for p, tokens in zip(self.state.projection, self.state.weights()):
            system = p.entry.get("type") == "message" and p.entry["message"].get("role") == "system"
            if p.path_index >= plan.first_kept_index and p.entry.get("type") != "compaction" and not system:
                total += tokens
        return total

    def summary_tokens(self, summary: str | None) -> int:
        return self.estimator.estimate({"role": "compactionSummary", "summary": summary}) if summary else 0

    def deeper(self, plan: CompactionPlan | None) -> CompactionPlan | None:
        """A plan that keeps less than ``plan`` (None: nothing could be kept less): the kept-tail
        budget halved until the cut moves, down to 0 (the last message kept)."""
        current = plan.first_kept_index if plan is not None else -1
        keep = (self.kept_tokens(plan) if plan is not None else self.settings.keep_recent) // 2
        while True:
            candidate = self.plan(keep=keep)
            if candidate is not None and candidate.first_kept_index > current:
                return candidate
            if keep == 0:
                return None
            keep //= 2

    def plan_with_room(self, room: CompactionRoom | None) -> CompactionPlan | None:
        """The usual plan; with ``room``, cut deeper before any summary is asked for until the kept
        tail and a summary the size of the previous one fit it, and the summary has its least room."""
        plan = self.plan()
        if room is None:
            return plan
        guess = self.summary_tokens(plan.previous_summary) if plan is not None else 0
        while plan is None or not room.fits(self.kept_tokens(plan) + guess) \
                or self.summary_room(plan, room) < MIN_SUMMARY_TOKENS:
            deeper = self.deeper(plan)
            if deeper is None:
                break
            plan = deeper
        return plan

    def summary_room(self, plan: CompactionPlan, room: CompactionRoom, *, replacing: int | None = None) -> int:
        """The summary model's tokens ``room`` leaves the summary text next to ``plan``'s kept tail
        and the summary's own wrapping (its file lists and artifact ledger). ``replacing`` (the
        context's estimated tokens): at most about four fifths of what the summary replaces
        (estimates and the model's tokens differ), as a longer summary would not shrink the context
        and could not be used; a small model with no known output limit otherwise writes on to the
        window's end."""
        read_files, modified_files = plan.file_ops.lists()
        wrapping = self.summary_tokens(format_file_lists(read_files, modified_files) + plan.ledger().text() or " ")
        kept = self.kept_tokens(plan) + wrapping
        if replacing is None:
            return room.for_summary(kept)
        return min(room.for_summary(kept), (replacing - kept) * 4 // 5)


def summarize_until_it_fits(planner: CompactionPlanner, plan: CompactionPlan, summarizer: Summarizer,
                            ask: SummaryAsk, room: CompactionRoom | None = None, *,
                            deepen: bool = False) -> CompactionResult:
    """Summarise what ``plan`` says (within the summary's room, with ``room``). With ``deepen``
    (and ``room``), a summary that would not shrink the context, or leaves it over the room, is
    asked for again with a deeper cut, down to the last message; the last one is returned (or its
    rejection raised). Calls the summariser; changes nothing."""
    deepen = deepen and room is not None
    before = planner.estimated_tokens()
    while True:
        try:
            result = compact(plan, summarizer, focus=ask.focus, input_tokens=ask.input_tokens,
                             kept_tokens=planner.kept_tokens(plan), estimated_before=before,
                             estimator=planner.estimator, describe=ask.describe,
                             summary_tokens=planner.summary_room(plan, room, replacing=before) if room else None)
        except SummaryDoesNotShrink:
            # a long summary next to the kept tail: keep less verbatim and summarise again
            deeper = planner.deeper(plan) if deepen else None
            if deeper is None:
                raise
            plan = deeper
            continue
        if not deepen or room is None or result.tokens_after is None or room.fits(result.tokens_after):
            return result
        deeper = planner.deeper(plan)  # the summary left no room: summarise more
        if deeper is None:
            return result
        plan = deeper
