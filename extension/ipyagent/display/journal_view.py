"""The journal output's readable views, and a whole session as a Markdown transcript.

:func:`journal_bundle` is the ``display_data`` a run ends with when no bridge stored its entries:
the payload (``store/journal.py``) plus a Markdown table and a plain line for people.
:func:`transcript_markdown` is ``ipyagent export --format markdown`` and ``%agent export``.

Both Markdown views hold text from a model, a tool or metadata: it goes in through
:mod:`ipyagent.display.untrusted` only (``escape_markdown`` for words in a line, ``code_span`` for
names and ids, ``safe_markdown`` for prose); the few HTML tags the transcript writes itself hold
only its own words or ``escape_markdown`` text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ipyagent.agent.run_config import SavedSettings
from ipyagent.display.untrusted import code_span, escape_markdown, safe_markdown
from ipyagent.session.messages import CELL_PROMPT_FIELD
from ipyagent.shapes import Entry, SessionHeader
from ipyagent.store.journal import JOURNAL_MIME, journal_payload
from ipyagent.text import clip

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = ["journal_bundle", "entry_line", "transcript_markdown"]

MAX_ROWS = 20

JournalOutput = tuple[Mapping[str, object], Mapping[str, object]]
"""``(data, metadata)`` of a journal output: a MIME bundle (the payload under :data:`JOURNAL_MIME`,
Markdown, plain text) and its metadata (``{"ipyagent": {"entry_ids": [...], "final": true}}``)."""
MAX_TEXT = 80


def journal_bundle(session_name: str, header: SessionHeader | None, leaf: str | None,
                   settings: SavedSettings | None, entries: list[Entry]
                   ) -> JournalOutput:
    """``(data, metadata)`` for ``display(data, metadata=metadata, raw=True)``.

    ``data`` holds the entries under :data:`JOURNAL_MIME` plus a Markdown table and a plain-text
    line for people; ``metadata`` is ``{"ipyagent": {"entry_ids": [...], "final": true}}``.
    Settings that look like credentials are left out.
    """
    entries = list(entries)
    payload = journal_payload(session_name, header, leaf, settings, entries)
    ids = [e.get("id") for e in entries]
    data = {
        JOURNAL_MIME: payload,
        "text/markdown": _markdown(session_name, entries),
        "text/plain": _plain(session_name, entries),
    }
    return data, {"ipyagent": {"entry_ids": ids, "final": True}}


def _first_line(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and _first_line(block.get("text")):
                return str(block["text"])
        if any(isinstance(b, dict) and b.get("type") == "image" for b in content):
            return "[image]"
    return ""


def entry_line(entry: Any) -> tuple[str, str]:
    """``(kind, first line of text)`` describing one entry in a word and a line."""
    if not isinstance(entry, dict):
        return "?", ""
    kind = entry.get("type", "?")
    if kind == "message" and isinstance(entry.get("message"), dict):
        message = entry["message"]
        role = message.get("role", "?")
        content = message.get("content")
        if role == "assistant":
            calls = [b.get("name", "?") for b in content or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
            text = _blocks_text(content)
            label = "assistant" + (" → " + ", ".join(map(str, calls)) if calls else "")
            if not _first_line(text) and message.get("errorMessage"):
                text = f"error: {message['errorMessage']}"
            return label, _first_line(text)
        if role == "toolResult":
            label = f"tool result ({message.get('toolName', '?')})" + (" error" if message.get("isError") else "")
            return label, _first_line(_blocks_text(content))
        if role == "bashExecution":
            return "bash", _first_line(message.get("command"))
        if role == "user" and isinstance(message.get(CELL_PROMPT_FIELD), str):  # not the activity block
            return "user", _first_line(message[CELL_PROMPT_FIELD])
        return str(role), _first_line(_blocks_text(content))
    if kind == "compaction":
        return "compaction", f"{entry.get('tokensBefore', '?')} tokens summarised: " + _first_line(entry.get("summary"))
    if kind == "branch_summary":
        return "branch summary", _first_line(entry.get("summary"))
    if kind == "custom_message":
        return f"custom message ({entry.get('customType', '?')})", _first_line(_blocks_text(entry.get("content")))
    if kind == "model_change":
        return "model", f"{entry.get('provider', '?')}:{entry.get('modelId', '?')}"
    if kind == "thinking_level_change":
        return "thinking level", str(entry.get("thinkingLevel", ""))
    if kind == "label":
        return "label", f"{entry.get('targetId', '?')}: {entry.get('label') or '(cleared)'}"
    if kind == "session_info":
        return "session info", str(entry.get("name", ""))
    if kind == "custom":
        data = entry.get("data")
        found = data.get("text") if isinstance(data, dict) else None
        text = found if isinstance(found, str) else ""
        return f"custom ({entry.get('customType', '?')})", _first_line(text)
    return str(kind), ""


def _cell(text: str) -> str:
    text = text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"
    return escape_markdown(text)


def _markdown(session_name: str, entries: list[Entry]) -> str:
    count = len(entries)
    lines = [(f"**ipyagent journal** · session {code_span(session_name)} · {count} new "
              f"entr{'y' if count == 1 else 'ies'} (kept in this output until `ipyagent lift` or the notebook "
              "extension moves them into the notebook's metadata)"), "", "| entry | text |", "|---|---|"]
    for entry in entries[:MAX_ROWS]:
        kind, text = entry_line(entry)
        lines.append(f"| {_cell(kind)} | {_cell(text)} |")
    if count > MAX_ROWS:
        lines.append(f"| … | {count - MAX_ROWS} more |")
    return "\n".join(lines) + "\n"


def _plain(session_name: str, entries: list[Entry]) -> str:
    count = len(entries)
    return (f"ipyagent journal: {count} new entr{'y' if count == 1 else 'ies'} of session {session_name!r} "
            "(ipyagent lift NOTEBOOK moves them into the notebook metadata)")


# ---------------------------------------------------------------------------------------------
# a whole session as a Markdown transcript (``ipyagent export --format markdown``)

MAX_RESULT_CHARS = 2000


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    head, tail, hidden = clip(text, limit)
    return f"{head}\n… [{hidden:,} characters not shown] …\n{tail}" if hidden else text


def _content_text(content: Any) -> str:
    """A message's text blocks as raw text (images as ``[image: type]``)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            parts.append(f"[image: {block.get('mimeType', 'image')}]")
    return "\n\n".join(p for p in parts if p)


