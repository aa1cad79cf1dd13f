"""How a run looks in the notebook: streamed Markdown, tool blocks, readable errors, approvals.

:class:`RunRenderer` listens to the agent's events. Assistant text streams into one
``display(..., display_id=True)`` output per assistant turn, updated at most
``max_updates_per_second`` times a second (the last update always goes out), each update of a
bounded size (:class:`LiveText`: a long reply shows its start and its newest part until it ends). Tool calls and their
results are compact ``<details>`` blocks with a ``text/plain`` fallback. Errors are short
messages, never tracebacks. The budget widget (if any) follows the run live.

Everything shown here came from a model, a tool or the session's metadata, so every bundle is
``text/html`` built through :mod:`ipyagent.display.untrusted` (the reply's Markdown is rendered
to HTML there, raw HTML shown as text) plus ``text/plain``; none carries ``text/markdown``, which
JupyterLab would render raw in a trusted notebook.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from IPython.display import display

from ipyagent.agent import run_events as ev
from ipyagent.agent.tools.images import decode_image
from ipyagent.display.approval_question import decision_bundle
from ipyagent.display.progress import ProgressLine
from ipyagent.display.untrusted import escape_html, markdown_html, sanitize_html
from ipyagent.providers import provider as pb
from ipyagent.session.messages import text_of
from ipyagent.shapes import Message

__all__ = ["LiveText", "RunRenderer", "StreamedMarkdown", "error_bundle", "note_bundle", "reply_bundle", "tool_bundle",
           "short_args"]

MAX_TOOL_TEXT = 4000  # characters of a tool result shown in the block (the model got Pi's limits)


def _clip(text: str, limit: int = MAX_TOOL_TEXT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - limit:,} characters not shown) …\n{text[-half:]}"


def short_args(arguments: Mapping[str, object], limit: int = 80) -> str:
    """``python(code='1 + 1')``-style one-line summary of a call's arguments."""
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        shown = shown.replace("\n", "⏎ ")
        if len(shown) > 40:
            shown = shown[:37] + "…"
        parts.append(f"{key}={shown!r}" if isinstance(value, str) else f"{key}={shown}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _main_argument(name: str, arguments: Mapping[str, object]) -> tuple[str, str] | None:
    for key, lang in (("code", "python"), ("command", "bash"), ("content", "")):
        value = arguments.get(key)
        if isinstance(value, str):
            return value, lang
    return None


def _rich_parts(result: Message) -> tuple[list[str], int]:
    """HTML for a result's images (only allowed image types whose data decodes and starts like
    that type, re-encoded here) and its tool-made HTML (sanitised); and the number of images."""
    import base64

    parts: list[str] = []
    images = 0
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict) or block.get("type") != "image":
            continue
        mime = str(block.get("mimeType", ""))
        raw = decode_image(mime, block.get("data"))
        if raw is None:
            continue
        images += 1
        src = f"data:{mime};base64,{base64.b64encode(raw).decode('ascii')}"
        parts.append(f"<img src=\"{escape_html(src)}\" alt=\"{escape_html(mime)} output\" "
                     "style='max-width:100%;display:block;margin:2px 0'>")
    details = result.get("details")
    html_parts = details.get("html") if isinstance(details, dict) else None
    for fragment in html_parts if isinstance(html_parts, list) else []:
        if isinstance(fragment, str) and fragment.strip():
            parts.append(f"<div class='ipyagent-tool-html' style='overflow:auto;max-height:24em;margin:2px 0'>"
                         f"{sanitize_html(fragment)}</div>")
    return parts, images


