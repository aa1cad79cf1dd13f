"""What the compaction explorer shows, computed without widgets or HTML.

For the settings chosen (window, reserve, keep-recent, estimator, focus) it asks the code that
compaction itself runs: ``prepare_compaction`` for the plan (cut point, split turn, what is
summarised and kept) and ``planned_requests`` for the exact requests the summariser would get.
Nothing here decides where a cut falls; it only reads the plan's indexes and gives every entry
of the path its fate:

* ``earlier`` — already inside earlier summaries (before the summarising boundary);
* ``summary`` — the latest compaction: its summary is what this compaction updates;
* ``summarised`` — the history this compaction would summarise;
* ``prefix`` — the start of a turn the cut splits (summarised on its own);
* ``kept`` — kept verbatim.

Per-entry token estimates are cached by entry id and estimator (the session's own estimator
shares the session's cache), and the path's sums are computed once per session state, so a
slider move costs one ``prepare_compaction`` (about a millisecond warm at 16,000 entries) plus
work proportional to the number of boxes drawn, never to the length of the session.

Timeline boxes: one box per entry while the path has at most ``ENTRY_BOX_LIMIT`` entries;
beyond that one box per turn (a user prompt and everything up to the next), and ``k`` turns per
box when the turns alone exceed the limit. A box never straddles a fate boundary, so the cut
point, the turn prefix and the latest summary stay exact at any size.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ipyagent.compaction.compact import SMALL_ROOM, planned_requests, summary_output_limit
from ipyagent.compaction.cut_point import is_turn_start
from ipyagent.compaction.prepare import CompactionPlan, prepare_compaction, summarizing_boundary
from ipyagent.compaction.settings import CompactionSettings, fit_budget
from ipyagent.compaction.summarizer import SummaryRequest
from ipyagent.session import masking
from ipyagent.session.context import ContextState, edits_by_target, latest_compaction_index
from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message, compaction_summary_message, prompt_text, text_of
from ipyagent.session.tokens import Estimator, make_estimator
from ipyagent.text import one_line

if TYPE_CHECKING:
    from ipyagent.core import Session
    from ipyagent.providers.registry import ProviderRegistry

__all__ = ["ENTRY_BOX_LIMIT", "ESTIMATORS", "Box", "Exploration", "ExploreSettings", "ExplorerModel", "PathTokens",
           "entry_label"]

ENTRY_BOX_LIMIT = 400  # per-entry boxes up to this many path entries; turns (or groups of turns) beyond
TURN_BOX_LIMIT = 300  # at most about this many turn boxes

# choice -> (estimator, safety factor); the keys are the estimators' own names
ESTIMATORS: dict[str, tuple[str, float | None]] = {
    "chars4": ("chars4", None),
    "tiktoken": ("tiktoken", None),
    "chars4x1.2": ("chars4", 1.2),
    "tiktokenx1.1": ("tiktoken", 1.1),
}
ESTIMATOR_LABELS = {"chars4": "chars/4 (Pi's)", "tiktoken": "tiktoken", "chars4x1.2": "chars/4 × 1.2",
                    "tiktokenx1.1": "tiktoken × 1.1"}


@dataclass(frozen=True)
class ExploreSettings:
    window: int
    reserve_tokens: int
    keep_recent_tokens: int
    estimator: str = "chars4"
    focus: str = ""

    def compaction(self) -> CompactionSettings:
        return CompactionSettings(reserve_tokens=self.reserve_tokens, keep_recent_tokens=self.keep_recent_tokens)


# ---- one path, its tokens --------------------------------------------------------------------


def entry_label(entry: Entry, limit: int = 120) -> tuple[str, str]:
    """(a short name of the entry's kind, a one-line snippet of its text). Plain text: escape it."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message") or {}
        role = message.get("role")
        if role == "user":
            count = message.get("executionCount")
            name = f"prompt [{count}]" if isinstance(count, int) else "prompt"
            return name, one_line(prompt_text(message), limit)  # as typed, not the activity block
        if role == "assistant":
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            calls = [str(b.get("name")) for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]
            name = "reply → " + ", ".join(calls) if calls else "reply"
            return name, one_line(text_of(blocks, " "), limit)
        if role == "toolResult":
            return f"{message.get('toolName') or 'tool'} result", one_line(text_of(message.get("content"), " "), limit)
        if role == "bashExecution":
            return "!command", one_line(str(message.get("command") or ""), limit)
        return str(role), ""
    if kind == "compaction":
        return "summary", one_line(str(entry.get("summary") or ""), limit)
    if kind == "branch_summary":
        return "branch summary", one_line(str(entry.get("summary") or ""), limit)
    if kind == "custom_message":
        content = entry.get("content")
        return f"note ({entry.get('customType')})", one_line(text_of(content, " ") if not isinstance(content, str)
                                                               else content, limit)
    return str(kind), ""


class PathTokens:
    """A session's current path with every entry's estimated tokens under one estimator.

    ``tokens[i]`` is what entry ``i`` adds to the context (0 for entries that add nothing, and
    for compaction entries, whose summary is counted in ``summary_tokens``). ``prefix`` holds the
    running sums, so any range's tokens cost two lookups.
    """

    def __init__(self, session: Session, estimate: Callable[[Entry, Message], int], *, own_estimator: bool,
                 fresh: Callable[[Message], int] | None = None):
        self.key = _session_key(session)
        path = session.path()
        self.path = path
        state = session.context_state() if own_estimator else ContextState.build(path, session.leaf_id, estimate,
                                                                                 fresh)
        self.state = state
        # what each path entry adds to the context after its context edits (0: nothing, or hidden)
        weight = {p.path_index: t for p, t in zip(state.projection, state.weights())}
        tokens: list[int] = []
        summaries: dict[int, int] = {}
        turn_starts: list[int] = []
        for i, entry in enumerate(path):
            if entry.get("type") == "compaction":
                summaries[i] = estimate(entry, compaction_summary_message(entry))
                tokens.append(0)
            else:
                tokens.append(weight.get(i, 0))
            if is_turn_start(entry):
                turn_starts.append(i)
        self.tokens = tokens
        self.summary_tokens = summaries
        self.turn_starts = turn_starts
        self.turn_set = set(turn_starts)
        self.prefix = _running_sums(tokens)  # context messages only
        self.box_prefix = _running_sums(t + summaries.get(i, 0) for i, t in enumerate(tokens))  # and summaries
        self.previous_index = latest_compaction_index(path)
        self.start = summarizing_boundary(path, self.previous_index)
        self.masked = len(masking.masked_entries(state.projection, edits_by_target(path)))
        self.context_tokens = state.context_tokens()  # provider usage + estimates after it: the trigger's number
        self.estimated_context = sum(state.estimates)  # estimates only

    def span(self, a: int, b: int) -> int:
        """Tokens of path[a:b] that go into the context as messages."""
        return self.prefix[b] - self.prefix[a]

    def box_tokens(self, a: int, b: int) -> int:
        """Tokens of path[a:b] as drawn: messages, and compaction summaries."""
        return self.box_prefix[b] - self.box_prefix[a]


def _running_sums(values: Any) -> list[int]:
    sums, running = [0], 0
    for value in values:
        running += value
        sums.append(running)
    return sums


def _fate_sizes(tokens: PathTokens, ranges: dict[str, tuple[int, int]], latest: int
                ) -> tuple[dict[str, int], dict[str, int]]:
    """Entries and tokens per fate (a range of the path); the latest compaction, when there is
    one (at ``latest``), counts as the summary, not in its range."""
    counts = {fate: b - a for fate, (a, b) in ranges.items()}
    spans = {fate: tokens.span(a, b) for fate, (a, b) in ranges.items()}
    if latest >= 0:
        for fate, (a, b) in ranges.items():
            if a <= latest < b:
                counts[fate] -= 1
        counts["summary"] = 1
        spans["summary"] = tokens.summary_tokens.get(latest, 0)
    return counts, spans


def _session_key(session: Session) -> tuple[int, Any, int]:
    return id(session), session.leaf_id, len(session)


# ---- what one update shows ---------------------------------------------------------------------


@dataclass
class Box:
    start: int  # path indexes [start, end)
    end: int
    fate: str
    tokens: int
    turn_starts: int = 0  # how many turns start inside

    @property
    def entries(self) -> int:
        return self.end - self.start


@dataclass
class Exploration:
    """Everything one view of the explorer shows (plain data; ``explore_html`` draws it)."""

    settings: ExploreSettings
    session_name: str
    source: str
    path_length: int
    entries_total: int
    estimator_name: str
    plan: CompactionPlan | None
    reason: str  # why there is no plan, when there is none
    boundary: int  # path index where summarising starts (before it: in earlier summaries)
    history_end: int
    cut_index: int | None
    turn_start_index: int | None
    previous_index: int
    counts: dict[str, int]
    tokens: dict[str, int]
    tokens_before: int
    estimated_before: int
    kept_tokens: int
    summary_max_tokens: int
    threshold: int
    would_compact: bool
    window_known: bool
    boxes: list[Box]
    grouping: str  # "entry", "turn" or "N turns"
    path: Sequence[Entry] = ()
    requests: list[tuple[SummaryRequest, int]] | None = None  # filled in on demand
    notes: list[str] = field(default_factory=list)
    masked: int = 0  # tool results of the context hidden by a mask (%agent mask)

    @property
    def after_max_tokens(self) -> int:
        """The most the context can hold after this compaction: the kept part and a summary of
        at most its max_tokens, and less than before (a summary that does not shrink the
        context is rejected)."""
        return min(self.kept_tokens + self.summary_max_tokens, max(self.kept_tokens, self.estimated_before - 1))


class ExplorerModel:
    """The explorer's state: where the session comes from, the settings, the caches.

    ``session`` is a ``Session`` or a callable returning the current one (a notebook slot whose
    session may be replaced by a merge). ``model`` / ``summary_model`` give the summariser's input
    budget (None: unknown, nothing is dropped from its input) and tiktoken's encoding; what is
    known of them comes from ``providers`` (the kernel's, else the built-ins and the user's).
    """

    def __init__(self, session: Session | Callable[[], Session], settings: ExploreSettings, *, name: str = "default",
                 source: str = "",
                 model: str = "", summary_model: str | None = None, window_known: bool = True,
                 providers: ProviderRegistry | None = None):
        if providers is None:
            from ipyagent.providers.registry import default_registry  # imported when needed: httpx is heavy

            providers = default_registry()
        self.providers = providers
        self._session_source = session if callable(session) else (lambda: session)
        self.settings = settings
        self.name = name
        self.source = source
        self.model = model
        self.summary_model = summary_model
        self.window_known = window_known
        self.notes: list[str] = []
        self._estimators: dict[str, Estimator] = {}
        self._estimates: dict[str, dict[str, int]] = {}
        self._paths: dict[str, PathTokens] = {}
        self._operations: dict[str, tuple[Any, ...]] = {}
        self._requests_key: tuple[Any, ...] | None = None
        self._requests: list[tuple[SummaryRequest, int]] | None = None
        self.current: Exploration | None = None

    @property
    def session(self) -> Any:
        return self._session_source()

    # ---- estimators ------------------------------------------------------------------------

    def estimator_choices(self) -> list[str]:
        own = self.session.estimator.name
        return list(ESTIMATORS) if own in ESTIMATORS else [own, *ESTIMATORS]

    def _estimator(self, name: str) -> tuple[Estimator, Callable[[Entry, Message], int], bool]:
        session = self.session
        if name == session.estimator.name:
            return session.estimator, session.estimate_entry, True
        estimator = self._estimators.get(name)
        if estimator is None:
            if name not in ESTIMATORS:
                raise ValueError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATORS)}")
            base, factor = ESTIMATORS[name]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                estimator = make_estimator(base, model=self.model, safety_factor=factor)
            self.notes.extend(str(w.message) for w in caught)
            self._estimators[name] = estimator
        cache = self._estimates.setdefault(name, {})
        estimate_message = estimator.estimate

        def estimate(entry: Entry, message: Message) -> int:
            found = cache.get(entry["id"])
            if found is None:
                found = cache[entry["id"]] = estimate_message(message)
            return found

        return estimator, estimate, False

    def has_counted(self, name: str) -> bool:
        """Whether the path's tokens under estimator ``name`` are at hand (else: counted next)."""
        cached = self._paths.get(name)
        return cached is not None and cached.key == _session_key(self.session)

    def path_tokens(self, name: str | None = None) -> PathTokens:
        """The path's tokens under estimator ``name`` (default: the chosen one), rebuilt only when
        the session changed (a new entry, a moved leaf, a merged session)."""
        name = name or self.settings.estimator
        session = self.session
        cached = self._paths.get(name)
        if cached is None or cached.key != _session_key(session):
            estimator, estimate, own = self._estimator(name)
            cached = self._paths[name] = PathTokens(session, estimate, own_estimator=own, fresh=estimator.estimate)
        return cached

    # ---- one update ------------------------------------------------------------------------

    def update(self, **changes: Any) -> Exploration:
        """Re-plan with ``changes`` applied to the settings (window, reserve_tokens,
        keep_recent_tokens, estimator, focus) and return what to show."""
        if changes:
            self.settings = replace(self.settings, **changes)
        settings = self.settings
        # a what-if: the plan and the trigger take these values as they are; where the agent would
        # replace them (reserve + kept tail do not fit the window) a note says so
        compaction = settings.compaction()
        budget = fit_budget(compaction, settings.window)
        estimator, _, _ = self._estimator(settings.estimator)
        tokens = self.path_tokens(settings.estimator)
        path = tokens.path
        plan, reason = self._plan(tokens, compaction, estimator)
        n = len(path)
        start = tokens.start
        if plan is not None:
            cut = plan.first_kept_index
            history_end = plan.turn_start_index if plan.is_split_turn else cut
            prefix_start = plan.turn_start_index if plan.is_split_turn else cut
        else:
            cut = history_end = prefix_start = start
        ranges = {"earlier": (0, start), "summarised": (start, history_end), "prefix": (prefix_start, cut),
                  "kept": (cut, n)}
        latest = tokens.previous_index
        counts, spans = _fate_sizes(tokens, ranges, latest)
        summary_max = 0
        if plan is not None:  # the summary model's output limit per request (Pi 1.6), unknown: 32,768
            limit = summary_output_limit(self._summary_max_output(), settings.window, 0)
            summary_max = limit * (2 if plan.is_split_turn else 1)
        kept = tokens.span(cut, n) if plan is not None else tokens.span(start, n)
        boxes, grouping = _boxes(tokens, ranges, latest)
        self.current = Exploration(
            settings=settings, session_name=self.name, source=self.source, path_length=n,
            entries_total=len(self.session), estimator_name=estimator.name, plan=plan, reason=reason,
            boundary=start, history_end=history_end, cut_index=cut if plan is not None else None,
            turn_start_index=plan.turn_start_index if plan is not None and plan.is_split_turn else None,
            previous_index=latest, counts=counts, tokens=spans,
            tokens_before=tokens.context_tokens, estimated_before=tokens.estimated_context, kept_tokens=kept,
            summary_max_tokens=summary_max, threshold=max(0, settings.window - settings.reserve_tokens),
            would_compact=tokens.context_tokens > max(0, settings.window - settings.reserve_tokens),
            window_known=self.window_known, boxes=boxes, grouping=grouping, path=path,
            notes=list(self.notes) + ([budget.problem] if budget.problem else []),
            masked=tokens.masked,
        )
        return self.current

    def _plan(self, tokens: PathTokens, compaction: CompactionSettings, estimator: Estimator
              ) -> tuple[CompactionPlan | None, str]:
        """The plan for the path with these settings, or None and why there is none."""
        path = tokens.path
        if not path:
            return None, "The session is empty: nothing to compact yet."
        if path[-1].get("type") == "compaction":
            return None, "The session was just compacted: nothing new to summarise yet."
        plan = prepare_compaction(path, compaction, estimator=estimator, state=tokens.state,
                                  operations_cache=self._operations)
        if plan is None:
            return None, (f"Nothing to summarise: everything since the last compaction "
                          f"({tokens.span(tokens.start, len(path)):,} tokens) fits in keep-recent "
                          f"({compaction.keep_recent_tokens:,}).")
        return plan, ""

    # ---- the summariser's input --------------------------------------------------------------

    def _summary_max_output(self) -> int:
        model = self.summary_model or self.model
        try:
            info = self.providers.info(model) if model else None
        except ValueError:  # a model string the registry does not know
            info = None
        return (info.max_output if info else 0) or SMALL_ROOM

    def summary_input_tokens(self) -> int | None:
        """The summary model's input budget for the chosen window and reserve (None: unknown)."""
        from ipyagent.agent.provider_summarizer import summary_input_budget
        from ipyagent.agent.run_config import RunConfig

        if not (self.summary_model or self.model):
            return None
        config = RunConfig(model=self.model, summary_model=self.summary_model,
                             context_window=self.settings.window, compaction=self.settings.compaction())
        try:
            return summary_input_budget(config, self.settings.window if self.window_known else None, self.providers)
        except ValueError:  # a model string the registry does not know
            return None

    def _requests_key_for(self, plan: CompactionPlan) -> tuple[Any, ...]:
        return (_session_key(self.session), plan.boundary_start, plan.first_kept_index, plan.turn_start_index,
                plan.settings.reserve_tokens, self.settings.focus, self.summary_input_tokens())

    def requests_ready(self, exploration: Exploration | None = None) -> bool:
        """Whether :meth:`requests` would answer from its cache (no serialising)."""
        exploration = exploration or self.current or self.update()
        return exploration.plan is None or self._requests_key_for(exploration.plan) == self._requests_key

    def requests(self, exploration: Exploration | None = None) -> list[tuple[SummaryRequest, int]]:
        """The requests the summariser would get first (``planned_requests``: the code compaction
        sends them with), each with how many of its oldest messages were dropped to fit."""
        exploration = exploration or self.current or self.update()
        plan = exploration.plan
        if plan is None:
            return []
        key = self._requests_key_for(plan)
        if key != self._requests_key:
            self._requests = planned_requests(plan, self.settings.focus or None, input_tokens=key[-1])
            self._requests_key = key
        exploration.requests = self._requests
        return self._requests or []


