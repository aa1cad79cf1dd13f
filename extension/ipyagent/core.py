"""``Session``: the public face of the core — a session tree with context, tokens, compaction,
branch navigation and Pi interop. Users' scripts, hooks and outside checks rely on these names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from ipyagent.compaction.branch import collect_branch_entries, generate_branch_summary
from ipyagent.compaction.compact import CompactionRejected, CompactionResult, NothingToCompact
from ipyagent.compaction.file_ops import FileOperation
from ipyagent.compaction.ledger import Describe
from ipyagent.compaction.planner import CompactionPlanner, CompactionRoom, SummaryAsk, summarize_until_it_fits
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import CompactionSettings, should_compact
from ipyagent.compaction.summarizer import Summarizer
from ipyagent.hooks import (
    HookRegistry,
    SessionBeforeCompactCall,
    SessionBeforeTreeCall,
    SessionBeforeTreeResult,
    SessionCompactCall,
    SessionTreeCall,
    SuppliedBranchSummary,
    SuppliedCompaction,
    TreePreparation,
)
from ipyagent.hooks import hooks as global_hooks
from ipyagent.session import jsonl, masking
from ipyagent.session.context import edits_by_target, summarized_away
from ipyagent.session.costs import CostTally, CostTotals
from ipyagent.session.entries import (
    Entry,
    SessionHeader,
    branch_summary_entry,
    compaction_entry,
    label_entry,
    message_entry,
)
from ipyagent.session.file_readers import loader_for
from ipyagent.session.ids import iso_now, iso_to_ms
from ipyagent.session.intake import LoadReport, SetAside
from ipyagent.session.messages import Message, Usage
from ipyagent.session.tokens import Estimator, make_estimator, normalize_usage
from ipyagent.session.tree import SessionError, SessionTree

# NothingToCompact and SessionError are raised by Session's methods: callers catch them from here
__all__ = ["CompactionCancelled", "NothingToCompact", "Session", "SessionError"]

class CompactionCancelled(RuntimeError):
    """A ``session_before_compact`` hook cancelled the compaction."""


class Session(SessionTree):
    def __init__(self, header: SessionHeader | None = None, entries: Iterable[Entry] = (),
                 leaf_id: str | None = None, *,
                 estimator: str | Estimator = "chars4", hooks: HookRegistry | None = None,
                 report: LoadReport | None = None, set_aside: Iterable[SetAside] = ()):
        if isinstance(estimator, str):
            estimator = make_estimator(estimator)
        super().__init__(header, entries, leaf_id, estimator)
        self.hooks = hooks if hooks is not None else global_hooks
        self.load_report = report or LoadReport()
        # Lines of the Pi file this session came from that could not be loaded: written back, in
        # their places, by to_pi_jsonl (records as in LoadReport.set_aside, with "line" and "raw").
        self.set_aside: list[SetAside] = [item for item in set_aside if jsonl.is_pi_line(item)]
        self._file_operations: dict[str, tuple[FileOperation, ...]] = {}  # entry id -> its calls' file operations
        self._costs = CostTally()

    # ---- files -----------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path, *, session: str | None = None, **kwargs: Any) -> Session:
        """A Pi session file (``.jsonl``) or a notebook (``.ipynb``; ``session`` picks one by name).

        Formats other than Pi's come from readers registered by suffix
        (:func:`ipyagent.session.file_readers.register_loader`); the notebook layer's is registered by
        ``ipyagent/__init__.py``.
        """
        path = Path(path)
        loader = loader_for(path.suffix)
        if loader is not None:
            loaded: Session = loader(path, name=session, **kwargs)
            return loaded
        header, entries, report = jsonl.read_pi_jsonl(path)
        return cls(header, entries, report=report, set_aside=report.set_aside, **kwargs)

    @classmethod
    def from_pi_jsonl(cls, text: str | bytes, **kwargs: Any) -> Session:
        """A session from a Pi JSONL file's text; lines that cannot be used are reported
        (``load_report``) and set aside, to be written back by :meth:`to_pi_jsonl`."""
        header, entries, report = jsonl.parse_pi_jsonl(text)
        return cls(header, entries, report=report, set_aside=report.set_aside, **kwargs)

    def to_pi_jsonl(self, path: str | Path | None = None) -> str:
        """Write the session as a Pi v3 JSONL file (if ``path``) and return its text.

        Lines set aside when the session was read go back where they were, byte for byte.
        """
        if path is not None:
            Path(path).write_bytes(self.to_pi_jsonl_bytes())
        return jsonl.dump_pi_jsonl(self.header, self.entries, self.set_aside)

    def to_pi_jsonl_bytes(self) -> bytes:
        """The Pi v3 JSONL file's bytes (a set-aside line that was not UTF-8 keeps its bytes)."""
        return jsonl.pi_jsonl_bytes(self.header, self.entries, self.set_aside)

    # ---- appending -------------------------------------------------------------------------

    def append_message(self, message: Message, **extra: Any) -> Entry:
        """Append a message entry (Pi's message shapes) after the leaf; returns the entry."""
        if message.get("role") == "assistant" and "usage" in message:
            message = {**message, "usage": normalize_usage(message["usage"])}
        return self.append(message_entry(message, **extra))

    def label(self, target_id: str, label: str | None) -> Entry:
        if target_id not in self:
            raise SessionError(f"no entry with id {target_id!r} to label")
        return self.append(label_entry(target_id, label))

    # ---- context ---------------------------------------------------------------------------

    def build_context(self) -> list[Message]:
        """The messages the model would get (Pi's shapes, after ``convertToLlm``)."""
        return list(self.context_state().llm_messages)

    def agent_messages(self) -> list[Message]:
        """The context before ``convertToLlm`` (summaries still as their own roles)."""
        return list(self.context_state().agent_messages)

    def context_messages(self) -> list[Message]:
        """Pi 1.6's ``buildSessionContext`` messages: the projected context with the system
        messages in their places (before ``convertToLlm``)."""
        return self.context_state().messages()

    def system_message(self) -> Message | None:
        """The session's system messages replayed into one (None when it records none)."""
        return self.context_state().current_system_message()

    def context_tokens(self) -> int:
        """The context's size in tokens, as Pi counts it (the last usage, then estimates)."""
        return self.context_state().context_tokens()

    def should_compact(self, context_window: int | None, settings: CompactionSettings | None = None) -> bool:
        """Whether the context has passed the compaction threshold (window − reserve)."""
        return should_compact(self.context_tokens(), context_window, settings or CompactionSettings())

    def costs(self) -> CostTotals:
        """What every entry of the session cost (all branches), and the summariser's share."""
        return self._costs.update(self.entries)

    def compactions(self) -> list[Entry]:
        return [e for e in self._current_path() if e.get("type") == "compaction"]

    def summarized_entries(self) -> list[Entry]:
        """The entries of the current path the model no longer sees verbatim, oldest first: what
        the latest compaction summarised away, and what a context edit masks (recall finds both)."""
        path = self._current_path()
        gone = summarized_away(path)
        masked = self.masked_entries()
        if not masked:
            return gone
        position = {e["id"]: i for i, e in enumerate(path)}
        return sorted({e["id"]: e for e in gone + masked}.values(), key=lambda e: position.get(e["id"], -1))

    # ---- masking (context edits) -----------------------------------------------------------

    def masked_entries(self) -> list[Entry]:
        """The entries of the context an edit hides or replaces (a masked tool result…), oldest first."""
        state = self.context_state()
        return masking.masked_entries(state.projection, edits_by_target(self._current_path()))

    def mask(self, entry_id: str) -> Entry | None:
        """Hide a tool result of the context behind a placeholder (a Pi ``context_edit``); None when
        it is masked already. The entry itself stays: ``recall(entry_id)`` returns it."""
        entry = self.get(entry_id)
        path_ids = {e["id"] for e in self._current_path()}
        if entry is None or entry_id not in path_ids:
            raise SessionError(f"no entry {entry_id!r} on the current path")
        if not masking.is_tool_result(entry):
            raise SessionError(f"entry {entry_id} is not a tool result (only tool results are masked)")
        if entry_id not in {p.entry.get("id") for p in self.context_state().projection}:
            raise SessionError(f"entry {entry_id} is no longer in the context (a compaction summarised it)")
        if masking.is_masked(entry, edits_by_target(self._current_path()).get(entry_id)):
            return None
        return self.append(masking.mask_edit(entry))

    def mask_tool_results(self, recent_turns: int) -> list[Entry]:
        """Mask every tool result of the context before the last ``recent_turns`` turns; the edits written."""
        state = self.context_state()
        targets = masking.tool_results_before(state.projection, edits_by_target(self._current_path()), recent_turns)
        return [self.append(masking.mask_edit(entry)) for entry in targets]

    def unmask(self, entry_id: str | None = None) -> list[Entry]:
        """Give masked entries (one, or all) their content back; the edits written."""
        targets = self.masked_entries()
        if entry_id is not None:
            targets = [e for e in targets if e["id"] == entry_id]
            if not targets:
                raise SessionError(f"entry {entry_id!r} is not masked")
        return [self.append(masking.unmask_edit(entry)) for entry in targets]

    def latest_summary(self) -> str | None:
        """The summary of the latest compaction on the current branch (None before the first)."""
        found = self.compactions()
        return found[-1]["summary"] if found else None

    # ---- compaction ------------------------------------------------------------------------

    def compaction_planner(self, settings: CompactionSettings | None = None) -> CompactionPlanner:
        """The planner of a compaction of the current path with ``settings`` (``compaction/planner.py``):
        the usual plan, deeper ones, and the estimates a compaction is measured with."""
        return CompactionPlanner(self._current_path(), self.context_state(), self.estimator,
                                 settings or CompactionSettings(), self._file_operations)

    def prepare_compaction(self, settings: CompactionSettings | None = None, *,
                           first_kept_entry_id: str | None = None) -> CompactionPlan | None:
        """The plan for compacting now; ``first_kept_entry_id`` fixes the cut (see
        :func:`~ipyagent.compaction.prepare.prepare_compaction`)."""
        return self.compaction_planner(settings).plan(first_kept_entry_id)

    def compact(self, summarizer: Summarizer, settings: CompactionSettings | None = None, *,
                focus: str | None = None, reason: str = "manual", summary_input_tokens: int | None = None,
                plan: CompactionPlan | None = None, extra: Entry | None = None,
                describe: Describe | None = None, room: CompactionRoom | None = None) -> Entry:
        """Summarise older work and append the compaction entry; return it (Pi's prepare →
        summarise → append, ``compaction/planner.py``).

        ``plan`` is followed as it is; without one, the compaction is planned now, and with
        ``room`` (what the next request leaves the compacted context) it cuts deeper — a smaller
        kept tail, down to the last message — until the summary and the kept tail fit it: before
        the summary is asked for (the previous summary's size as a guess) and again after it if
        the summary came out larger. Each summary is asked within the room its plan leaves it.
        One compaction entry either way.

        ``describe`` (names -> their type and shape/len, for the names defined now) fills in the
        artifact ledger's kernel variables; the notebook layer passes one over the kernel's
        namespace. ``extra`` rides on the entry (the notebook cell that asked for it, the trigger).

        Raises ``NothingToCompact``, ``CompactionCancelled`` (a hook said so) or a
        ``SummarizerError`` (the summary failed or would not shrink the context); in every case
        the session is unchanged.
        """
        planner = self.compaction_planner(settings)
        planned = plan or planner.plan_with_room(room)
        if planned is None:
            raise NothingToCompact("Nothing to compact: the whole conversation fits in the kept recent part.")
        answer = self.hooks.emit(SessionBeforeCompactCall(self, planned, self.path(), focus, reason))
        if answer is not None and answer.cancel:
            raise CompactionCancelled("Compaction cancelled by a session_before_compact hook.")
        supplied = answer.compaction if answer is not None else None
        if supplied is not None:
            result = _supplied_result(supplied, planned)
        else:
            ask = SummaryAsk(focus, summary_input_tokens, describe)
            result = summarize_until_it_fits(planner, planned, summarizer, ask, room, deepen=plan is None)
        entry = self.append(_compaction_entry(result, supplied is not None, extra, self.system_message()))
        self.hooks.emit(SessionCompactCall(self, compaction_entry=entry, from_extension=supplied is not None))
        return entry

    # ---- branches --------------------------------------------------------------------------

    def navigate(self, target_id: str, *, summarize: bool = False, summarizer: Summarizer | None = None,
                 focus: str | None = None, replace_instructions: bool = False, label: str | None = None,
                 context_window: int | None = None) -> Entry | None:
        """Move to another point of the tree (Pi's ``navigateTree``); return the branch summary
        entry if one was written.

        A user message (or custom message) as the target puts the leaf on its parent, so the
        prompt can be sent again as a new branch; any other target becomes the leaf.
        """
        target = self.get(target_id)
        if target is None:
            raise SessionError(f"no entry with id {target_id!r} in this session")
        old_leaf = self.leaf_id
        if target_id == old_leaf:
            return None
        is_prompt = target.get("type") == "custom_message" or (
            target.get("type") == "message" and target["message"].get("role") == "user")
        new_leaf = self.parent_id(target) if is_prompt else target_id
        span = collect_branch_entries(self.path(), self.path(target_id))
        preparation = TreePreparation(target_id, old_leaf, span.common_ancestor_id, span.entries, summarize, focus,
                                      replace_instructions, label)
        answer = self.hooks.emit(SessionBeforeTreeCall(self, preparation)) or SessionBeforeTreeResult()
        if answer.cancel:
            return None
        preparation = _steered(preparation, answer)
        summary = None
        if summarize and span.entries:
            summary = answer.summary or _branch_summary(preparation, summarizer, context_window, self.estimator)
        self.branch(new_leaf)
        summary_entry = None
        if summary is not None:
            summary_entry = self.append(branch_summary_entry(new_leaf or "root", summary.summary, summary.details,
                                                             summary is answer.summary))
        if preparation.label:
            self.label(summary_entry["id"] if summary_entry is not None else target_id, preparation.label)
        self.hooks.emit(SessionTreeCall(self, new_leaf_id=self.leaf_id, old_leaf_id=old_leaf,
                                        summary_entry=summary_entry, from_extension=answer.summary is not None))
        return summary_entry