def _prose(text: Any) -> str:
    return safe_markdown(str(text))


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def transcript_markdown(session: Session, name: str = "default", settings: SavedSettings | None = None) -> str:
    """The conversation on the session's current path (root → leaf), readable: prompts, answers,
    tool calls and results (long results cut), compactions with their summaries and what they
    replaced, branch summaries. Entries on other branches are counted, not shown.

    Prose (prompts, answers, summaries) is :func:`safe_markdown`; tool arguments and results are
    fenced code; names, ids and paths are code spans; the only HTML is this function's own
    ``<details>``/``<sub>`` tags around its own words or escaped text."""
    header = session.header or {}
    path = session.path()
    on_path = {e["id"] for e in path}
    off_path = len(session.entries) - len(path)
    lines = [f"# ipyagent session {code_span(name)}", ""]
    facts = [f"session {code_span(header.get('id', '?'))}", f"started {escape_markdown(header.get('timestamp', '?'))}"]
    if header.get("cwd"):
        facts.append(f"cwd {code_span(header['cwd'])}")
    if settings and settings.get("model"):
        facts.append(f"model {code_span(settings['model'])}")
    facts.append(f"{len(session.entries)} entries, {len(path)} on the current path")
    if off_path:
        facts.append(f"{off_path} on other branches (not shown)")
    lines += [" · ".join(facts), ""]
    compactions = [e for e in path if e.get("type") == "compaction"]
    if compactions:
        last = compactions[-1]
        lines += [(f"The session was compacted {len(compactions)} time(s). The model now sees the latest "
                   f"summary followed by the entries from {code_span(last.get('firstKeptEntryId'))} on "
                   "(marked **kept** below)."), ""]
    kept_from = compactions[-1].get("firstKeptEntryId") if compactions else None
    kept = False
    for entry in path:
        if kept_from is not None and entry["id"] == kept_from:
            kept = True
        lines += _entry_markdown(entry, kept and kept_from in on_path)
    return "\n".join(lines).rstrip() + "\n"