def _boxes(tokens: PathTokens, ranges: dict[str, tuple[int, int]], latest: int) -> tuple[list[Box], str]:
    """The timeline's boxes: runs of one fate, split per entry, per turn or per k turns."""
    n = len(tokens.path)
    # fate runs in path order; the latest compaction is a box of its own
    runs: list[tuple[int, int, str]] = []
    for fate in ("earlier", "summarised", "prefix", "kept"):
        a, b = ranges[fate]
        if a >= b:
            continue
        if a <= latest < b:
            if a < latest:
                runs.append((a, latest, fate))
            runs.append((latest, latest + 1, "summary"))
            if latest + 1 < b:
                runs.append((latest + 1, b, fate))
        else:
            runs.append((a, b, fate))
    if n <= ENTRY_BOX_LIMIT:
        boxes = []
        for a, b, fate in runs:
            for i in range(a, b):
                boxes.append(Box(i, i + 1, fate, tokens.box_tokens(i, i + 1), int(i in tokens.turn_set)))
        return boxes, "entry"
    turns = max(1, len(tokens.turn_starts))
    k = max(1, math.ceil(turns / TURN_BOX_LIMIT))
    boxes = []
    starts = tokens.turn_starts
    for a, b, fate in runs:
        if b - a == 1:
            boxes.append(Box(a, b, fate, tokens.box_tokens(a, b), int(a in tokens.turn_set)))
            continue
        # turn starts inside (a, b): every k-th one begins a new box
        lo = bisect.bisect_right(starts, a)
        hi = bisect.bisect_left(starts, b)
        cuts = starts[lo:hi][k - 1::k] if k > 1 else starts[lo:hi]
        edges = [a, *cuts, b]
        for x, y in itertools.pairwise(edges):
            if x < y:
                inside = bisect.bisect_left(starts, y) - bisect.bisect_left(starts, x)
                boxes.append(Box(x, y, fate, tokens.box_tokens(x, y), inside))
    return boxes, "turn" if k == 1 else f"{k} turns"

