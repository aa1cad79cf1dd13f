"""Pi v3 session entries (as Pi 1.6 writes them): their types, their required fields, and constructors
(their shapes, as TypedDicts, are in :mod:`ipyagent.shapes`).

Entries are Pi's JSON objects held as dicts, so fields ipyagent does not know (a newer Pi's, or
notebook facts such as a cell id) survive a round trip untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipyagent.shapes import ContextEditReplacement, Message, SummaryDetails, Usage
from ipyagent.shapes import Entry as Entry
from ipyagent.shapes import SessionHeader as SessionHeader

ENTRY_TYPES = (
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
    "usage",  # Pi 1.6: model usage that is no assistant message (cache warming…); counted in costs
    "context_edit",  # Pi 1.6: hides (replacement null) or replaces the content of an earlier entry
)

# type -> (field, accepted python types) that must be present for the entry to be usable
_REQUIRED: dict[str, tuple[tuple[str, tuple[type, ...]], ...]] = {
    "message": (("message", (dict,)),),
    "compaction": (("summary", (str,)), ("firstKeptEntryId", (str,)), ("tokensBefore", (int, float))),
    "branch_summary": (("summary", (str,)),),
    "custom_message": (("customType", (str,)),),
    "custom": (("customType", (str,)),),
    "label": (("targetId", (str,)),),
    "thinking_level_change": (("thinkingLevel", (str,)),),
    "context_edit": (("targetId", (str,)),),
}


def shape_problem(entry: Any) -> str | None:
    """Why an entry cannot be used as it is, or None when its shape is fine."""
    if not isinstance(entry, dict):
        return f"an entry must be a JSON object, not {type(entry).__name__}"
    kind = entry.get("type")
    if not isinstance(kind, str):
        return "the entry has no 'type'"
    if "parentId" in entry and entry["parentId"] is not None and not isinstance(entry["parentId"], str):
        return "'parentId' must be a string or null"
    if entry.get("timestamp") is not None and not _is_text_or_number(entry["timestamp"]):
        return "'timestamp' must be an ISO string or a number"
    for field, types in _REQUIRED.get(kind, ()):
        if not isinstance(entry.get(field), types) or isinstance(entry.get(field), bool):
            return f"a {kind} entry needs '{field}' ({' or '.join(t.__name__ for t in types)})"
    if kind == "message":
        role = entry["message"].get("role")
        if not isinstance(role, str):
            return "the message has no 'role'"
        content = entry["message"].get("content")
        if role in ("user", "assistant", "toolResult") and not isinstance(content, (str, list)):
            return f"a {role} message needs 'content' (a string or a list of blocks)"
        if role == "system" and content is not None and not isinstance(content, (str, list)):
            return "a system message's 'content' must be a string or a list of blocks"
        if role == "system" and message_sections_problem(entry["message"]):
            return message_sections_problem(entry["message"])
        # Pi reads an assistant message whose content is a string, a toolResult without
        # 'toolCallId' and a model_change without 'modelId', so they load here too.
        if role == "toolResult" and entry["message"].get("toolCallId") is not None \
                and not isinstance(entry["message"]["toolCallId"], str):
            return "a toolResult message's 'toolCallId' must be a string"
        return _message_fields_problem(entry["message"], content)
    if kind == "custom_message":
        content = entry.get("content")
        if content is not None and not isinstance(content, (str, list)):
            return "a custom_message's 'content' must be a string or a list of blocks"
        return _message_fields_problem({}, content)
    if kind == "context_edit":
        replacement = entry.get("replacement")
        if replacement is not None and not (isinstance(replacement, dict)
                                            and isinstance(replacement.get("content"), (str, list))):
            return "a context_edit's 'replacement' must be null or an object with 'content' (a string or blocks)"
        return _message_fields_problem({}, replacement.get("content") if replacement else None)
    if kind == "usage":
        return _message_fields_problem({"usage": entry.get("usage")}, None)
    if kind == "compaction":
        if entry.get("systemMessage") is not None and not (isinstance(entry["systemMessage"], dict)
                                                           and entry["systemMessage"].get("role") == "system"):
            return "a compaction's 'systemMessage' must be a system message"
        return _message_fields_problem({"usage": entry.get("usage")}, None)
    return None


def message_sections_problem(message: Mapping[str, Any]) -> str | None:
    sections = message.get("sections")
    if sections is not None and (not isinstance(sections, dict)
                                 or any(v is not None and not isinstance(v, str) for v in sections.values())):
        return "a system message's 'sections' must map names to text or null"
    for field in ("toolsAdded", "toolsRemoved"):
        tools = message.get(field)
        if tools is not None and (not isinstance(tools, list)
                                  or any(not isinstance(t, dict) or not isinstance(t.get("name"), str) for t in tools)):
            return f"a system message's '{field}' must be a list of tools with names"
    return None


def _is_text_or_number(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_BLOCK_TEXT_FIELDS = (("text", "text"), ("thinking", "thinking"), ("toolCall", "name"))
_USAGE_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def _message_fields_problem(message: Mapping[str, Any], content: Any) -> str | None:
    """Fields that token counting, context building and serialising read, when present with a
    wrong type (hostile or corrupted input must be set aside, not crash the session later)."""
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                return "every content block must be a JSON object"
            for kind, field in _BLOCK_TEXT_FIELDS:
                if block.get("type") == kind and field in block and not isinstance(block[field], str):
                    return f"a {kind} block's '{field}' must be a string"
    usage = message.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            return "'usage' must be an object"
        if any(usage.get(k) is not None and not _is_number(usage[k]) for k in _USAGE_FIELDS):
            return "'usage' token counts must be numbers"
        cost = usage.get("cost")
        if cost is not None and (not isinstance(cost, dict) or any(
                v is not None and not _is_number(v) for v in cost.values())):
            return "'usage.cost' must be an object of numbers"
    for field in ("command", "output", "summary"):
        if message.get(field) is not None and not isinstance(message[field], str):
            return f"the message's '{field}' must be a string"
    return None


# What differs between two writings of the same entry: its place in the tree, when it was written,
# and figures measured while writing it (replay reproduces the words, not the clock or the meter).
_PLACE_AND_TIME = ("id", "parentId", "timestamp")
_MEASURED: dict[str, tuple[str, ...]] = {"compaction": ("tokensBefore", "usage", "details", "systemMessage",
                                                        "trigger")}

# What made a compaction, in the entry's ``trigger`` field (an extra field Pi ignores): the idle
# kernel, the budget before or after a run, a context overflow, or the user's %compact.
TRIGGERS = ("idle", "foreground", "overflow", "manual")


def compaction_trigger(entry: Entry) -> str:
    """Which of :data:`TRIGGERS` made compaction ``entry`` (older entries: %compact's carry a cell id)."""
    trigger = entry.get("trigger")
    if isinstance(trigger, str) and trigger in TRIGGERS:
        return trigger
    return "manual" if entry.get("cellId") else "foreground"


def last_compaction_note(entries: list[Entry]) -> str:
    """"last compaction: idle, 2026-12-02 12:51:03 UTC" for the latest compaction of ``entries``
    ("" when there is none)."""
    for entry in reversed(entries):
        if entry.get("type") == "compaction":
            when = entry.get("timestamp")
            stamp = when.replace("T", " ")[:19] + " UTC" \
                if isinstance(when, str) and len(when) >= 19 else "time unknown"
            return f"last compaction: {compaction_trigger(entry)}, {stamp}"
    return ""
_MESSAGE_MEASURED = ("timestamp", "executionCount")


def same_content(a: Entry, b: Entry) -> bool:
    """Whether two entries say the same thing: equal apart from id, parent and timestamp, a
    compaction's measured figures (``tokensBefore``, ``usage``, file ``details``) and a message's
    ``timestamp`` and notebook ``executionCount``."""
    kind = a.get("type")
    if kind != b.get("type"):
        return False
    skip = _PLACE_AND_TIME + _MEASURED.get(kind or "", ())

    def content(entry: Entry) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in entry.items() if k not in skip}
        if isinstance(out.get("message"), dict):
            out["message"] = {k: v for k, v in out["message"].items() if k not in _MESSAGE_MEASURED}
        return out

    return content(a) == content(b)


