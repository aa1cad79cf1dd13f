"""Making a Pi history acceptable to one target model before it is put on the wire.

- assistant messages that ended in an error are left out; aborted ones keep their text but lose
  their (incomplete) tool calls;
- thinking blocks go back unchanged only to the model that wrote them (their signature is only
  valid there); for any other model they become plain text, or vanish when empty;
- tool-call ids are rewritten to what the target accepts, the same way for a call and its result,
  and made unique across the history;
- a tool result without its call is dropped, and a call without a result gets a synthetic error
  result, because both APIs reject unpaired tool messages;
- for a model that does not accept images (the model table's ``vision`` flag), every image block
  becomes a short text saying an image was left out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from ipyagent.providers.models import table_info
from ipyagent.providers.provider import ModelRequest
from ipyagent.shapes import ContentBlock, Message

_ANTHROPIC_ID_BAD = re.compile(r"[^a-zA-Z0-9_-]")
NO_RESULT_TEXT = "No result provided (the tool call was interrupted)."


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:10]  # a short stable id, not a secret


def anthropic_tool_id(call_id: str) -> str:
    """Anthropic ids must match ``^[a-zA-Z0-9_-]+$`` and be at most 64 characters."""
    cleaned = _ANTHROPIC_ID_BAD.sub("_", call_id)
    if cleaned == call_id and 0 < len(call_id) <= 64:
        return call_id
    return f"{cleaned[:52]}_{_digest(call_id)}" if cleaned else f"call_{_digest(call_id)}"


def openai_tool_id(call_id: str) -> str:
    """OpenAI rejects tool-call ids longer than 40 characters."""
    if 0 < len(call_id) <= 40:
        return call_id
    return f"{call_id[:28]}_{_digest(call_id)}" if call_id else "call_empty"


def same_model(message: Message, api: str, provider: str, model: str) -> bool:
    """Whether an assistant ``message`` came from this very model (so its signatures and item ids
    are valid on the wire it goes back to)."""
    return message.get("api") == api and message.get("provider") == provider and message.get("model") == model


IMAGE_OMITTED = "(an image was left out here: {model} does not accept images)"


def _without_images(message: Message, note: str) -> Message:
    content = message.get("content")
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "image" for b in content):
        return message
    blocks = [{"type": "text", "text": note} if isinstance(b, dict) and b.get("type") == "image" else b
              for b in content]
    return {**message, "content": blocks}


def prepare_history(messages: list[Message], *, api: str, provider: str, model: str,
                    tool_id: Callable[[str], str], images: bool | None = None) -> list[Message]:
    """``images``: whether the target accepts image blocks (default: the bundled model table says;
    a provider passes what its request's registry knows, overrides included)."""
    if images is None:
        info = table_info(model)
        images = bool(info and info.vision)
    note = IMAGE_OMITTED.format(model=f"{provider}:{model}")
    history = _History(api, provider, model, tool_id)
    for message in messages:
        role = message.get("role")
        if not images and role in ("user", "toolResult"):
            message = _without_images(message, note)
        if role == "assistant":
            history.assistant(message)
        elif role == "toolResult":
            history.tool_result(message)
        else:
            history.close_pending()
            if role != "user":  # an unconverted custom role: the model sees it as user text
                message = {"role": "user", "content": message.get("content", "")}
            history.out.append(message)
    history.close_pending()
    return history.out


def request_history(request: ModelRequest, *, api: str, provider: str,
                    tool_id: Callable[[str], str]) -> list[Message]:
    """``request``'s messages prepared (:func:`prepare_history`) for its model, with images where
    what the request knows of the model (:meth:`~ipyagent.providers.provider.ModelRequest.info`)
    says it accepts them."""
    info = request.info()
    return prepare_history(request.messages, api=api, provider=provider, model=request.model,
                           tool_id=tool_id, images=bool(info and info.vision))


class _History:
    """The history being prepared, and the tool calls in it: the wire ids given so far and the
    calls of the latest assistant message still waiting for a result."""

    def __init__(self, api: str, provider: str, model: str, tool_id: Callable[[str], str]) -> None:
        self.api, self.provider, self.model, self.tool_id = api, provider, model, tool_id
        self.out: list[Message] = []
        self.pending: dict[str, str] = {}  # wire id -> tool name, calls still waiting for a result
        self.scope: dict[str, str] = {}  # original id -> wire id, for the latest assistant message's calls
        self.used: set[str] = set()  # wire ids so far: a server reusing "call_0" every turn must not collide

    def close_pending(self) -> None:
        for call_id, name in self.pending.items():
            self.out.append({"role": "toolResult", "toolCallId": call_id, "toolName": name,
                             "content": [{"type": "text", "text": NO_RESULT_TEXT}], "isError": True})
        self.pending.clear()

    def assistant(self, message: Message) -> None:
        stop = message.get("stopReason")
        if stop == "error":
            return
        self.close_pending()
        self.scope = {}
        same = same_model(message, self.api, self.provider, self.model)
        content: list[ContentBlock] = []
        blocks = message.get("content") or []
        if isinstance(blocks, str):  # as Pi's session files may hold it
            blocks = [{"type": "text", "text": blocks}]
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                if block.get("text"):
                    content.append(block)
            elif kind == "thinking":
                if same and (block.get("thinkingSignature") or block.get("thinking")):
                    content.append(block)
                elif block.get("thinking", "").strip() and not block.get("redacted"):
                    content.append({"type": "text", "text": block["thinking"]})
            elif kind == "toolCall" and stop != "aborted":
                wired = block.copy()
                wired["id"] = self.wire_id(block)
                content.append(wired)
        if content:
            self.out.append({**message, "content": content})

    def wire_id(self, call: ContentBlock) -> str:
        """A wire id for the call (unique in the history), now waiting for its result."""
        original = str(call.get("id") or "")
        wire, n = self.tool_id(original), 1
        while wire in self.used:
            n += 1
            wire = self.tool_id(f"{original}_{n}")
        self.used.add(wire)
        self.scope[original] = wire
        self.pending[wire] = call.get("name", "")
        return wire

    def tool_result(self, message: Message) -> None:
        answered = self.scope.get(str(message.get("toolCallId") or ""))  # the wire id of its call
        if answered is None or answered not in self.pending:
            return
        del self.pending[answered]
        self.out.append({**message, "toolCallId": answered})


def image_data_url(block: ContentBlock) -> str:
    return f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
