"""Pi's message shapes, and ``convert_to_llm``: what the model actually receives.

Messages are plain dicts exactly as Pi writes them, so a Pi session round-trips without loss:
``user``, ``assistant``, ``toolResult`` and Pi 1.6's ``system`` pass to the model unchanged; the extra roles
(``bashExecution``, ``custom``, ``branchSummary``, ``compactionSummary``) become user messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ipyagent.session.ids import iso_to_ms, now_ms
from ipyagent.shapes import ContentBlock as ContentBlock
from ipyagent.shapes import Entry, ToolDeclaration
from ipyagent.shapes import Message as Message
from ipyagent.shapes import Usage as Usage

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"

# Roles of the messages a compaction may cut at (never a tool result or a system message), and of
# those that start a turn (Pi 1.6's isCutPointMessage / isTurnStartMessage)
CUT_ROLES = ("user", "assistant", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary")
TURN_START_ROLES = ("user", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary")

# The result a tool call gets when it was never run because the run was interrupted (an error
# result, so the session stays one a provider accepts: every call has its result).
NOT_RUN_INTERRUPTED = "Not run: the user interrupted the run."


def user_message(text: str | list[ContentBlock], *, timestamp: int | None = None, **extra: Any) -> Message:
    message: Message = {"role": "user", "content": text, "timestamp": timestamp or now_ms()}
    message.update(extra)  # type: ignore[typeddict-item]  # ipyagent's own fields (cellPrompt…)
    return message


def text_block(text: str) -> ContentBlock:
    return {"type": "text", "text": text}


def tool_call_block(call_id: str, name: str, arguments: dict[str, Any]) -> ContentBlock:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def tool_result_message(call_id: str, tool_name: str, text: str, *, is_error: bool = False,
                        details: dict[str, Any] | None = None, timestamp: int | None = None,
                        images: list[ContentBlock] | None = None) -> Message:
    """A Pi ``toolResult``: the text block, then any image blocks (``{"type": "image", "data":
    base64, "mimeType": …}``)."""
    message: Message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool_name,
        "content": [text_block(text), *(images or [])],
        "isError": is_error,
        "timestamp": timestamp or now_ms(),
    }
    if details:
        message["details"] = details
    return message


def text_of(content: Any, sep: str = "") -> str:
    """The text blocks of a content value (a string, or a list of blocks) joined with ``sep``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return sep.join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


# A user message whose content is more than what the user typed (the notebook-activity block, or
# interpolated values) keeps the typed prompt here; Pi ignores the field.
CELL_PROMPT_FIELD = "cellPrompt"


def prompt_text(message: Message) -> str:
    """The prompt as the user typed it (without the activity block or interpolated values)."""
    typed = message.get(CELL_PROMPT_FIELD)
    if isinstance(typed, str):
        return typed
    return text_of(message.get("content"), "\n")


def tool_calls_of(message: Message) -> list[ContentBlock]:
    if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
        return []
    blocks: list[ContentBlock] = message["content"]
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]


