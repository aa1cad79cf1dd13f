"""Replaying a recorded session: the model's answers (and the summariser's) come from the
entries recorded for each cell, while everything else — the budget, the trigger, the cut point,
the preparation — runs for real. Recorded tool calls are not re-executed unless asked. A replay
that follows the recorded path in the session (the notebook's, ``Session.follow``) also gives
the agent loop :class:`ReplayCompactions`: compactions are then made where the recording made
them, with its cut and summary, and nowhere else.

    recording = Recording.from_entries(recorded_session.entries)
    cell = recording.cell("cell-id")                  # what that cell recorded
    with agent.using(replay_ports(cell, agent.ports)):
        agent.prompt(...)

Where the live run departs from the recording (another prompt, more calls than recorded,
another cut point), ``ReplayDivergence`` names the cell and says how; with a ``fallback``
provider the run continues live instead. A recorded tool call whose result the recording lacks
(an interrupted recording, or a notebook from someone else) is never run: it gets the result an
interrupted call gets, and a notice says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ipyagent.agent.compaction_oracle import SKIP, CompactionRuling
from ipyagent.agent.ports import RunPorts
from ipyagent.agent.tools.tool import ToolOutput
from ipyagent.compaction.ledger import split_appendix
from ipyagent.compaction.prompts import SPLIT_TURN_SEPARATOR
from ipyagent.compaction.summarizer import Summarizer, SummarizerError, SummaryRequest, SummaryResponse
from ipyagent.providers.errors import ProviderError
from ipyagent.providers.provider import MessageDone, ModelRequest, Provider, StreamEvent, TextDelta, ToolCallEnd
from ipyagent.session.entries import compaction_trigger, same_content
from ipyagent.session.messages import NOT_RUN_INTERRUPTED, entry_to_message, prompt_text, text_of, tool_calls_of
from ipyagent.shapes import ContentBlock, Entry, Message

if TYPE_CHECKING:
    from ipyagent.core import Session

Notice = Callable[[str], None]


class ReplayDivergence(ProviderError):
    """The live run no longer matches the recording and no live provider is configured."""


@dataclass
class CellRecording:
    cell_id: str
    prompt: str  # the recorded prompt, as the user typed it
    assistant_messages: list[Message] = field(default_factory=list)
    tool_results: dict[str, Message] = field(default_factory=dict)  # call id -> toolResult message
    compactions: list[Entry] = field(default_factory=list)  # compaction entries, in order
    kept_first: list[str] = field(default_factory=list)  # text of each compaction's first kept message

    def recorded_call_ids(self) -> set[str]:
        """Ids of the tool calls in the recorded assistant messages."""
        return {c["id"] for m in self.assistant_messages for c in tool_calls_of(m) if isinstance(c.get("id"), str)}


@dataclass
class Recording:
    """Recorded runs by cell id; a cell run several times keeps its runs in order."""

    cells: dict[str, list[CellRecording]] = field(default_factory=dict)
    # custom entries a cell wrote (e.g. a probe's report and its recorded responses), by cell id
    custom: dict[str, list[Entry]] = field(default_factory=dict)

    @classmethod
    def from_entries(cls, entries: list[Entry]) -> Recording:
        recording = cls()
        by_id = {e["id"]: e for e in entries}
        current: CellRecording | None = None
        for entry in entries:
            message = entry.get("message") if entry.get("type") == "message" else None
            if message and message.get("role") == "user":
                cell_id = message.get("cellId")
                current = None
                if cell_id:
                    current = CellRecording(cell_id, prompt_text(message))
                    recording.cells.setdefault(cell_id, []).append(current)
                continue
            if entry.get("type") == "custom" and isinstance(entry.get("cellId"), str):
                recording.custom.setdefault(entry["cellId"], []).append(entry)
                continue
            if entry.get("type") == "compaction" and entry.get("cellId"):  # a %compact cell
                own = CellRecording(entry["cellId"], "")
                own.compactions.append(entry)
                own.kept_first.append(_fingerprint(by_id.get(entry.get("firstKeptEntryId", ""))))
                recording.cells.setdefault(entry["cellId"], []).append(own)
                continue
            if current is None:
                continue
            if message and message.get("role") == "assistant":
                as_sent = entry_to_message(entry)  # string content as a block
                if as_sent is not None:
                    current.assistant_messages.append(as_sent)
            elif message and message.get("role") == "toolResult":
                current.tool_results[message.get("toolCallId") or ""] = message
            elif entry.get("type") == "compaction":
                current.compactions.append(entry)
                kept = by_id.get(entry.get("firstKeptEntryId", ""))
                current.kept_first.append(_fingerprint(kept))
        return recording

    def cell(self, cell_id: str, run: int = 0) -> CellRecording | None:
        runs = self.cells.get(cell_id) or []
        return runs[run] if run < len(runs) else None


def _fingerprint(entry: Entry | None) -> str:
    if not entry:
        return ""
    message = entry.get("message") or {}
    content = message.get("content")
    if message.get("role") == "assistant":
        calls = [b.get("id") for b in content or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
        return f"assistant:{text_of(content)}:{calls}"
    return f"{message.get('role', entry.get('type'))}:{text_of(content) if content is not None else ''}"


def same_when_replayed(recorded: Entry, new: Entry) -> bool:
    """Whether a replay's entry is the recorded one: it says the same
    (:func:`~ipyagent.session.entries.same_content`), or it is the cell's prompt and the prompt
    as typed (and its cell) is the recorded one. The notebook-activity block and interpolated
    values in a prompt describe the kernel as it is at the time; a replay reproduces that only in
    part (recorded tool calls are not run again, so what they made is missing), and the recorded
    responses answered the recorded prompt, so the recorded prompt is the one the session keeps."""
    if same_content(recorded, new):
        return True
    old, fresh = recorded.get("message"), new.get("message")
    if recorded.get("type") != "message" or new.get("type") != "message" or not (
            isinstance(old, dict) and isinstance(fresh, dict)):
        return False
    return (old.get("role") == fresh.get("role") == "user" and old.get("cellId") == fresh.get("cellId")
            and prompt_text(old).strip() == prompt_text(fresh).strip())


class ReplayProvider:
    """A Provider that answers with a cell's recorded assistant messages, in order."""

    name = "replay"
    api = "replay"

    def __init__(self, cell: CellRecording, *, fallback: Provider | None = None, notice: Notice | None = None):
        self.cell = cell
        self.fallback = fallback
        self.notice = notice or (lambda text: None)
        self.position = 0
        self.diverged: str | None = None

    def _diverge(self, why: str) -> None:
        if self.diverged is None:
            self.diverged = why
            text = f"Replay of cell {self.cell.cell_id} diverged: {why}."
            if self.fallback is None:
                raise ReplayDivergence(text + " No live provider is configured, so the run stops here.")
            self.notice(text + " Continuing with the live provider.")

    def stream(self, request: ModelRequest, cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
        if self.diverged is None:
            prompt = _last_user_text(request.messages)
            if self.position == 0 and prompt is not None and prompt.strip() != self.cell.prompt.strip():
                self._diverge("the cell's prompt is not the recorded one")
            elif self.position >= len(self.cell.assistant_messages):
                recorded = len(self.cell.assistant_messages)
                self._diverge(f"the live run asks for more than the {recorded} recorded responses")
        if self.diverged is not None:
            assert self.fallback is not None
            yield from self.fallback.stream(request, cancel)
            return
        message = self.cell.assistant_messages[self.position]
        self.position += 1
        for block in message.get("content") or []:
            if block.get("type") == "text" and block.get("text"):
                yield TextDelta(block["text"])
            elif block.get("type") == "toolCall":
                yield ToolCallEnd(0, block.get("id", ""), block.get("name", ""), block.get("arguments") or {})
        yield MessageDone(message.copy())


def _last_user_text(messages: list[Message]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            return prompt_text(message)
    return None


def split_recorded_summary(summary: str) -> tuple[str, str | None]:
    """(history part, turn-prefix part or None) of a recorded summary, without its file lists
    and artifact ledger (compaction appends them again)."""
    body, _ = split_appendix(summary)
    if SPLIT_TURN_SEPARATOR in body:
        history, prefix = body.split(SPLIT_TURN_SEPARATOR, 1)
        return history, prefix
    return body, None


class ReplaySummarizer:
    """Gives each compaction in the cell its recorded summary (history and turn prefix): the one
    :meth:`aim` named (the recorded compaction being reproduced), else the cell's next one."""

    def __init__(self, cell: CellRecording, *, fallback: Summarizer | None = None, notice: Notice | None = None):
        self.cell = cell
        self.fallback = fallback
        self.notice = notice or (lambda text: None)
        self.position = 0
        self.calls = 0
        self._aimed: Entry | None = None

    def aim(self, entry: Entry | None) -> None:
        """The next compaction reproduces the recorded compaction ``entry`` (None: no aim); the
        cell's next one is then the one after it."""
        self._aimed = entry

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        kind = request.kind
        aimed = self._aimed
        if aimed is None and self.position >= len(self.cell.compactions):
            return self._live(request, "the live run compacts where the recording did not")
        recorded = aimed if aimed is not None else self.cell.compactions[self.position]
        history, prefix = split_recorded_summary(recorded.get("summary", ""))
        if kind == "turn_prefix" or prefix is None:
            self._done(recorded)
        if kind == "turn_prefix":
            if prefix is None:
                return self._live(request, "the live compaction splits a turn the recording did not split")
            return SummaryResponse(prefix)
        return SummaryResponse(history)

    def _done(self, recorded: Entry) -> None:
        if recorded is self._aimed:
            self._aimed = None
            ids = [c.get("id") for c in self.cell.compactions]
            if recorded.get("id") in ids:
                self.position = ids.index(recorded.get("id")) + 1
        else:
            self.position += 1

    def _live(self, request: SummaryRequest, why: str) -> SummaryResponse:
        text = f"Replay of cell {self.cell.cell_id} diverged: {why}."
        if self.fallback is None:
            raise SummarizerError(text + " No live summary model is configured, so the compaction stops here.")
        self.notice(text + " Summarising with the live model.")
        return self.fallback.summarize(request)


class ReplayDescriber:
    """The artifact ledger's ``describe`` for a replayed cell: each compaction gets the variable
    descriptions its recording holds (the recorded tool calls did not run again, so the namespace
    may lack them): the compaction :meth:`aim` named, else the cell's next one; names the
    recording does not know go to ``fallback`` (the live namespace)."""

    def __init__(self, cell: CellRecording, fallback: Callable[[list[str]], Any] | None = None):
        self.recorded = [c for c in cell.compactions if not c.get("fromHook")]
        self.fallback = fallback
        self.position = 0
        self._aimed: Entry | None = None

    def aim(self, entry: Entry | None) -> None:
        """The next description is for the recorded compaction ``entry`` (None: no aim)."""
        self._aimed = entry

    def _take(self) -> Entry | None:
        aimed, self._aimed = self._aimed, None
        ids = [c.get("id") for c in self.recorded]
        if aimed is not None:
            if aimed.get("id") in ids:
                self.position = ids.index(aimed.get("id")) + 1
            return aimed
        self.position += 1
        return self.recorded[self.position - 1] if self.position <= len(self.recorded) else None

    def __call__(self, names: list[str]) -> dict[str, str]:
        known: dict[str, str] = {}
        seen: set[str] = set()
        recorded = self._take()
        details = recorded.get("details") if recorded is not None else None
        artifacts = details.get("artifacts") if isinstance(details, dict) else None
        for item in (artifacts or {}).get("variables") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                seen.add(item["name"])
                if item.get("defined") is not False and isinstance(item.get("type"), str):
                    known[item["name"]] = item["type"]
        rest = [n for n in names if n not in seen]
        if rest and self.fallback is not None:
            live = self.fallback(rest)
            known.update({k: v for k, v in (live or {}).items() if isinstance(v, str)})
        return {n: known[n] for n in names if n in known}


class ReplayCompactions:
    """The compaction oracle of a replayed cell (``agent/compaction_oracle.py``): while the
    session follows the recorded path, compactions happen where the recording made them, with
    its cut and summary, and nowhere else; once the run departs from the recording (a new
    branch, or the provider diverged), the live budget decides again.

    The budget's arithmetic in a replay need not be the recording's (another window, another
    system prompt or tool list, a summary the recording rejected as not shrinking the context —
    such an attempt leaves no entry), so following the budget would put compactions elsewhere
    and the replay would depart from the recording."""

    def __init__(self, cell: CellRecording, summarizer: ReplaySummarizer, describer: ReplayDescriber | None = None,
                 provider: ReplayProvider | None = None):
        self.cell = cell
        self.summarizer = summarizer
        self.describer = describer
        self.provider = provider

    def rule(self, session: Session, *, manual: bool) -> CompactionRuling | None:
        self._aim(None)
        if (self.provider is not None and self.provider.diverged) or not session.on_followed_path():
            return None
        upcoming = session.followed_next()
        if upcoming is None or upcoming.get("type") != "compaction":
            return None if manual else SKIP
        if manual:  # the user's %compact: reproduce this cell's recorded compaction if it is next
            if upcoming.get("cellId") != self.cell.cell_id:
                return None
        elif upcoming.get("cellId"):  # a %compact cell's compaction is that cell's to make
            return SKIP
        self._aim(upcoming)
        return CompactionRuling(True, upcoming.get("firstKeptEntryId"), compaction_trigger(upcoming))

    def _aim(self, entry: Entry | None) -> None:
        self.summarizer.aim(entry)
        if self.describer is not None:
            self.describer.aim(entry)


class ReplayToolResults:
    """Recorded tool results by call id; with ``rerun`` the tool runs and differences are reported.

    A recorded call without a recorded result is not run, with or without ``rerun``: it gets
    the interrupted-call result (:data:`~ipyagent.session.messages.NOT_RUN_INTERRUPTED`) and a
    notice. Only calls the recording never saw (a live provider's, after a divergence) run.
    """

    def __init__(self, cell: CellRecording, *, rerun: bool = False, notice: Notice | None = None):
        self.cell = cell
        self.rerun = rerun
        self.notice = notice or (lambda text: None)
        self.differences: list[str] = []
        self.not_run: list[str] = []  # ids of recorded calls without a recorded result
        self._recorded_calls = cell.recorded_call_ids()

    def recorded(self, call: ContentBlock) -> ToolOutput | None:
        message = self.cell.tool_results.get(str(call.get("id")))
        if message is None:
            return None
        content = message.get("content")
        images = cast(list[ContentBlock], [b for b in content if isinstance(b, dict) and b.get("type") == "image"]
                      if isinstance(content, list) else [])
        return ToolOutput(text_of(content, ""), is_error=bool(message.get("isError")),
                          details=message.get("details") or {}, images=images)

    def __call__(self, call: ContentBlock, run: Callable[[], ToolOutput]) -> ToolOutput:
        recorded = self.recorded(call)
        if recorded is None and call.get("id") in self._recorded_calls:
            self.not_run.append(call.get("id", ""))
            self.notice(f"Replay of cell {self.cell.cell_id}: the recording has no result for tool call "
                        f"{call.get('name')} ({call.get('id')}). Replay never runs a recorded call, so it "
                        "was not run; it gets the result of an interrupted call.")
            return ToolOutput(NOT_RUN_INTERRUPTED, is_error=True)
        if recorded is None:
            return run()  # a call the recording never saw: only possible after divergence
        if not self.rerun:
            return recorded
        live = run()
        if live.text != recorded.text or live.is_error != recorded.is_error:
            text = (f"Replay of cell {self.cell.cell_id}: tool call {call.get('name')} ({call.get('id')}) "
                    f"returned a different result than recorded.")
            self.differences.append(text)
            self.notice(text)
        return live


def replay_ports(cell: CellRecording, ports: RunPorts, *, fallback: Provider | None = None,
                 fallback_summarizer: Any = None, rerun_tools: bool = False,
                 notice: Notice | None = None) -> RunPorts:
    """``ports`` with the model, the summariser, the tool results and the compactions taken from
    ``cell``'s recording (the ``fallback`` provider and summariser take over where the run departs
    from it); the approver stays, and the namespace describer answers from the recording first."""
    provider = ReplayProvider(cell, fallback=fallback, notice=notice)
    summarizer = ReplaySummarizer(cell, fallback=fallback_summarizer, notice=notice)
    describer = ReplayDescriber(cell, fallback=ports.describe_namespace)
    return RunPorts(provider=provider, summarizer=summarizer,
                    tool_results=ReplayToolResults(cell, rerun=rerun_tools, notice=notice),
                    compaction_oracle=ReplayCompactions(cell, summarizer, describer, provider),
                    describe_namespace=describer, approve=ports.approve)
