"""``recall(query | entry_id)``: the exact text of work that a compaction summarised away.

The notebook keeps every entry a compaction replaced by its summary. ``recall`` searches the
entries of the current path that are no longer in the model's context (everything before the
latest compaction's first kept entry) and never returns one that is still in it:

* ``query`` — words (every word must appear, in any order, case-insensitive) or a regular
  expression, searched in bounded time (a pattern that backtracks falls back to its words, and the
  result says so): up to :data:`MAX_EXCERPTS` excerpts, each with its entry id, role, notebook cell and
  a few hundred characters around the hit;
* ``entry_id`` — one entry in full (an assistant entry with the results of its tool calls;
  ``offset`` continues a long one), within Pi's output limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from ipyagent.patterns import BoundedPattern, PatternInvalid, PatternTooCostly, compile_bounded, pattern_words
from ipyagent.session.messages import call_arguments, text_of
from ipyagent.shapes import Entry, JsonSchema

MAX_EXCERPTS = 5
EXCERPT_CHARS = 360  # around each hit
MAX_QUERY_CHARS = 300
REGEX_LINE_CHARS = 2000
_REGEX_CHARS = set(".^$*+?{}[]\\|()")


@dataclass
class _Document:
    entry: Entry
    label: str  # "entry 1a2b3c4d · toolResult python · cell 5"
    text: str


class RecallTool(Tool):
    name = "recall"
    description = (
        "Recall exact details from before the summary that starts this conversation: every earlier "
        "message, tool call and result is kept word for word. Use it instead of guessing a value, "
        "name, command, code or error from then. `query`: words (all must appear) or a regex; gives "
        f"up to {MAX_EXCERPTS} excerpts with entry id, role and cell. `entry_id` (e.g. from the "
        "summary's [entry …] marks): that entry in full, a tool call with its result. Searches only what "
        "is no longer in your context."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words or a regex"},
            "entry_id": {"type": "string"},
            "offset": {"type": "integer", "description": "with entry_id: first line (1-indexed)"},
        },
    }
    read_only = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        query = arguments.get("query")
        entry_id = arguments.get("entry_id")
        if not (isinstance(query, str) and query.strip()) and not (isinstance(entry_id, str) and entry_id.strip()):
            return ToolOutput("Give `query` (words or a regular expression) or `entry_id`.", is_error=True)
        if context.history is None:
            return ToolOutput("recall has no session to search here.", is_error=True)
        hidden = context.history.summarized_entries()
        if isinstance(entry_id, str) and entry_id.strip():
            return _full_entry(context, hidden, entry_id.strip(), arguments.get("offset"))
        assert isinstance(query, str)
        query = query.strip()
        if not hidden:
            return ToolOutput("Nothing has been summarised away yet: the whole conversation is in your context.")
        by_id = {e.get("id"): e for e in hidden}
        if query in by_id:  # an entry id given as the query
            return _full_entry(context, hidden, query, arguments.get("offset"))
        return _search(query, _documents(hidden))


# ---- one entry ---------------------------------------------------------------------------------


def _full_entry(context: ToolContext, hidden: list[Entry], entry_id: str, offset: Any) -> ToolOutput:
    cells = _cells(hidden)
    entry = next((e for e in hidden if e.get("id") == entry_id), None)
    document = _document(entry, cells.get(entry_id)) if entry is not None else None
    if document is None:
        assert context.history is not None
        if entry is not None:
            return ToolOutput(f"Entry {entry_id} holds no text to show.")
        if context.history.get(entry_id) is not None:
            return ToolOutput(f"Entry {entry_id} is not summarised away: it is in your context already, or on "
                              "another branch of the session. recall only returns what the summary replaced.",
                              is_error=True)
        return ToolOutput(f"No entry {entry_id!r} in this session.", is_error=True)
    results = _call_results(document, hidden, cells)
    returned = {"entryId": entry_id, "entryIds": [entry_id, *(r.entry.get("id") for r in results)]}
    lines = (document.text + "".join(f"\n\n[{r.label}]\n{r.text}" for r in results)).split("\n")
    start = 1 if not isinstance(offset, int) or offset < 1 else offset
    if start > len(lines):
        return ToolOutput(f"offset {start} is beyond the end of entry {entry_id} ({len(lines)} lines).", is_error=True)
    header = f"[{document.label}]"
    t = truncate_head("\n".join(lines[start - 1:]), DEFAULT_MAX_LINES - 2, DEFAULT_MAX_BYTES - 200)
    body = t.content
    if t.first_line_exceeds_limit:
        body = lines[start - 1].encode("utf-8")[:DEFAULT_MAX_BYTES - 400].decode("utf-8", "ignore")
        return ToolOutput(f"{header}\n{body}\n\n[Line {start} is longer than {format_size(DEFAULT_MAX_BYTES)}; "
                          "showing its start. Search with a query to reach a later part.]",
                          details=returned)
    if t.truncated:
        last = start - 1 + t.output_lines
        return ToolOutput(f"{header}\n{body}\n\n[Showing lines {start}-{last} of {len(lines)}. "
                          f"Use offset={last + 1} to continue.]", details=returned)
    return ToolOutput(f"{header}\n{body}", details=returned)


def _call_results(document: _Document, hidden: list[Entry],
                  cells: dict[str, int | None]) -> list[_Document]:
    """For an assistant entry with tool calls: the results of those calls (summarised away too),
    so the code that made a variable comes back with its output."""
    message = document.entry.get("message") if document.entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return []
    ids = {b.get("id") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"}
    found = []
    for entry in hidden:
        result = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(result, dict) and result.get("role") == "toolResult" and result.get("toolCallId") in ids:
            other = _document(entry, cells.get(str(entry.get("id"))))
            if other is not None:
                found.append(other)
    return found


# ---- searching ---------------------------------------------------------------------------------


def _search(query: str, documents: list[_Document]) -> ToolOutput:
    if len(query) > MAX_QUERY_CHARS:
        return ToolOutput(f"The query is too long ({len(query)} characters; at most {MAX_QUERY_CHARS}).",
                          is_error=True)
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)))
    try:
        return _ranked(query, documents, _pattern(query), words, "")
    except PatternTooCostly as e:  # a pattern that backtracks: its words, and a note saying so
        words = pattern_words(query)
        return _ranked(query, documents, None, words, e.note(words) + "\n\n", literal=False)


def _ranked(query: str, documents: list[_Document], pattern: BoundedPattern | None, words: list[str],
            note: str, *, literal: bool = True) -> ToolOutput:
    """Entries matching the pattern (or, without one, the query as a phrase) first, then those
    holding every word, then those holding most of them; newest first within each rank."""
    phrase = query.lower() if pattern is None and literal else None
    finders = {w: re.compile(rf"(?<!\w){re.escape(w)}(?!\w)") for w in words}  # whole words: "0" is not in "20"
    hits: list[tuple[int, int, _Document, int, int]] = []  # (rank, newest first, document, start, end)
    partial: list[tuple[int, int, _Document, int, int]] = []
    for order, document in enumerate(documents):
        lowered = document.text.lower()
        span = None
        if phrase is not None:
            at = lowered.find(phrase)
            span = (at, at + len(phrase)) if at >= 0 and phrase else None
        elif pattern is not None:
            span = _first_match(pattern, document.text)
        if span is not None:
            hits.append((0, -order, document, *span))
            continue
        found = {w: [m.start() for m in finders[w].finditer(lowered)] for w in words}
        present = [w for w in words if found[w]]
        if words and len(present) == len(words):
            start, end = _closest_window(found)
            hits.append((1, -order, document, start, end))
        elif present and len(present) * 2 >= len(words):
            w = present[0]
            partial.append((2 + len(words) - len(present), -order, document, found[w][0], found[w][0] + len(w)))
    if not hits:
        if not partial:
            return ToolOutput(f"{note}No summarised entry matches {query!r}. Try other words, a shorter query or a "
                              "regular expression.")
        hits, note = partial, note + "No entry holds every word; entries with most of them:\n\n"
    hits.sort(key=lambda h: (h[0], h[1]))
    shown = hits[:MAX_EXCERPTS]
    parts = [f"[{document.label}]\n{_excerpt(document.text, start, end)}" for _, _, document, start, end in shown]
    more = len(hits) - len(shown)
    tail = f"\n\n({more} more matching entries; narrow the query, or recall an entry_id in full.)" if more else ""
    return ToolOutput(note + "\n\n".join(parts) + tail,
                      details={"entryIds": [h[2].entry.get("id") for h in shown], "matches": len(hits)})


def _pattern(query: str) -> BoundedPattern | None:
    """The query as a case-insensitive regular expression when it reads as one; None for a
    phrase (no pattern characters, or not a valid pattern)."""
    if not set(query) & _REGEX_CHARS:
        return None
    try:
        return compile_bounded(query, ignore_case=True)
    except PatternInvalid:
        return None


def _first_match(pattern: BoundedPattern, text: str) -> tuple[int, int] | None:
    """The first non-empty match, line by line (as grep does; a line is searched up to
    ``REGEX_LINE_CHARS``), each search bounded in time (:mod:`ipyagent.patterns`)."""
    offset = 0
    for line in text.split("\n"):
        match = pattern.search(line[:REGEX_LINE_CHARS])
        if match is not None and match.end() > match.start():
            return offset + match.start(), offset + match.end()
        offset += len(line) + 1
    return None


def _closest_window(found: dict[str, list[int]]) -> tuple[int, int]:
    """The span from the first occurrence of the rarest word, stretched over the others nearby."""
    rarest = min(found, key=lambda w: (len(found[w]), -len(w)))
    at = found[rarest][0]
    start, end = at, at + len(rarest)
    for w, positions in found.items():
        near = [p for p in positions if abs(p - at) < EXCERPT_CHARS // 2]
        if near:
            start, end = min(start, near[0]), max(end, near[0] + len(w))
    return start, end


def _excerpt(text: str, start: int, end: int) -> str:
    room = max(0, EXCERPT_CHARS - (end - start))
    left = max(0, start - room // 3)
    right = min(len(text), end + room - (start - left))
    left = max(0, min(left, right - EXCERPT_CHARS))
    snippet = text[left:right]
    return ("…" if left > 0 else "") + snippet + ("…" if right < len(text) else "")


# ---- entries as text ---------------------------------------------------------------------------


def _cells(entries: list[Entry]) -> dict[str, int | None]:
    """Entry id -> the execution count of the notebook cell whose prompt the entry answers."""
    cells: dict[str, int | None] = {}
    cell: int | None = None
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "user":
            count = message.get("executionCount")
            cell = count if isinstance(count, int) and not isinstance(count, bool) else None
        cells[str(entry.get("id"))] = cell
    return cells


def _document(entry: Entry, cell: int | None) -> _Document | None:
    text, role = _entry_text(entry)
    if not text:
        return None
    where = f" · cell {cell}" if cell is not None else ""
    return _Document(entry, f"entry {entry.get('id')} · {role}{where}", text)


def _documents(entries: list[Entry]) -> list[_Document]:
    cells = _cells(entries)
    return [d for d in (_document(e, cells.get(str(e.get("id")))) for e in entries) if d is not None]


def _entry_text(entry: Entry) -> tuple[str, str]:
    kind = entry.get("type")
    if kind == "branch_summary":
        return str(entry.get("summary") or ""), "branch summary"
    if kind == "custom_message":
        return text_of(entry.get("content"), "\n"), f"note {entry.get('customType', '')}".strip()
    message = entry.get("message") if kind == "message" else None
    if not isinstance(message, dict):
        return "", str(kind)
    role = str(message.get("role", "?"))
    content = message.get("content")
    if role == "assistant" and isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                parts.append(block["text"])
            elif block.get("type") == "toolCall":
                parts.append(_call_text(block))
        return "\n".join(parts), role
    if role == "toolResult":
        label = f"toolResult {message.get('toolName', '')}".strip() + (" (error)" if message.get("isError") else "")
        return text_of(content, "\n"), label
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output') or ''}".strip(), "shell"
    text = text_of(content, "\n")
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "image" for b in content):
        text += "\n[image]"
    return text, role


def _call_text(call: Mapping[str, Any]) -> str:
    arguments = call_arguments(call)
    if len(arguments) == 1 and isinstance(next(iter(arguments.values())), str):
        (key, value), = arguments.items()
        return f"[calls {call.get('name')} with {key}:]\n{value}"
    return f"[calls {call.get('name')}] {json.dumps(arguments, ensure_ascii=False)}"