def unanswered_tool_calls(path: Sequence[Entry]) -> list[ContentBlock]:
    """The tool calls of the last assistant message on ``path`` that have no result after it
    (what an interrupt leaves; each gets :data:`NOT_RUN_INTERRUPTED`)."""
    for index in range(len(path) - 1, -1, -1):
        entry = path[index]
        if entry.get("type") == "message" and entry["message"].get("role") == "assistant":
            break
    else:
        return []
    answered = {e["message"].get("toolCallId") for e in path[index + 1:]
                if e.get("type") == "message" and e["message"].get("role") == "toolResult"}
    return [c for c in tool_calls_of(entry["message"]) if c.get("id") not in answered]


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments; ``{}`` when they are missing or not an object."""
    arguments = call.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def entry_to_message(entry: Entry) -> Message | None:
    """The conversation message an entry produces (before ``convert_to_llm``), or None; a
    compaction gives its summary (see :func:`entry_messages` for its checkpoint too)."""
    kind = entry.get("type")
    if kind == "message":
        message: Message = entry["message"]  # every message entry has one (entries.shape_problem)
        role = message.get("role")
        content = message.get("content")
        if role == "assistant" and isinstance(content, str):
            # Pi loads such a message (an older or hand-written file); the model gets it as one
            # text block, and the entry itself stays as it was written.
            return {**message, "content": [text_block(content)] if content else []}
        if content is None and role in ("user", "assistant", "toolResult", "system"):
            return {**message, "content": "" if role == "system" else []}  # Pi 1.6 normalises null content
        return message
    if kind == "custom_message":
        message = {
            "role": "custom",
            "customType": entry.get("customType", ""),
            "content": entry["content"] if entry.get("content") is not None else [],
            "display": entry.get("display", True),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
        if entry.get("details") is not None:
            message["details"] = entry["details"]
        return message
    if kind == "branch_summary":
        if not entry.get("summary"):
            return None
        return {
            "role": "branchSummary",
            "summary": entry["summary"],
            "fromId": entry.get("fromId"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    if kind == "compaction":
        return compaction_summary_message(entry)
    return None


def entry_messages(entry: Entry) -> list[Message]:
    """Pi 1.6's ``sessionEntryToContextMessages``: every message an entry contributes (a
    compaction: its ``systemMessage`` checkpoint, when it has one, then its summary)."""
    if entry.get("type") == "compaction":
        summary = compaction_summary_message(entry)
        checkpoint = entry.get("systemMessage")
        return [checkpoint, summary] if isinstance(checkpoint, dict) else [summary]
    message = entry_to_message(entry)
    return [] if message is None else [message]


def system_message(content: str = "", *, sections: dict[str, str | None] | None = None,
                   tools_added: list[ToolDeclaration] | None = None,
                   tools_removed: list[str] | None = None, timestamp: int | None = None) -> Message:
    """A Pi 1.6 ``SystemMessage``: prompt text, sections patched by name (``None`` removes one),
    tool declarations added or removed. Empty parts are left out, as Pi writes them."""
    message: Message = {"role": "system", "content": content}
    if sections:
        message["sections"] = sections
    if tools_added:
        message["toolsAdded"] = tools_added
    if tools_removed:
        message["toolsRemoved"] = [{"name": name} for name in tools_removed]
    message["timestamp"] = now_ms() if timestamp is None else timestamp
    return message


def current_tools(messages: Iterable[Message]) -> list[ToolDeclaration]:
    """The tool declarations after every system message's additions and removals, in order."""
    tools: dict[str, ToolDeclaration] = {}
    for message in messages:
        if message.get("role") != "system":
            continue
        for tool in message.get("toolsRemoved") or []:
            if isinstance(tool, dict):
                tools.pop(tool.get("name"), None)  # type: ignore[arg-type]
        for tool in message.get("toolsAdded") or []:
            if isinstance(tool, dict):
                tools[tool.get("name")] = tool  # type: ignore[index]
    return list(tools.values())


def current_system_message(messages: Iterable[Message]) -> Message | None:
    """Pi's ``getCurrentSystemMessage``: every system message replayed into one — contents joined
    with a blank line, sections patched by name, tools resolved, the first one's timestamp."""
    systems = [m for m in messages if m.get("role") == "system"]
    content: list[str] = []
    sections: dict[str, str | None] = {}
    timestamp = None
    for message in systems:
        if timestamp is None:
            timestamp = message.get("timestamp")
        text = text_of(message.get("content"), "\n")
        if text:
            content.append(text)
        patch = message.get("sections")
        for name, value in (patch.items() if isinstance(patch, dict) else ()):
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = current_tools(systems)
    if timestamp is None and not tools:
        return None
    out: Message = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = tools
    out["timestamp"] = timestamp if timestamp is not None else 0
    return out


def system_prompt_text(message: Message | None) -> str:
    """Pi's ``getSystemMessageText``: the content, then every section, joined by blank lines."""
    if message is None:
        return ""
    parts = [text_of(message.get("content"), "\n")]
    sections = message.get("sections")
    parts += [v for v in (sections.values() if isinstance(sections, dict) else ()) if isinstance(v, str)]
    return "\n\n".join(p for p in parts if p)


def compaction_summary_message(entry: Entry) -> Message:
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary", ""),
        "tokensBefore": entry.get("tokensBefore", 0),
        "timestamp": iso_to_ms(entry.get("timestamp")),
    }


def _bash_execution_text(message: Message) -> str:
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output") or ""
    text += f"```\n{output}\n```" if output else "(no output)"
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif message.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {message['exitCode']}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def to_llm_message(message: Message) -> Message | None:
    """One message as the model gets it; None when it is excluded from the context."""
    role = message.get("role")
    if role in ("user", "assistant", "toolResult", "system"):
        return message
    timestamp = message.get("timestamp", 0)
    if role == "bashExecution":
        if message.get("excludeFromContext"):
            return None
        return {"role": "user", "content": [text_block(_bash_execution_text(message))], "timestamp": timestamp}
    if role in ("custom", "hookMessage"):
        content = message.get("content")
        if isinstance(content, str):
            content = [text_block(content)]
        return {"role": "user", "content": content if content is not None else [], "timestamp": timestamp}
    if role == "branchSummary":
        text = BRANCH_SUMMARY_PREFIX + message.get("summary", "") + BRANCH_SUMMARY_SUFFIX
        return {"role": "user", "content": [text_block(text)], "timestamp": timestamp}
    if role == "compactionSummary":
        text = COMPACTION_SUMMARY_PREFIX + message.get("summary", "") + COMPACTION_SUMMARY_SUFFIX
        return {"role": "user", "content": [text_block(text)], "timestamp": timestamp}
    return None


def convert_to_llm(messages: Iterable[Message]) -> list[Message]:
    out = []
    for message in messages:
        converted = to_llm_message(message)
        if converted is not None:
            out.append(converted)
    return out