def _entry_markdown(entry: Entry, kept: bool) -> list[str]:
    kind = entry.get("type")
    tag = " · **kept**" if kept else ""
    stamp = f"<sub>{escape_markdown(entry.get('id'))} · {escape_markdown(entry.get('timestamp', ''))}{tag}</sub>"
    if kind == "message":
        message = entry.get("message") or {}
        role = message.get("role")
        if role == "user":
            return ["## User", stamp, "", _prose(_content_text(message.get("content"))), ""]
        if role == "assistant":
            out = ["## Assistant", stamp, ""]
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text"):
                    out += [_prose(block["text"]), ""]
                elif block.get("type") == "thinking" and block.get("thinking"):
                    out += ["<details><summary>thinking</summary>", "", _quote(_prose(block["thinking"])), "",
                            "</details>", ""]
                elif block.get("type") == "toolCall":
                    args = json.dumps(block.get("arguments", {}), ensure_ascii=False, indent=1)
                    out += [f"**tool call** {code_span(block.get('name', '?'))}", "", _fence(_clip(args), "json"), ""]
            if message.get("stopReason") in ("error", "aborted"):
                error = f": {message['errorMessage']}" if message.get("errorMessage") else ""
                out += [f"*{escape_markdown(message['stopReason'] + error)}*", ""]
            return out
        if role == "toolResult":
            text = _content_text(message.get("content"))
            state = " (error)" if message.get("isError") else ""
            return [f"<details><summary>tool result{state} · {len(text):,} characters</summary>", "",
                    f"result of {code_span(message.get('toolName', '?'))}", "", stamp, "",
                    _fence(_clip(text)), "", "</details>", ""]
        if role == "bashExecution":
            return [f"## Shell {code_span('!' + str(message.get('command', '')))}", stamp, "",
                    _fence(_clip(str(message.get("output", "")))), ""]
        return [f"## {escape_markdown(role)}", stamp, "", _prose(_content_text(message.get("content"))), ""]
    if kind == "compaction":
        return ["---", "", f"### Compaction · {entry.get('tokensBefore', '?'):,} tokens summarised"
                if isinstance(entry.get("tokensBefore"), (int, float)) else "### Compaction", stamp, "",
                f"Everything above {code_span(entry.get('firstKeptEntryId'))} is replaced, for the model, by this "
                "summary" + (" (written by a hook)" if entry.get("fromHook") else "") + ":", "",
                _quote(_prose(entry.get("summary", ""))), "", "---", ""]
    if kind == "branch_summary":
        return [f"### Branch summary (from {code_span(entry.get('fromId'))})", stamp, "",
                _quote(_prose(entry.get("summary", ""))), ""]
    if kind == "custom_message":
        if entry.get("display") is False:
            return [f"*(hidden message to the model: {escape_markdown(entry.get('customType'))})*", ""]
        return [f"### {escape_markdown(entry.get('customType'))}", stamp, "",
                _prose(_content_text(entry.get("content"))), ""]
    kind_text, text = entry_line(entry)
    return [f"*{escape_markdown(kind_text)}: {escape_markdown(text)}*" if text else f"*{escape_markdown(kind_text)}*",
            ""]