def tool_bundle(name: str, arguments: Mapping[str, object], result: Message | None) -> dict[str, str]:
    """A compact expandable block for one tool call (and its result once known)."""
    if result is None:
        state, icon = "running…", "⏳"
    elif result.get("isError"):
        state, icon = "error", "✗"
    else:
        state, icon = "done", "✓"
    title = f"{icon} {name}({short_args(arguments)}) — {state}"
    body_parts = []
    main = _main_argument(name, arguments)
    rest = {k: v for k, v in arguments.items() if not main or arguments.get(k) is not main[0]}
    if main:
        body_parts.append(f"<pre style='margin:2px 0'>{escape_html(main[0])}</pre>")
    if rest:
        body_parts.append(f"<pre style='margin:2px 0;color:#555'>{escape_html(json.dumps(rest, indent=1, default=str))}"
                          "</pre>")
    output = ""
    images = 0
    if result is not None:
        output = _clip(text_of(result.get("content"), "\n"))
        color = "#a94442" if result.get("isError") else "#333"
        body_parts.append(f"<div style='font-size:85%;color:#777'>result</div>"
                          f"<pre style='margin:2px 0;color:{color};max-height:24em;overflow:auto'>"
                          f"{escape_html(output) or '(no output)'}</pre>")
        rich, images = _rich_parts(result)
        body_parts += rich
    html_view = (f"<details class='ipyagent-tool'><summary style='cursor:pointer;font-family:monospace'>"
                 f"{escape_html(title)}</summary><div style='margin-left:1.2em'>{''.join(body_parts)}</div></details>")
    plain = title
    if result is not None and output:
        first = output.strip().splitlines()[:3]
        plain += "\n" + "\n".join("    " + line for line in first)
    if images:
        plain += f"\n    [{images} image{'s' if images > 1 else ''}]"
    return {"text/plain": plain, "text/html": html_view}


def error_bundle(message: str, *, title: str = "ipyagent") -> dict[str, str]:
    return {
        "text/plain": f"{title}: {message}",
        "text/html": ("<div style='border-left:3px solid #d9534f;padding:2px 8px;background:rgba(217,83,79,.06)'>"
                      f"<b>{escape_html(title)}</b>: {escape_html(message).replace(chr(10), '<br>')}</div>"),
    }


def note_bundle(message: str) -> dict[str, str]:
    return {"text/plain": message,
            "text/html": f"<div style='color:#666;font-size:90%;font-style:italic'>{escape_html(message)}</div>"}


def reply_bundle(text: str, thinking: str = "", *, text_html: str | None = None,
                 thinking_html: str | None = None) -> dict[str, str]:
    """An assistant reply as it stands: its Markdown rendered to safe HTML, the thinking (if any)
    in a collapsed block above it. ``text_html`` / ``thinking_html``: already rendered (by
    :class:`StreamedMarkdown`)."""
    body = (text_html if text_html is not None else markdown_html(text)) if text else "<p>…</p>"
    if thinking:
        rendered = thinking_html if thinking_html is not None else markdown_html(thinking)
        body = (f"<details class='ipyagent-thinking'><summary>Thinking</summary>"
                f"<div style='color:#666'>{rendered}</div></details>{body}")
    return {"text/plain": text or "…", "text/html": f"<div class='ipyagent-reply'>{body}</div>"}


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class StreamedMarkdown:
    """The HTML of a growing Markdown text without rendering all of it on every update.

    The text up to the last blank line that is outside a code fence and followed by an unindented
    line is rendered once, in pieces; each update renders only what follows. Pieces are each
    complete, sanitised HTML, so joining them is as safe as one render; they can differ from a
    render of the whole (a list split by blank lines becomes two lists, a link whose definition
    comes later stays text), so the last update of a reply renders the whole text (``final``)."""

    def __init__(self) -> None:
        self._done = 0
        self._done_html: list[str] = []
        self._fence: str | None = None  # the fence open at self._scanned, if any
        self._scanned = 0
        self._cut = 0  # the last cut found while scanning

    def render(self, text: str, *, final: bool = False) -> str:
        if final or len(text) < self._done:
            return markdown_html(text)
        self._scan(text)
        if self._cut > self._done:
            self._done_html.append(markdown_html(text[self._done:self._cut]))
            self._done = self._cut
        return "".join(self._done_html) + markdown_html(text[self._done:])

    def _scan(self, text: str) -> None:
        """Advance over the complete lines not scanned yet, noting fences and possible cuts."""
        end = text.rfind("\n") + 1
        position = self._scanned
        previous_blank = position >= 2 and text[position - 2:position] == "\n\n"
        while position < end:
            newline = text.index("\n", position)
            line = text[position:newline]
            match = _FENCE.match(line)
            if self._fence is None:
                if previous_blank and line and not line[0].isspace() and match is None:
                    self._cut = position
                if match:
                    self._fence = match.group(1)
            elif match and line.strip() and set(line.strip()) == {self._fence[0]} and len(line.strip()) >= len(
                    self._fence):
                self._fence = None
            previous_blank = not line.strip()
            position = newline + 1
        self._scanned = position


