"""Turning a plan into a summary: the model calls, the split-turn merge, the checks.

``compact(plan, summarizer)`` is pure apart from the summariser it is given. It never returns an
empty summary or one that does not shrink the context: those raise ``CompactionRejected``
(``SummaryDoesNotShrink`` for the second, which a deeper cut may cure). A summary cut off by the
output cap is asked for once more before the compaction fails (Pi 1.6 fails at once; with a small
local model that rambled, a second sample usually ends in time).

With ``summary_tokens`` (the room the compaction leaves the summary in the context window, which
a small window makes tight) each summary is asked for within that room, and one that runs past it
twice is kept up to its last complete line, marked as cut (:data:`CUT_NOTE`): a longer one could
not be used anyway, and without it the compaction, and an overflow's recovery, would fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ipyagent.compaction import prompts
from ipyagent.compaction.file_ops import format_file_lists
from ipyagent.compaction.ledger import Describe, split_appendix, without_ledger
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.serialize import serialize_conversation
from ipyagent.compaction.summarizer import (
    Summarizer,
    SummarizerError,
    SummaryCutOff,
    SummaryInputTooLarge,
    SummaryRequest,
)
from ipyagent.session.messages import Message, Usage
from ipyagent.session.tokens import Chars4Estimator, Estimator
from ipyagent.shapes import SummaryDetails
from ipyagent.text import chars4

MAX_TRIM_ATTEMPTS = 4
CUT_OFF_RETRIES = 1  # a summary cut off by the output cap is asked for this many more times
MIN_SUMMARY_TOKENS = 256  # the least room a summary is given, even where the window leaves less
CUT_NOTE = "\n\n[The summary was cut off here: it ran past the room the context window leaves it.]"


class CompactionRejected(SummarizerError):
    """The summary came back empty or would not make the context smaller."""


class SummaryDoesNotShrink(CompactionRejected):
    """The summary and the kept tail would be no smaller than the context: a deeper cut (less kept
    verbatim) may still make room."""


class NothingToCompact(RuntimeError):
    """There is no older work to summarise (the whole path fits in the kept tail). Not a failure."""


@dataclass
class CompactionResult:
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: SummaryDetails
    tokens_after: int | None = None
    summarizer_calls: int = 0
    usage: list[Usage] = field(default_factory=list)
    omitted_messages: int = 0  # dropped (oldest first) so the summariser's input fit its window


SAFETY_TOKENS = 4096  # room left beyond the input's estimate
SAFETY_SHARE = 0.15  # ... or this share of it, whichever is larger
SMALL_ROOM = 32_768  # below this room only the fixed margin is kept, and output is capped at it
OUTPUT_CHARS_PER_TOKEN = 3.5  # the input estimate here is pi-ai's, not the chars/4 of compaction


def summary_output_limit(max_output: int, window: int | None, input_chars: int) -> int:
    """A summary's ``max_tokens`` (Pi 1.6): the model's output limit, clamped so that the input
    (``input_chars`` at 3.5 chars a token) plus a margin still fit the window. ``reserve_tokens``
    has no say here; it only sets the trigger."""
    if not window or window <= 0:
        return max(1, max_output)
    tokens = math.ceil(input_chars / OUTPUT_CHARS_PER_TOKEN)
    room = window - tokens - max(SAFETY_TOKENS, math.ceil(tokens * SAFETY_SHARE))
    if room < SMALL_ROOM:
        room = min(SMALL_ROOM, window - tokens - SAFETY_TOKENS)
    return min(max_output, max(1, room))


@dataclass
class SummaryCall:
    """One summariser call a compaction makes: which messages, with which instructions."""

    kind: str  # "history" or "turn_prefix"
    messages: list[Message]
    instructions: str
    previous_summary: str | None
    max_tokens: int | None  # None: the summary model's output limit (summary_output_limit)
    reasoning: str | None = None
    room_cap: bool = False  # max_tokens is the room the compaction leaves: a summary cut there keeps its head


def summary_calls(plan: CompactionPlan, focus: str | None = None, *, reasoning: str | None = None) -> list[SummaryCall]:
    """The summariser calls compacting with ``plan`` makes, in order: the history (an update when
    there is a previous summary), then the turn prefix of a split turn. Messages the model never
    saw (an excluded !!cmd, an empty branch summary, an image-only prompt) serialise to nothing:
    a part made only of them gets no call."""
    found = []
    history = _with_content(plan.messages_to_summarize)
    if history:
        instructions = prompts.UPDATE_PROMPT if plan.previous_summary is not None else prompts.INITIAL_PROMPT
        # the previous summary without its ledger: compaction appends the carried ledger again
        previous = without_ledger(plan.previous_summary) if plan.previous_summary is not None else None
        found.append(SummaryCall("history", list(history), prompts.with_focus(instructions, focus),
                                 previous, None, reasoning))
    prefix = _with_content(plan.turn_prefix_messages)
    if plan.is_split_turn and prefix:
        found.append(SummaryCall("turn_prefix", list(prefix), prompts.with_focus(prompts.TURN_PREFIX_PROMPT, focus),
                                 None, None, reasoning))
    return found


def fit_messages(call: SummaryCall, input_tokens: int | None) -> tuple[list[Message], int]:
    """The call's messages without the oldest ones that keep the request from fitting
    ``input_tokens`` (the summary model's input budget; None: unknown, nothing dropped), and how
    many were dropped."""
    messages, omitted = list(call.messages), 0
    if input_tokens:
        fixed = chars4(call.instructions) + chars4(call.previous_summary or "") + 50
        while len(messages) > 1 and fixed + chars4(serialize_conversation(messages)) > input_tokens:
            drop = max(1, len(messages) // 8)
            messages, omitted = messages[drop:], omitted + drop
    return messages, omitted


def summary_request(call: SummaryCall, messages: Sequence[Message] | None = None, omitted: int = 0) -> SummaryRequest:
    """The request the summariser gets for ``call`` (``messages``: what is left of its messages
    after ``omitted`` were dropped to fit)."""
    conversation = serialize_conversation(call.messages if messages is None else messages)
    if omitted:
        conversation = f"[{omitted} earlier messages omitted to fit the summarizer's context window]\n\n" + conversation
    if call.kind == "turn_prefix":
        text = prompts.turn_prefix_request_text(conversation, call.instructions)
    else:
        text = prompts.summary_request_text(conversation, call.instructions, call.previous_summary)
    return SummaryRequest(
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=text,
        max_tokens=call.max_tokens,
        reasoning=call.reasoning,
        kind=call.kind,
    )


def planned_requests(plan: CompactionPlan, focus: str | None = None, *, input_tokens: int | None = None
                     ) -> list[tuple[SummaryRequest, int]]:
    """Each request compacting with ``plan`` sends first (the summariser may still reject it as
    too long, and get a shorter one), with how many of its oldest messages were left out."""
    out = []
    for call in summary_calls(plan, focus):
        messages, omitted = fit_messages(call, input_tokens)
        out.append((summary_request(call, messages, omitted), omitted))
    return out


class _Calls:
    def __init__(self, summarizer: Summarizer):
        self.summarizer = summarizer
        self.count = 0
        self.usage: list[Usage] = []
        self.omitted = 0

    def summarize(self, call: SummaryCall, input_tokens: int | None) -> str:
        """One summary, dropping the oldest messages while the request cannot fit the model."""
        messages, omitted = fit_messages(call, input_tokens)
        trims, cut_offs = 0, 0
        while True:
            self.count += 1
            try:
                response = self.summarizer.summarize(summary_request(call, messages, omitted))
            except SummaryInputTooLarge:
                if trims == MAX_TRIM_ATTEMPTS or len(messages) <= 1:
                    raise
                trims += 1
                drop = max(1, len(messages) // 2)
                messages, omitted = messages[drop:], omitted + drop
                continue
            except SummaryCutOff as exc:
                if cut_offs == CUT_OFF_RETRIES:
                    head = _head(exc.text) if call.room_cap else ""
                    if not head:
                        raise
                    self.omitted += omitted
                    return head + CUT_NOTE
                cut_offs += 1
                continue
            self.usage.append(response.usage)
            self.omitted += omitted
            return response.text.strip()


def _head(text: str) -> str:
    """A cut-off summary up to its last complete line (the whole of it when that would drop most)."""
    text = text.strip()
    end = text.rfind("\n")
    return (text[:end] if end > len(text) // 2 else text).rstrip()


def _within(call: SummaryCall, tokens: int | None) -> SummaryCall:
    """``call`` asked for within ``tokens`` of summary text (None: as it is)."""
    if tokens is None:
        return call
    return replace(call, max_tokens=max(MIN_SUMMARY_TOKENS, tokens - chars4(CUT_NOTE)), room_cap=True)


def _with_content(messages: Sequence[Message]) -> Sequence[Message]:
    return messages if any(serialize_conversation([m]) for m in messages) else []


def _summarized(plan: CompactionPlan, calls: _Calls, *, focus: str | None, reasoning: str | None,
                input_tokens: int | None, summary_tokens: int | None) -> str:
    """The summary text of :func:`compact` before its file lists and ledger: the history's summary
    (or the previous one, kept), and a split turn's prefix summary after it."""
    planned = {call.kind: call for call in summary_calls(plan, focus, reasoning=reasoning)}
    if not planned and plan.previous_summary is None:
        raise NothingToCompact("Nothing to compact: nothing the model saw is left to summarise.")
    history: str | None = None
    if "history" in planned:
        history = calls.summarize(_within(planned["history"], summary_tokens), input_tokens)
        if not history:
            raise CompactionRejected("the summarizer returned an empty summary")
    elif plan.previous_summary is not None:
        # Pi would write "No prior history." and lose it; its file lists and ledger are appended anew
        history = split_appendix(plan.previous_summary)[0]
    if "turn_prefix" in planned:
        left = None if summary_tokens is None else summary_tokens - chars4(history or "")
        prefix = calls.summarize(_within(planned["turn_prefix"], left), input_tokens)
        if not prefix:
            raise CompactionRejected("the summarizer returned an empty turn-prefix summary")
        summary = (history or prompts.NO_PRIOR_HISTORY) + prompts.SPLIT_TURN_SEPARATOR + prefix
    else:
        summary = history or ""
    if not summary.strip():
        raise CompactionRejected("the summarizer returned an empty summary")
    return summary


def compact(plan: CompactionPlan, summarizer: Summarizer, *, focus: str | None = None,
            input_tokens: int | None = None, kept_tokens: int | None = None, estimated_before: int | None = None,
            estimator: Estimator | None = None, reasoning: str | None = None,
            describe: Describe | None = None, summary_tokens: int | None = None) -> CompactionResult:
    """Summarise what the plan says, merge a split turn, append the file lists and the artifact
    ledger, check the result.

    ``describe`` reads the type and shape/len of the ledger's kernel variables when the summary
    is ready (the notebook layer passes one over the kernel's namespace; None: names only).

    ``kept_tokens`` is the estimate of the messages kept verbatim; with it, a summary that does
    not make the context smaller is rejected. The comparison is against ``estimated_before``
    (the same estimator's count of the whole context) when given, else ``plan.tokens_before``.

    ``summary_tokens`` is the room left for the summary text in the context window, in the
    summary model's tokens (see the module's docstring; None: no such limit). A split turn's
    prefix gets what the history summary left of it.
    """
    calls = _Calls(summarizer)
    summary = _summarized(plan, calls, focus=focus, reasoning=reasoning, input_tokens=input_tokens,
                          summary_tokens=summary_tokens)
    read_files, modified_files = plan.file_ops.lists()
    summary += format_file_lists(read_files, modified_files)
    ledger = plan.ledger()
    ledger.describe(describe)
    summary += ledger.text()
    details: SummaryDetails = {"readFiles": read_files, "modifiedFiles": modified_files}
    if not ledger.is_empty():
        details["artifacts"] = ledger.to_details()
    tokens_after = None
    if kept_tokens is not None:
        estimator = estimator or Chars4Estimator()
        tokens_after = kept_tokens + estimator.estimate({"role": "compactionSummary", "summary": summary})
        before = estimated_before if estimated_before is not None else plan.tokens_before
        if tokens_after >= before:
            raise SummaryDoesNotShrink(
                f"the summary would not shrink the context ({before:,} tokens before, "
                f"{tokens_after:,} after); compaction was not applied"
            )
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=plan.first_kept_entry_id,
        tokens_before=plan.tokens_before,
        details=details,
        tokens_after=tokens_after,
        summarizer_calls=calls.count,
        usage=calls.usage,
        omitted_messages=calls.omitted,
    )


@dataclass
class FailureTracker:
    """Consecutive automatic-compaction failures; after ``limit`` in a row, stop trying
    automatically until the user acts (``%compact``, a setting change, ``reset``)."""

    limit: int = 3
    count: int = 0
    last_error: str | None = None

    @property
    def blocked(self) -> bool:
        return self.count >= self.limit

    def failed(self, error: str) -> None:
        self.count += 1
        self.last_error = error

    def succeeded(self) -> None:
        self.count = 0
        self.last_error = None

    reset = succeeded

    def message(self) -> str:
        return (f"Automatic compaction stopped after {self.count} failures in a row "
                f"(last: {self.last_error}). Run %compact to retry, or change the summary model.")