def _steered(preparation: TreePreparation, answer: SessionBeforeTreeResult) -> TreePreparation:
    """The navigation's instructions and label, as a ``session_before_tree`` handler changed them."""
    return replace(preparation,
                   custom_instructions=answer.custom_instructions or preparation.custom_instructions,
                   replace_instructions=answer.replace_instructions or preparation.replace_instructions,
                   label=answer.label or preparation.label)


def _branch_summary(preparation: TreePreparation, summarizer: Summarizer | None, context_window: int | None,
                    estimator: Estimator) -> SuppliedBranchSummary:
    """The summary of the branch being left, from the summariser."""
    if summarizer is None:
        raise SessionError("a branch summary needs a summarizer")
    text, details = generate_branch_summary(
        preparation.entries_to_summarize, summarizer, context_window=context_window, estimate=estimator.estimate,
        focus=preparation.custom_instructions, replace_instructions=preparation.replace_instructions)
    return SuppliedBranchSummary(text, details)


def _compaction_entry(result: CompactionResult, from_hook: bool, extra: Entry | None,
                      checkpoint: Message | None) -> Entry:
    """The entry of a compaction, with the ``checkpoint`` of the system prompt the model has (Pi
    1.6): what the kept part's system messages said, which the compaction drops in its favour."""
    fields: dict[str, Any] = dict(extra or {})  # e.g. the notebook cell that asked for it
    timestamp = fields.pop("timestamp", None) or iso_now()
    if checkpoint is not None:
        checkpoint = {**checkpoint, "timestamp": iso_to_ms(timestamp)}
    return compaction_entry(result.summary, result.first_kept_entry_id, int(result.tokens_before),
                            details=result.details, from_hook=from_hook,
                            usage=_sum_usage(result.usage) if result.usage else None,
                            system_message=checkpoint, timestamp=timestamp, **fields)


def _supplied_result(supplied: SuppliedCompaction, plan: CompactionPlan) -> CompactionResult:
    """The compaction a ``session_before_compact`` hook returned, the plan filling in what it left out."""
    result = CompactionResult(summary=supplied.summary or "",
                              first_kept_entry_id=supplied.first_kept_entry_id or plan.first_kept_entry_id,
                              tokens_before=supplied.tokens_before or plan.tokens_before, details=supplied.details)
    if not result.summary.strip():
        raise CompactionRejected("a session_before_compact hook returned an empty summary")
    return result


def _sum_usage(usages: list[Usage]) -> Usage:
    total: dict[str, Any] = {}
    for usage in usages:
        for key, value in normalize_usage(usage).items():
            if isinstance(value, dict):
                bucket = total.setdefault(key, {})
                for k, v in value.items():
                    bucket[k] = bucket.get(k, 0) + v
            elif isinstance(value, bool):  # costUnknown: any unpriced call makes the sum unknown
                total[key] = total.get(key, False) or value
            else:
                total[key] = total.get(key, 0) + value
    return cast(Usage, total)