LIVE_CHARS = 20_000  # a reply up to this long is shown whole while it streams
LIVE_HEAD_CHARS = 4_000  # beyond: its start (rendered once) ...
LIVE_TAIL_CHARS = 4_000  # ... and its newest characters (as text), until it ends


class LiveText:
    """A reply's text (or its thinking) as it streams, and its live view at a cost that does not
    grow with it: up to ``LIVE_CHARS`` the whole text (its Markdown rendered in pieces by
    :class:`StreamedMarkdown`); beyond, its start, a line saying how much is not shown yet, and
    its newest characters as plain text. The last view (``final``) is all of it, rendered whole:
    each update costs a bounded amount, the end one the reply's size (a reply of 4 MB without a
    newline rendered and sent whole at every update cost minutes of the kernel's time and GBs)."""

    def __init__(self) -> None:
        self._parts: list[str] = []  # joined only when needed: appending stays O(1)
        self.length = 0
        self._markdown = StreamedMarkdown()
        self._head: str | None = None
        self._head_html = ""

    def add(self, piece: str) -> None:
        self._parts.append(piece)
        self.length += len(piece)

    def value(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _tail(self, n: int) -> str:
        pieces, size = [], 0
        for piece in reversed(self._parts):
            pieces.append(piece)
            size += len(piece)
            if size >= n:
                break
        return "".join(reversed(pieces))[-n:]

    def view(self, final: bool = False) -> tuple[str, str]:
        """(text/plain, HTML) of the text as it stands."""
        if final or self.length <= LIVE_CHARS:
            text = self.value()
            return text, self._markdown.render(text, final=final) if text else ""
        if self._head is None:
            self._head = self.value()[:LIVE_HEAD_CHARS]
            self._head_html = markdown_html(self._head)
        tail = self._tail(LIVE_TAIL_CHARS)
        note = (f"… {self.length - len(self._head) - len(tail):,} characters not shown while the reply streams "
                "(all of it shows when it ends) …")
        html = (f"{self._head_html}<p style='color:#666;font-style:italic'>{escape_html(note)}</p>"
                f"<div style='white-space:pre-wrap'>{escape_html(tail)}</div>")
        return f"{self._head}\n{note}\n{tail}", html


class _Outputs:
    """The cell's outputs, every one scrubbed of the configured keys first (``agent/redaction.py``)."""

    def __init__(self, display_func: Callable[..., Any], redact: Callable[[str], str] | None) -> None:
        self.display = display_func
        self.redact = redact

    def show(self, data: Mapping[str, object], *, display_id: bool = False,
             metadata: Mapping[str, object] | None = None) -> Any:
        kwargs: dict[str, object] = {"raw": True}
        if metadata:
            kwargs["metadata"] = metadata
        if display_id:
            kwargs["display_id"] = True
        return self.display(self.scrubbed(data), **kwargs)

    def update(self, handle: Any, data: Mapping[str, object]) -> None:
        handle.update(self.scrubbed(data), raw=True)

    def scrubbed(self, data: Mapping[str, object]) -> Mapping[str, object]:
        redact = self.redact
        if redact is None:
            return data
        return {mime: redact(value) if isinstance(value, str) else value for mime, value in data.items()}


class _ReplyStream:
    """The reply as it streams in: its text and thinking in one output, updated at most every
    ``interval`` seconds (the newest blocks rendered again), rendered whole when it ends."""

    def __init__(self, outputs: _Outputs, interval: float, clock: Callable[[], float], widget: Any) -> None:
        self.outputs, self.interval, self.clock, self.widget = outputs, interval, clock, widget
        self.updates = 0  # display updates sent (for tests and benchmarks)
        self._last_update = 0.0
        self._start()

    def _start(self) -> None:
        self.text, self.thinking = LiveText(), LiveText()
        self._sent: dict[str, str] | None = None  # the last update sent
        self._partial = False  # it was rendered in pieces (the end renders it whole)
        self._handle: Any = None
        self._dirty = False

    def add(self, text: str = "", thinking: str = "") -> None:
        if text:
            self.text.add(text)
        if thinking:
            self.thinking.add(thinking)
        self._dirty = True
        self.flush()

    def flush(self, force: bool = False) -> None:
        """Send the reply as it stands (at most every ``interval``); ``force``: now, and rendered
        whole (the streamed updates render only the newest blocks again)."""
        if not self._dirty and not (force and self._partial):
            return
        now = self.clock()
        if not force and now - self._last_update < self.interval:
            return
        text, text_html = self.text.view(final=force)
        thinking, thinking_html = self.thinking.view(final=force)
        data = reply_bundle(text, thinking, text_html=text_html, thinking_html=thinking_html)
        if self._handle is not None and data == self._sent:  # e.g. the whole render is what was shown
            self._partial = self._partial and not force
            self._dirty = False
            return
        if self._handle is None:
            self._handle = self.outputs.show(data, display_id=True)
        else:
            self.outputs.update(self._handle, data)
        self._sent, self._partial = data, not force
        self.updates += 1
        self._last_update = now
        self._dirty = False
        if self.widget is not None:  # live, and cheap: no recount of the session
            self.widget.set_status(f"Receiving the reply… ≈{(self.text.length + self.thinking.length) // 4:,} tokens")

    def end(self) -> None:
        """Render the reply whole; what comes next starts a new output."""
        self.flush(force=True)
        self._start()


class RunRenderer:
    """Turns agent events into outputs of the current cell."""

    def __init__(self, *, widget: Any = None, facts: Callable[[str], Any] | None = None,
                 max_updates_per_second: float = 10.0, display_func: Callable[..., Any] = display,
                 clock: Callable[[], float] = time.monotonic, redact: Callable[[str], str] | None = None):
        self.widget = widget
        self._facts = facts  # status -> BudgetFacts
        self._display = display_func
        self._outputs = _Outputs(display_func, redact)
        interval = 1.0 / max_updates_per_second if max_updates_per_second > 0 else 0.0
        self.reply = _ReplyStream(self._outputs, interval, clock, widget)
        self._compaction_before: int | None = None
        self._tools: dict[str, tuple[Any, str, Mapping[str, object]]] = {}
        self._question: Any = None  # the output an approval question is shown in, until it is answered
        self._progress: ProgressLine | None = None  # a summary's progress line, while it is made
        self._summary_tokens = 0
        self.errors: list[str] = []

    @property
    def updates(self) -> int:
        """Display updates of the streamed replies sent (for tests and benchmarks)."""
        return self.reply.updates

    # ---- plumbing ----------------------------------------------------------------------------

    def show(self, data: Mapping[str, object], *, display_id: bool = False,
             metadata: Mapping[str, object] | None = None) -> Any:
        return self._outputs.show(data, display_id=display_id, metadata=metadata)

    def _refresh_widget(self, status: str = "") -> None:
        if self.widget is not None and self._facts is not None:
            try:
                self.widget.update(self._facts(status))
            except Exception:  # noqa: BLE001 - the widget must never break a run
                pass

    # ---- approval questions ------------------------------------------------------------------

    def show_question(self, question: str) -> None:
        """An approval question, shown whole as plain text, in the place of the block of the call
        it asks about (a call is announced before it is approved)."""
        bundle = {"text/plain": question}
        pending = next(reversed(self._tools), None)
        if pending is not None:
            self._tools[pending][0].update(bundle, raw=True)
            self._question = self._tools[pending][0]
        else:
            self._question = self.show(bundle, display_id=True)

    def record_decision(self, line: str, question: str) -> None:
        """Once answered: the question becomes its one-line record (the question collapsed under
        it), and the call's block starts again below what the frontend wrote for the answer (the
        prompt and the typed "y"), so the cell reads question, answer, result, in that order."""
        if self._question is None:
            return
        self._question.update(decision_bundle(line, question), raw=True)
        self._question = None
        pending = next(reversed(self._tools), None)
        if pending is not None:
            _, name, arguments = self._tools[pending]
            self._tools[pending] = (self.show(tool_bundle(name, arguments, None), display_id=True), name, arguments)

    # ---- events ------------------------------------------------------------------------------

    def __call__(self, event: Any) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _on_delta(self, event: pb.TextDelta | pb.ThinkingDelta) -> None:
        if self.widget is not None and self.widget.stop_ticker():  # the first word: the wait is over
            self._refresh_widget("Receiving the reply…")
        if isinstance(event, pb.TextDelta):
            self.reply.add(text=event.text)
        else:
            self.reply.add(thinking=event.text)

    def _on_tool_call_start(self, event: pb.ToolCallStart) -> None:
        if self.widget is not None:
            self.widget.stop_ticker()
        self.reply.end()

    def _on_retrying(self, event: pb.Retrying) -> None:
        self.reply.end()
        self.show(note_bundle(f"{event.reason} — retrying in {event.delay:.1f} s (attempt {event.attempt})."))

    def _on_request(self, event: ev.RequestStart) -> None:
        self._refresh_widget("Waiting for the model…")
        if self.widget is not None:  # a local server reads the whole request before its first word
            # (1,635 tokens of system prompt and tools took 82.9 s on two cores): say so, with the seconds
            self.widget.start_ticker(f"Waiting for the model: the server reads the request "
                                     f"({event.context_tokens:,} tokens) before its first word…")

    def _on_tool_start(self, event: ev.ToolExecutionStart) -> None:
        self.reply.end()
        handle = self.show(tool_bundle(event.name, event.arguments, None), display_id=True)
        self._tools[event.call_id] = (handle, event.name, event.arguments)
        self._refresh_widget(f"Running {event.name}…")

    def _on_tool_end(self, event: ev.ToolExecutionEnd) -> None:
        handle, name, arguments = self._tools.pop(event.call_id, (None, event.name, {}))
        data = tool_bundle(name, arguments, event.result)
        if handle is not None:
            self._outputs.update(handle, data)
        else:
            self.show(data)

    def _on_compaction_start(self, event: ev.CompactionStart) -> None:
        self.reply.end()
        label = {"threshold": "Compacting", "overflow": "Context overflow: compacting",
                 "manual": "Compacting"}.get(event.reason, "Compacting")
        if self.widget is not None:
            self.widget.start_ticker(f"{label} {event.tokens_before:,} tokens…")
        self._compaction_before = event.tokens_before  # counted as the widget counts: "before → after" compare
        self._close_progress(None)
        self._progress = ProgressLine(f"Summarising {event.tokens_before:,} tokens", display_func=self._display)
        self._summary_tokens = 0

    def _on_compaction_progress(self, event: ev.CompactionProgress) -> None:
        self._summary_tokens = event.tokens
        if self._progress is not None:
            limit = f" / {event.limit:,}" if event.limit else ""
            self._progress.update(f"{event.tokens:,}{limit} tokens of summary, {event.elapsed:.1f} s",
                                  event.tokens, event.limit)

    def _close_progress(self, final: str | None) -> None:
        if self._progress is not None:
            self._progress.close(final)
            self._progress = None

    def _on_compaction_end(self, event: ev.CompactionEnd) -> None:
        if self.widget is not None:
            self.widget.stop_ticker()
        received = f"{self._summary_tokens:,} tokens of summary" if self._summary_tokens else "summary"
        # nothing to compact: no summary was asked, so its line goes (the reason is said below)
        self._close_progress(None if event.skipped
                             else f"Summarised: {received} in {event.duration:.1f} s." if event.entry is not None
                             else f"Summary stopped after {event.duration:.1f} s.")
        if event.entry is not None and event.reason == "manual":
            self._refresh_widget("")  # %compact shows its own result
        elif event.entry is not None:
            after = self._facts("").total if self._facts is not None else None
            before = self._compaction_before or event.entry.get("tokensBefore", 0)
            text = (f"Compacted ({event.reason}): {before:,} tokens"
                    + (f" → {after:,}" if after is not None else "") + f" in {event.duration:.1f} s.")
            self.show(note_bundle(text))
            self._refresh_widget(text)
        elif event.error and event.reason != "manual":
            self.show(note_bundle(f"Automatic compaction skipped: {event.error}"))
            self._refresh_widget("")

    def _on_wait_start(self, event: ev.WaitStart) -> None:
        self.reply.end()
        self._close_progress(None)
        self._progress = ProgressLine(event.what, display_func=self._display)

    def _on_wait_end(self, event: ev.WaitEnd) -> None:
        self._close_progress(f"{event.what}: {event.result} ({event.duration:.1f} s).")

    def _on_entry(self, event: ev.EntryAppended) -> None:
        if event.entry.get("type") == "message" and event.entry["message"].get("role") == "assistant":
            self.reply.end()
            message = event.entry["message"]
            if message.get("stopReason") == "aborted":
                self.show(note_bundle("(response interrupted; what arrived was kept)"))
            self._refresh_widget("")

    def _on_notice(self, event: ev.Notice) -> None:
        self.reply.end()
        self.show(note_bundle(event.message))

    def _on_error(self, event: ev.AgentError) -> None:
        self.reply.end()
        self.errors.append(event.message)
        title = {"overflow": "Context overflow", "compaction": "Compaction stopped",
                 "interrupted": "Interrupted"}.get(event.kind, "Model error")
        self.show(error_bundle(event.message, title=title))

    def _on_stopped(self, event: ev.RunStopped) -> None:
        self.reply.end()
        self.show(note_bundle(event.message))  # a limit, not an error: one plain line

    def _on_end(self, event: ev.AgentEnd) -> None:
        if self.widget is not None:
            self.widget.stop_ticker()
        self.reply.end()
        unfinished: Message = {"content": [{"type": "text", "text": "(not finished)"}], "isError": True}
        for handle, name, arguments in self._tools.values():
            self._outputs.update(handle, tool_bundle(name, arguments, unfinished))
        self._tools.clear()
        self._refresh_widget("")

    def finish(self) -> None:
        """Flush whatever is pending (also after an interrupt)."""
        self.reply.end()
        self._close_progress("Summary interrupted.")
        if self.widget is not None:
            self.widget.stop_ticker()

    _HANDLERS: ClassVar[dict[type, Callable[[RunRenderer, Any], None]]] = {
        pb.TextDelta: _on_delta,
        pb.ThinkingDelta: _on_delta,
        pb.ToolCallStart: _on_tool_call_start,
        pb.Retrying: _on_retrying,
        ev.RequestStart: _on_request,
        ev.ToolExecutionStart: _on_tool_start,
        ev.ToolExecutionEnd: _on_tool_end,
        ev.CompactionStart: _on_compaction_start,
        ev.CompactionProgress: _on_compaction_progress,
        ev.WaitStart: _on_wait_start,
        ev.WaitEnd: _on_wait_end,
        ev.CompactionEnd: _on_compaction_end,
        ev.EntryAppended: _on_entry,
        ev.Notice: _on_notice,
        ev.AgentError: _on_error,
        ev.RunStopped: _on_stopped,
        ev.AgentEnd: _on_end,
    }
