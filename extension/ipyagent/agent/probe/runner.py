"""Probes of summary quality: what did the latest compaction lose, and does ``recall`` win it back?

    report = ProbeRunner(session, model="openai:gpt-4.1-mini", judge="openai:gpt-4.1").run()
    print(report.text())

From the part of the session the latest compaction summarised away, the judge model writes
questions of four kinds (recall, artifact, continuation, decision) with reference answers. The
session's model answers each question three ways — after the full history, after the compacted
context, and after the compacted context with the ``recall`` tool — and the judge grades every
answer from 0 to 5. The report is a table per kind plus the tokens each way cost. The prompts
are in :mod:`ipyagent.agent.probe.probe_prompts`.

``recompact`` makes a fresh single compaction of the same history (another summary model, focus
or settings), so variants can be compared on equal terms. Every model response is kept in
``report.recording``; :class:`RecordedResponses` answers from it, so a recorded probe replays
offline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, cast

from ipyagent.agent.probe import probe_prompts as prompts
from ipyagent.agent.replayer import ReplayDivergence
from ipyagent.agent.tools.tool import Tool, ToolContext
from ipyagent.agent.tools.tool_registry import default_tools
from ipyagent.compaction.serialize import serialize_conversation
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import Summarizer, SummarizerError, SummaryRequest, SummaryResponse
from ipyagent.core import Session
from ipyagent.providers.errors import ProviderError
from ipyagent.providers.provider import MessageDone, ModelRequest, Provider, StreamEvent, TextDelta, ToolCallEnd
from ipyagent.providers.registry import ProviderRegistry, default_registry
from ipyagent.providers.transport.retry import stream_with_retry
from ipyagent.session.messages import (
    convert_to_llm,
    entry_to_message,
    text_of,
    tool_calls_of,
    tool_result_message,
    user_message,
)
from ipyagent.session.tokens import normalize_usage
from ipyagent.shapes import Entry, Message, Usage

WAYS = ("full", "compacted", "recall")
WAY_LABELS = {"full": "full history", "compacted": "compacted", "recall": "compacted + recall"}
PROBE_CUSTOM_TYPE = "ipyagent.probe"
DEFAULT_HISTORY_CHARS = 240_000  # what the question writer reads at most when its window is unknown
MAX_RECALL_ROUNDS = 4

Progress = Callable[[str], None]


class ProbeError(RuntimeError):
    """The probe cannot run (nothing summarised, no usable questions…); the session is unchanged."""


@dataclass
class ProbeAnswer:
    way: str
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)  # summed over this answer's model calls
    calls: int = 0
    recalls: int = 0
    score: int | None = None
    reason: str = ""
    error: str | None = None


@dataclass
class ProbeItem:
    kind: str
    question: str
    reference: str
    answers: dict[str, ProbeAnswer] = field(default_factory=dict)


class RecordedResponse(TypedDict, total=False):
    """One model response of a probe, as its report records it for replay: an answer or a
    question (``message``) or a summary (``text`` and ``usage``)."""

    kind: str  # "questions", "answer:<way>", "grade", "summary:<kind>"…
    message: Message
    text: str
    usage: Usage


@dataclass
class ProbeReport:
    model: str
    judge: str
    items: list[ProbeItem] = field(default_factory=list)
    question_usage: dict[str, int] = field(default_factory=dict)
    judge_usage: dict[str, int] = field(default_factory=dict)
    judge_calls: int = 0
    compaction_id: str | None = None
    summarized_entries: int = 0
    recompacted: bool = False
    focus: str | None = None
    recording: list[RecordedResponse] = field(default_factory=list)  # every model response, in order

    # ---- numbers ---------------------------------------------------------------------------

    def mean(self, way: str, kind: str | None = None) -> float | None:
        scores = [score for item in self.items if (kind is None or item.kind == kind) and way in item.answers
                  for score in [item.answers[way].score] if score is not None]
        return sum(scores) / len(scores) if scores else None

    def way_usage(self, way: str) -> dict[str, int]:
        return _sum([item.answers[way].usage for item in self.items if way in item.answers])

    def rows(self) -> list[list[str]]:
        """The score table: a row per kind and one overall; columns: kind, questions, each way."""
        out = []
        for kind in (*prompts.KINDS, None):
            count = sum(1 for item in self.items if kind is None or item.kind == kind)
            if kind is not None and not count:
                continue
            out.append([kind or "overall", str(count), *(_score(self.mean(way, kind)) for way in WAYS)])
        return out

    def token_rows(self) -> list[list[str]]:
        rows = []
        for way in WAYS:
            usage = self.way_usage(way)
            calls = sum(item.answers[way].calls for item in self.items if way in item.answers)
            rows.append([WAY_LABELS[way], f"{_input(usage):,}", f"{usage.get('output', 0):,}", str(calls)])
        rows.append(["questions", f"{_input(self.question_usage):,}", f"{self.question_usage.get('output', 0):,}", "1"])
        rows.append(["judge", f"{_input(self.judge_usage):,}", f"{self.judge_usage.get('output', 0):,}",
                     str(self.judge_calls)])
        return rows

    # ---- views -----------------------------------------------------------------------------

    def heading(self) -> str:
        what = "a fresh compaction" if self.recompacted else f"compaction {self.compaction_id}"
        focus = f", focus {self.focus!r}" if self.focus else ""
        return (f"Probe of {what}{focus}: {self.summarized_entries} entries summarised away, "
                f"{len(self.items)} questions. Model {self.model}, judge {self.judge}.")

    def text(self) -> str:
        scores = _plain_table(["kind", "questions", *(WAY_LABELS[w] for w in WAYS)], self.rows())
        tokens = _plain_table(["tokens", "input", "output", "calls"], self.token_rows())
        return f"{self.heading()}\n\nMean score (0-5)\n{scores}\n\n{tokens}"

    def markdown_tables(self) -> tuple[str, str]:
        """The two tables as Markdown (cells are numbers and fixed labels only)."""
        return (_markdown_table(["kind", "questions", *(WAY_LABELS[w] for w in WAYS)], self.rows()),
                _markdown_table(["tokens", "input", "output", "calls"], self.token_rows()))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeReport:
        items = [ProbeItem(i["kind"], i["question"], i["reference"],
                           {w: ProbeAnswer(**a) for w, a in (i.get("answers") or {}).items()})
                 for i in data.get("items") or []]
        return cls(**{**data, "items": items})


# ---- running -----------------------------------------------------------------------------------


class ProbeRunner:
    """One probe of ``session``'s latest compaction (see the module docstring).

    ``answer_provider`` / ``judge_provider`` default to the providers of ``model`` / ``judge``
    (``judge`` defaults to ``model``) in ``providers``; pass one :class:`RecordedResponses` as both to
    replay. ``tools`` are those the answers may use (default: the built-ins and the user's).
    """

    def __init__(self, session: Session, *, model: str, judge: str | None = None, per_kind: int = 2,
                 answer_provider: Provider | None = None, judge_provider: Provider | None = None,
                 provider_options: dict[str, dict[str, Any]] | None = None, history_chars: int | None = None,
                 max_recall_rounds: int = MAX_RECALL_ROUNDS, max_retries: int = 3, base_delay: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, cancel: threading.Event | None = None,
                 progress: Progress | None = None, recording: list[RecordedResponse] | None = None,
                 providers: ProviderRegistry | None = None, tools: list[Tool] | None = None):
        if per_kind < 1:
            raise ProbeError("ask for at least one question of each kind")
        self.session = session
        self.providers = providers or default_registry()
        self.tools = default_tools() if tools is None else list(tools)
        self.model, self.judge = model, judge or model
        self.per_kind = per_kind
        self._options = provider_options
        self._answer_provider, self._judge_provider = answer_provider, judge_provider
        self.history_chars = history_chars
        self.max_recall_rounds = max_recall_rounds
        self.max_retries, self.base_delay, self._sleep, self.cancel = max_retries, base_delay, sleep, cancel
        self.progress = progress or (lambda text: None)
        # every model response, in order (a recompaction's summaries first, when the caller recorded them)
        self.recording: list[RecordedResponse] = recording if recording is not None else []

    # -- providers --

    def _provider(self, role: str) -> tuple[Provider, str]:
        name = self.model if role == "answer" else self.judge
        model_id = self.providers.parse(name)[1]
        given = self._answer_provider if role == "answer" else self._judge_provider
        if given is None:
            given = self.providers.resolve(name, self._options)[0]
            if role == "answer":
                self._answer_provider = given
            else:
                self._judge_provider = given
        return given, model_id

    def _call(self, role: str, kind: str, system: str, messages: list[Message],
              tools: list[Any] | None = None, max_tokens: int | None = None) -> Message:
        provider, model_id = self._provider(role)
        name = self.model if role == "answer" else self.judge
        request = ModelRequest(model=model_id, messages=messages, system_prompt=system, tools=list(tools or []),
                               max_tokens=max_tokens, options={"request_kind": f"probe:{kind}", "probe_call": kind},
                               model_info=self.providers.info(name))
        message = None
        for event in stream_with_retry(provider, request, max_retries=self.max_retries, base_delay=self.base_delay,
                                       sleep=self._sleep, cancel=self.cancel):
            if isinstance(event, MessageDone):
                message = event.message
        if message is None or message.get("stopReason") in ("error", "aborted"):
            reason = (message or {}).get("errorMessage") or (message or {}).get("stopReason") or "no response"
            if (message or {}).get("stopReason") == "aborted":
                raise KeyboardInterrupt
            raise ProviderError(f"the {role} model failed: {reason}")
        self.recording.append({"kind": kind, "message": _trimmed(message)})
        return message

    # -- the probe --

    def run(self) -> ProbeReport:
        hidden = self.session.summarized_entries()
        if not hidden:
            raise ProbeError("Nothing has been summarised away in this session yet: compact it first "
                             "(%compact, ipyagent compact), or probe a fresh compaction (--recompact).")
        compaction = self.session.compactions()[-1]
        report = ProbeReport(model=self.model, judge=self.judge, compaction_id=compaction.get("id"),
                             summarized_entries=len(hidden), recording=self.recording)
        self.progress("writing the questions")
        questions = self._questions(hidden, report)
        tools = [t for t in self.tools if t.name != "recall"]
        recall_tool = next((t for t in self.tools if t.name == "recall"), None)
        if recall_tool is None:
            raise ProbeError("the recall tool is not registered")
        full = _full_history(self.session)
        compacted = self.session.build_context()
        for n, question in enumerate(questions, 1):
            item = ProbeItem(question.kind, question.question, question.reference)
            report.items.append(item)
            for way in WAYS:
                self.progress(f"question {n}/{len(questions)}: answering ({WAY_LABELS[way]})")
                context = full if way == "full" else compacted
                offered = [*tools, recall_tool] if way == "recall" else tools
                item.answers[way] = self._answer(way, question.question, context, offered, recall_tool)
            for way in WAYS:
                self.progress(f"question {n}/{len(questions)}: grading ({WAY_LABELS[way]})")
                self._grade(item, item.answers[way], report)
        return report

    def _questions(self, hidden: list[Entry], report: ProbeReport) -> list[prompts.Question]:
        messages = [m for m in (entry_to_message(e) for e in hidden) if m is not None]
        history = _fit(messages, self._history_chars())
        prompt = prompts.questions_prompt(history, self.per_kind)
        message = self._call("judge", "questions", prompts.QUESTIONS_SYSTEM,
                             [user_message(prompt)], max_tokens=4096)
        report.question_usage = _usage(message)
        questions = prompts.parse_questions(text_of(message.get("content"), "\n"), self.per_kind)
        if not questions:
            raise ProbeError(f"The question writer ({self.judge}) returned no usable questions: "
                             f"{_clip(text_of(message.get('content'), ' '))!r}")
        return questions

    def _history_chars(self) -> int:
        if self.history_chars:
            return self.history_chars
        try:
            info = self.providers.info(self.judge)
        except ValueError:
            info = None
        window = info.context_window if info else None
        return int(window * 4 * 0.6) if window else DEFAULT_HISTORY_CHARS

    def _answer(self, way: str, question: str, context: list[Message], tools: list[Any],
                recall_tool: Any) -> ProbeAnswer:
        answer = ProbeAnswer(way)
        messages = [*context, user_message(prompts.answer_prompt(question))]
        system = prompts.ANSWER_SYSTEM_RECALL if way == "recall" else prompts.ANSWER_SYSTEM
        specs = [t.spec() for t in tools]
        history = ToolContext(history=self.session)
        usages = []
        try:
            for _ in range(self.max_recall_rounds + 1):
                message = self._call("answer", f"answer:{way}", system, messages, specs)
                answer.calls += 1
                usages.append(_usage(message))
                answer.text = text_of(message.get("content"), "\n").strip() or answer.text
                calls = tool_calls_of(message)
                if not calls:
                    break
                messages.append(message)
                for call in calls:
                    if way == "recall" and call.get("name") == "recall":
                        answer.recalls += 1
                        arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
                        output = recall_tool.run(arguments, history)
                        text, is_error = output.text, output.is_error
                    else:
                        text, is_error = prompts.NOT_AVAILABLE, True
                    messages.append(tool_result_message(call.get("id", ""), call.get("name", ""), text,
                                                        is_error=is_error))
        except ReplayDivergence:
            raise
        except ProviderError as exc:  # e.g. the full history does not fit the model: that way gets no score
            answer.error = str(exc)
        answer.usage = _sum(usages)
        return answer

    def _grade(self, item: ProbeItem, answer: ProbeAnswer, report: ProbeReport) -> None:
        if answer.error is not None:
            answer.reason = "not graded: the answer failed"
            return
        prompt = prompts.judge_prompt(item.question, item.reference, answer.text or "(no answer)")
        message = self._call("judge", "judge", prompts.JUDGE_SYSTEM, [user_message(prompt)], max_tokens=512)
        report.judge_calls += 1
        report.judge_usage = _sum([report.judge_usage, _usage(message)])
        answer.score, answer.reason = prompts.parse_grade(text_of(message.get("content"), "\n"))
        if answer.score is None:
            answer.reason = f"the judge gave no score: {_clip(answer.reason)}"


def _full_history(session: Session) -> list[Message]:
    """The current path's messages as if it had never been compacted."""
    messages = [entry_to_message(e) for e in session.path() if e.get("type") != "compaction"]
    return convert_to_llm(m for m in messages if m is not None)


def _fit(messages: list[Message], limit: int) -> str:
    """The transcript the summariser would read, the oldest messages dropped until it fits ``limit`` characters."""
    text = serialize_conversation(messages)
    dropped = 0
    while len(text) > limit and len(messages) > 1:
        cut = max(1, len(messages) // 8)
        messages, dropped = messages[cut:], dropped + cut
        text = serialize_conversation(messages)
    if dropped:
        text = f"[{dropped} earlier messages omitted to fit the question writer's window]\n\n" + text
    return text[-limit:] if len(text) > limit else text


# ---- a fresh compaction to probe ---------------------------------------------------------------


def recompact(session: Session, summarizer: Summarizer, settings: CompactionSettings | None = None, *,
              focus: str | None = None, summary_input_tokens: int | None = None,
              describe: Callable[[list[str]], Any] | None = None) -> Session:
    """An in-memory copy of ``session``'s current path without its compactions, compacted once
    with ``summarizer``, ``settings`` and ``focus``. The session itself is not changed."""
    entries: list[Entry] = []
    parent: str | None = None
    for entry in session.path():
        if entry.get("type") == "compaction":
            continue
        copied = entry.copy()
        copied["parentId"] = parent
        entries.append(copied)
        parent = entry["id"]
    fresh = Session(session.header.copy(), entries, leaf_id=parent, estimator=session.estimator, hooks=session.hooks)
    fresh.compact(summarizer, settings or CompactionSettings(), focus=focus, reason="manual",
                  summary_input_tokens=summary_input_tokens, describe=describe)
    return fresh


class RecordingSummarizer:
    """Passes summary requests on and keeps each response in ``recording`` (for replay)."""

    def __init__(self, inner: Summarizer, recording: list[RecordedResponse]):
        self.inner, self.recording = inner, recording

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        response = self.inner.summarize(request)
        self.recording.append({"kind": f"summary:{request.kind}", "text": response.text, "usage": response.usage})
        return response


# ---- replay ------------------------------------------------------------------------------------


class RecordedResponses:
    """A Provider and a Summarizer that answer a probe from a recorded probe's responses, in order.

    A request of another kind than the recording has next (the probe went another way) or past
    its end raises :class:`~ipyagent.agent.replayer.ReplayDivergence`.
    """

    name = "replay"
    api = "replay"

    def __init__(self, recording: list[RecordedResponse]):
        self.recording = [r for r in recording if isinstance(r, dict)]
        self.position = 0

    def _next(self, kind: str) -> RecordedResponse:
        if self.position >= len(self.recording):
            raise ReplayDivergence(f"Replay of the probe diverged: it asks for more than the "
                                   f"{len(self.recording)} recorded responses.")
        item = self.recording[self.position]
        if item.get("kind") != kind:
            raise ReplayDivergence(f"Replay of the probe diverged: response {self.position + 1} was recorded for "
                                   f"{item.get('kind')!r}, the probe asks for {kind!r}.")
        self.position += 1
        return item

    def stream(self, request: ModelRequest, cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
        message = self._next(str(request.options.get("probe_call"))).get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list) \
                or not all(isinstance(b, dict) for b in message["content"]):
            raise ReplayDivergence(f"Replay of the probe stopped: recorded response {self.position} is malformed.")
        for block in message["content"]:
            if block.get("type") == "text" and block.get("text"):
                yield TextDelta(block["text"])
            elif block.get("type") == "toolCall":
                yield ToolCallEnd(0, block.get("id", ""), block.get("name", ""), block.get("arguments") or {})
        yield MessageDone(message.copy())

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        try:
            item = self._next(f"summary:{request.kind}")
        except ReplayDivergence as exc:
            raise SummarizerError(str(exc)) from exc
        usage: Usage = item.get("usage") or {}
        return SummaryResponse(str(item.get("text") or ""), usage.copy())


# ---- helpers -----------------------------------------------------------------------------------


def _trimmed(message: Message) -> Message:
    content = [b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") in ("text", "toolCall")]
    return {"role": "assistant", "content": content, "usage": message.get("usage") or {},
            "stopReason": cast(str, message.get("stopReason")), "api": message.get("api", ""),
            "provider": message.get("provider", ""), "model": message.get("model", ""), "timestamp": 0}


def _usage(message: Message) -> dict[str, int]:
    usage = normalize_usage(message.get("usage") or {})
    return {"input": int(usage.get("input") or 0), "output": int(usage.get("output") or 0),
            "cacheRead": int(usage.get("cacheRead") or 0), "cacheWrite": int(usage.get("cacheWrite") or 0)}


def _sum(usages: list[dict[str, int]]) -> dict[str, int]:
    total = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    for usage in usages:
        for key in total:
            total[key] += int(usage.get(key) or 0)
    return total


def _input(usage: dict[str, int]) -> int:
    return sum(int(usage.get(k) or 0) for k in ("input", "cacheRead", "cacheWrite"))


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _plain_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [header, *rows]
    return "\n".join("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))) for r in lines)


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    head = "| " + " | ".join(header) + " |\n|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"
    return head + "".join("\n| " + " | ".join(r) + " |" for r in rows)


__all__ = ["PROBE_CUSTOM_TYPE", "ProbeAnswer", "ProbeError", "ProbeItem", "ProbeReport", "ProbeRunner",
           "RecordedResponses", "RecordingSummarizer", "WAYS", "WAY_LABELS", "recompact"]