def message_entry(message: Message, **extra: Any) -> Entry:
    entry: Entry = {"type": "message", "message": message}
    entry.update(extra)  # type: ignore[typeddict-item]  # notebook facts (cellId…) and Pi's own fields
    return entry


def compaction_entry(summary: str, first_kept_entry_id: str, tokens_before: int,
                     details: SummaryDetails | None = None, from_hook: bool = False, *,
                     usage: Usage | None = None, system_message: Message | None = None,
                     **extra: Any) -> Entry:
    """Pi 1.6's key order: summary, firstKeptEntryId, tokensBefore, details, usage, fromHook,
    systemMessage (the checkpoint of the prompt the model had), then ipyagent's extra fields."""
    entry: Entry = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept_entry_id,
                    "tokensBefore": tokens_before}
    if details is not None:
        entry["details"] = details
    if usage is not None:
        entry["usage"] = usage
    if from_hook:
        entry["fromHook"] = True
    if system_message is not None:
        entry["systemMessage"] = system_message
    entry.update(extra)  # type: ignore[typeddict-item]  # ipyagent's extra fields (trigger, cellId…)
    return entry


def context_edit_entry(target_id: str, replacement: ContextEditReplacement | None) -> Entry:
    """Pi 1.6's ``context_edit``: ``None`` hides the target from the model; ``{"content": …}``
    replaces its content (the entry itself stays as written)."""
    return {"type": "context_edit", "targetId": target_id, "replacement": replacement}


def branch_summary_entry(from_id: str, summary: str, details: SummaryDetails | None = None,
                         from_hook: bool = False) -> Entry:
    entry: Entry = {"type": "branch_summary", "fromId": from_id, "summary": summary}
    if details is not None:
        entry["details"] = details
    if from_hook:
        entry["fromHook"] = True
    return entry


def model_change_entry(provider: str, model_id: str) -> Entry:
    return {"type": "model_change", "provider": provider, "modelId": model_id}


def label_entry(target_id: str, label: str | None) -> Entry:
    entry: Entry = {"type": "label", "targetId": target_id}
    if label:
        entry["label"] = label
    return entry


def is_message_entry(entry: Entry, role: str | None = None) -> bool:
    if entry.get("type") != "message":
        return False
    return role is None or entry["message"].get("role") == role
