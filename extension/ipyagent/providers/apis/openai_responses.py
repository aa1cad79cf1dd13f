"""OpenAI Responses API, streamed and stateless (reference/peers.md §2b; OpenAI's API reference).

Nothing is kept on OpenAI's side (``store: false``): every request carries the whole history as
input items. Reasoning survives across turns as the encrypted reasoning item of each reply
(``include: ["reasoning.encrypted_content"]``), kept whole in the thinking block's
``thinkingSignature`` (as Pi does) and sent back only to the model that wrote it. A tool call's
id is ``"<call_id>|<item id>"`` (Pi's convention): results answer the ``call_id``, and the item id
pairs the call with its reasoning item when both go back to the same model.

Models that only this API serves (the ``*-codex`` family, ``*-pro``, deep research) resolve to
this provider even when written ``openai:MODEL`` (see ``registry.parse_model_string``).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from ipyagent.providers.apis.openai_chat import OPENAI_BASE_URL, openai_headers
from ipyagent.providers.errors import NetworkError
from ipyagent.providers.provider import (
    ModelRequest,
    ProviderNote,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from ipyagent.providers.transform import image_data_url, request_history, same_model
from ipyagent.providers.transport.http import ErrorContext, error_from_event, stream_object
from ipyagent.providers.transport.message import MessageBuilder, empty_usage
from ipyagent.providers.transport.sse import SSEEvent
from ipyagent.providers.transport.stop_reasons import outcome, unknown_note
from ipyagent.providers.transport.streaming import EventLoop, HTTPProvider
from ipyagent.session.messages import text_block, text_of
from ipyagent.shapes import ContentBlock, JsonSchema, Message, Usage

_RESPONSES_ONLY = re.compile(r"codex|^(o1|o3|gpt-5[\w.]*)-pro\b|deep-research|^computer-use", re.IGNORECASE)
_ID_BAD = re.compile(r"[^a-zA-Z0-9_-]")
_SUMMARY_SEPARATOR = "\n\n"
_KNOWN_ITEMS = frozenset({"message", "reasoning", "function_call"})


class _InputPart(TypedDict, total=False):
    """A part of an input or output message: ``input_text``, ``input_image`` or ``output_text``."""

    type: str
    text: str
    detail: str
    image_url: str
    annotations: list[object]


class _InputItem(TypedDict, total=False):
    """One item of the request's ``input``: a message, a ``function_call``, its
    ``function_call_output``, or a reasoning item sent back as the API wrote it."""

    type: str
    role: str
    id: str
    status: str
    phase: str
    content: str | list[_InputPart]
    call_id: str
    name: str
    arguments: str
    output: str | list[_InputPart]
    summary: list[object]
    encrypted_content: str


class _FunctionTool(TypedDict):
    type: str
    name: str
    description: str
    parameters: JsonSchema


class _Reasoning(TypedDict, total=False):
    summary: str
    effort: str


class _Body(TypedDict, total=False):
    """The request body this provider writes (``extra_body`` may add any field after it)."""

    model: str
    input: list[_InputItem]
    stream: bool
    store: bool
    instructions: str
    tools: list[_FunctionTool]
    max_output_tokens: int
    reasoning: _Reasoning
    include: list[str]
    temperature: float
    prompt_cache_key: str


class _TokenDetails(TypedDict, total=False):
    cached_tokens: int
    reasoning_tokens: int


class _WireUsage(TypedDict, total=False):
    """The Responses ``usage`` object."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: _TokenDetails
    output_tokens_details: _TokenDetails


class _OutputItem(TypedDict, total=False):
    """An output item as streamed (``item`` of ``response.output_item.added``/``done``): the fields read."""

    type: str
    id: str
    call_id: str
    name: str
    arguments: str
    phase: str
    summary: list[object]
    content: list[object]


class _IncompleteDetails(TypedDict, total=False):
    reason: str


class _Response(TypedDict, total=False):
    """The ``response`` of the created, completed, incomplete and failed events: the fields read."""

    id: str
    status: str
    usage: _WireUsage
    incomplete_details: _IncompleteDetails
    error: object


class _Event(TypedDict, total=False):
    """A streamed event, as parsed from its ``data``: the fields read."""

    type: str
    output_index: int
    delta: str
    item: _OutputItem
    response: _Response
    error: object


def responses_only(model: str) -> bool:
    """Models that Chat Completions does not serve: ``gpt-5-codex``, ``gpt-5.1-codex-max``,
    ``codex-mini-latest``, ``o3-pro``, ``gpt-5-pro``, ``o3-deep-research``, ``computer-use-preview``."""
    return bool(_RESPONSES_ONLY.search(model.rsplit("/", 1)[-1]))


def responses_usage(raw: _WireUsage) -> Usage:
    """Pi's usage from the Responses ``usage`` object: cached tokens are cacheRead (not input);
    reasoning tokens are part of output and also kept apart as ``reasoning``."""
    prompt = raw.get("input_tokens") or 0
    output = raw.get("output_tokens") or 0
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    usage = empty_usage()
    usage.update({"input": max(0, prompt - cached), "output": output, "cacheRead": cached,
                  "totalTokens": raw.get("total_tokens") or prompt + output})
    if reasoning:
        usage["reasoning"] = reasoning
    return usage


def _clean_id(text: str, limit: int = 64) -> str:
    cleaned = _ID_BAD.sub("_", text)
    return cleaned[:limit]


def responses_tool_id(call_id: str) -> str:
    """A tool-call id the Responses API accepts: ``call_id`` (and the item id after ``|``) made of
    ``[a-zA-Z0-9_-]``, at most 64 characters each; an id from another provider becomes a ``call_id``."""
    call, sep, item = call_id.partition("|")
    call = _clean_id(call) or "call_empty"
    item = _clean_id(item) if sep else ""
    return f"{call}|{item}" if item.startswith("fc") else call


def _split_id(block_id: str) -> tuple[str, str | None]:
    call, _, item = block_id.partition("|")
    return call, (item or None)


def _input_content(content: Any) -> list[_InputPart]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    out: list[_InputPart] = []
    for block in content or []:
        if block.get("type") == "text":
            out.append({"type": "input_text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            out.append({"type": "input_image", "detail": "auto", "image_url": image_data_url(block)})
    return out


def _reasoning_item(block: ContentBlock) -> _InputItem | None:
    """The reasoning item stored in a thinking block, as it goes back in ``input``: one that holds
    the reasoning itself, encrypted (OpenAI) or as ``reasoning_text`` content (DeepSeek, and the
    servers that run open-weight models); a bare summary refers to an item nothing stored."""
    signature = block.get("thinkingSignature")
    if not signature:
        return None
    try:
        item = json.loads(signature)
    except (TypeError, ValueError):
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    own = [p for p in item.get("content") or [] if isinstance(p, dict) and p.get("type") == "reasoning_text"]
    if not item.get("encrypted_content") and not own:
        return None
    return cast(_InputItem, {k: v for k, v in item.items() if k != "status"})


def _assistant_items(message: Message, same: bool) -> list[_InputItem]:
    items: list[_InputItem] = []
    for block in message["content"]:
        kind = block["type"]
        if kind == "thinking":
            # Reasoning goes back only as the item this API wrote, holding the reasoning (store is
            # false, so the API cannot look an item up by id). A summary without encrypted content,
            # or the unsigned thinking of an interrupted reply, goes nowhere: never as text the model "said".
            # (prepare_history has already turned another model's thinking into plain text.)
            item = _reasoning_item(block) if same else None
            if item is not None:
                items.append(item)
        elif kind == "text":
            signature = block.get("textSignature") if same else None
            items.append(_output_message(block["text"], signature, block.get("phase") if same else None))
        elif kind == "toolCall":
            call_id, item_id = _split_id(block["id"])
            call: _InputItem = {"type": "function_call", "call_id": call_id, "name": block["name"],
                                 "arguments": json.dumps(block.get("arguments") or {})}
            if same and item_id:
                call["id"] = item_id  # pairs the call with the reasoning item sent before it
            items.append(call)
    # A reasoning item must be followed by the output it led to; a trailing one is dropped.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _output_message(text: str, item_id: Any, phase: str | None) -> _InputItem:
    """An assistant text: the output message it came as when it has OpenAI's id for it (an output
    message needs one, starting ``msg``), otherwise an input message with the assistant role (the
    form the API documents for earlier replies, and the one DeepSeek accepted in the recordings)."""
    if isinstance(item_id, str) and item_id.startswith("{"):  # newer Pi: {"v": 1, "id": …, "phase": …}
        try:
            stored = json.loads(item_id)
        except ValueError:
            stored = None
        stored = stored if isinstance(stored, dict) else {}
        item_id, phase = stored.get("id"), phase or stored.get("phase")
    item: _InputItem = {"role": "assistant", "content": text}
    if item_id and isinstance(item_id, str) and item_id.startswith("msg"):
        item = {"type": "message", "role": "assistant", "id": item_id, "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    if phase and isinstance(phase, str):
        item["phase"] = phase
    return item


def _tool_output(message: Message) -> str | list[_InputPart]:
    content = message.get("content")
    blocks: list[ContentBlock] = [text_block(content)] if isinstance(content, str) else content or []
    text = text_of(blocks, "\n")
    if not any(b.get("type") == "image" for b in blocks):
        return text or "(no output)"
    return _input_content(blocks)


def to_responses_input(request: ModelRequest, provider: str, api: str) -> list[_InputItem]:
    """The Pi history as Responses input items."""
    out: list[_InputItem] = []
    history = request_history(request, api=api, provider=provider, tool_id=responses_tool_id)
    for message in history:
        role = message["role"]
        if role == "user":
            content = _input_content(message.get("content"))
            if content:
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            same = same_model(message, api, provider, request.model)
            out += _assistant_items(message, same)
        elif role == "toolResult":
            out.append({"type": "function_call_output", "call_id": _split_id(message["toolCallId"])[0],
                        "output": _tool_output(message)})
    return out


@dataclass
class _Item:
    """One output item of the reply being streamed, by its output index."""

    kind: str  # "message", "reasoning", "function_call", or another type we do not keep
    position: int = -1  # builder position of its block
    ordinal: int = -1  # tool-call ordinal
    parts: int = 0  # reasoning summary parts seen


_Items = dict[int | None, _Item]  # by the event's output index as sent (None when it is left out)


def _error_payload(error: Any) -> dict[str, Any]:
    """A Responses error object (``error`` event, ``response.error``) as ``error_from_event`` reads
    it: its message, code and type as sent (the classification is the one HTTP errors get)."""
    if not isinstance(error, dict):
        return {"message": str(error), "type": "api_error"}
    code = error.get("code")
    return {"message": error.get("message") or str(code or "error"), "type": error.get("type"), "code": code}


class OpenAIResponsesProvider(HTTPProvider):
    name = "openai-responses"
    api = "openai-responses"
    label = "OpenAI Responses"
    default_base_url = OPENAI_BASE_URL
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def endpoint(self) -> str:
        return f"{self.base_url}/responses"

    def headers(self, key: str | None) -> dict[str, str]:
        return openai_headers(key)

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        body: _Body = {
            "model": request.model,
            "input": to_responses_input(request, self.name, self.api),
            "stream": True,
            "store": False,  # stateless: nothing kept server-side, so no previous_response_id either
        }
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.parameters} for t in request.tools]
        if request.max_tokens:
            body["max_output_tokens"] = request.max_tokens
        info = request.info()
        reasoning_model = bool(info and info.reasoning)
        if reasoning_model or request.reasoning:
            reasoning: _Reasoning = {"summary": "auto"}
            if request.reasoning:
                reasoning["effort"] = request.reasoning
            body["reasoning"] = reasoning
            body["include"] = ["reasoning.encrypted_content"]
        elif request.temperature is not None:
            body["temperature"] = request.temperature  # reasoning models accept only the default
        if request.options.get("session_id"):
            body["prompt_cache_key"] = str(request.options["session_id"])  # routes turns to a warm cache
        return request.with_extra_body(body)

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        items: _Items = {}
        calls: list[int] = []  # builder positions of the tool calls, in call order
        ended: set[int] = set()  # positions of the calls whose ToolCallEnd was sent
        final: _Response | None = None
        for event, data in sse:
            if cancel is not None and cancel.is_set():
                return "aborted"
            ev = cast(_Event, stream_object(ctx, data))
            kind = ev.get("type") or event
            if kind in ("response.completed", "response.incomplete"):
                final = ev.get("response") or {}
                break
            if kind in ("response.output_text.delta", "response.refusal.delta",
                        "response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                yield from self._text_delta(kind, ev, items, builder)
            elif kind == "response.function_call_arguments.delta":
                item = items.get(ev.get("output_index"))
                if item is not None and item.kind == "function_call" and ev.get("delta"):
                    builder.pieces[item.position].append(ev["delta"])
                    yield ToolCallDelta(item.ordinal, ev["delta"])
            elif kind == "response.reasoning_summary_part.added":
                yield from self._summary_part(ev, items, builder)
            elif kind == "response.output_item.added":
                yield from self._item_added(ev, items, calls, builder)
            elif kind == "response.output_item.done":
                yield from self._item_done(ev, items, builder, ended, ctx)
            elif kind in ("response.failed", "error"):
                raise self._failure(kind, ev, ctx)
            elif kind in ("response.created", "response.in_progress"):
                builder.response_id = (ev.get("response") or {}).get("id") or builder.response_id
            # content_part, *.done text events, queued and unknown types carry nothing new
        if final is None:
            raise NetworkError(f"{ctx.label}: the stream from {ctx.url} ended before the reply was complete "
                               f"(no response.completed)")
        return (yield from self._finish(final, calls, ended, builder, ctx))

    def _finish(self, final: _Response, calls: list[int], ended: set[int], builder: MessageBuilder,
                ctx: ErrorContext) -> EventLoop:
        builder.response_id = final.get("id") or builder.response_id
        if isinstance(final.get("usage"), dict):
            builder.usage = responses_usage(final["usage"])
            yield UsageUpdate(builder.usage)
        for ordinal, position in enumerate(calls):
            if position not in ended:  # the item never finished: emit what arrived
                block = builder.finish_block(position)
                yield ToolCallEnd(ordinal, block["id"], block["name"], block["arguments"])
        raw = str(final.get("status") or "")
        details = final.get("incomplete_details") or {}
        if raw == "incomplete" or details.get("reason"):
            raw = f"incomplete:{details.get('reason') or ''}"
        end = outcome(self.api, ctx.label, raw, bool(calls))
        if end.unknown is not None:
            builder.extra["providerStopReason"] = end.unknown
            yield ProviderNote(unknown_note(ctx.label, "status", end.unknown))
        builder.error_message = end.error
        return end.stop

    @staticmethod
    def _failure(kind: str, ev: _Event, ctx: ErrorContext) -> Exception:
        if kind == "response.failed":
            response = ev.get("response") or {}
            return error_from_event(ctx, _error_payload(response.get("error") or {"code": "server_error",
                                                                                  "message": "response failed"}))
        return error_from_event(ctx, _error_payload(ev.get("error") if isinstance(ev.get("error"), dict) else ev))

    def _text_delta(self, kind: str, ev: _Event, items: _Items, builder: MessageBuilder) -> Iterator[Any]:
        reasoning = "reasoning" in kind
        position = self._block(items, ev, builder, "reasoning" if reasoning else "message")
        if position is not None and ev.get("delta"):
            builder.pieces[position].append(ev["delta"])
            yield ThinkingDelta(ev["delta"]) if reasoning else TextDelta(ev["delta"])

    @staticmethod
    def _summary_part(ev: _Event, items: _Items, builder: MessageBuilder) -> Iterator[Any]:
        item = items.get(ev.get("output_index"))
        if item is not None and item.kind == "reasoning":
            if item.parts and builder.pieces[item.position]:
                builder.pieces[item.position].append(_SUMMARY_SEPARATOR)
                yield ThinkingDelta(_SUMMARY_SEPARATOR)
            item.parts += 1

    @staticmethod
    def _block(items: _Items, ev: _Event, builder: MessageBuilder, kind: str) -> int | None:
        """The builder position for a delta's item, created if the item's ``added`` event was missed."""
        index = ev.get("output_index")
        item = items.get(index)
        if item is None:
            item = items[index] = _Item(kind)
        if item.kind != kind:
            return None
        if item.position < 0:
            block: ContentBlock = ({"type": "text", "text": ""} if kind == "message"
                                   else {"type": "thinking", "thinking": ""})
            item.position = builder.add_block(block)
        return item.position

    @staticmethod
    def _item_added(ev: _Event, items: _Items, calls: list[int],
                    builder: MessageBuilder) -> Iterator[Any]:
        index = ev.get("output_index")
        raw = ev.get("item") or {}
        kind = raw.get("type") or ""
        item = items[index] = _Item(kind)
        if kind == "message":
            item.position = builder.add_block({"type": "text", "text": ""})
        elif kind == "reasoning":
            item.position = builder.add_block({"type": "thinking", "thinking": ""})
        elif kind == "function_call":
            call_id = raw.get("call_id") or f"call_{uuid.uuid4().hex[:24]}"
            block_id = f"{call_id}|{raw['id']}" if raw.get("id") else call_id
            item.ordinal = len(calls)
            item.position = builder.tool_call(block_id, raw.get("name") or "")
            calls.append(item.position)
            if raw.get("arguments"):
                builder.pieces[item.position].append(raw["arguments"])
            yield ToolCallStart(item.ordinal, block_id, raw.get("name") or "")

    @staticmethod
    def _item_done(ev: _Event, items: _Items, builder: MessageBuilder, ended: set[int],
                   ctx: ErrorContext) -> Iterator[Any]:
        index = ev.get("output_index")
        raw = ev.get("item") or {}
        item = items.get(index)
        if raw.get("type") not in _KNOWN_ITEMS and isinstance(raw.get("type"), str):
            # an output item this provider does not read (a server tool's call, a compaction…):
            # kept in the session as it came, said once
            builder.extra.setdefault("providerContent", []).append(raw)
            yield ProviderNote(unknown_note(ctx.label, "output item", raw["type"]))
            return
        if item is None or item.position < 0 or raw.get("type") != item.kind:
            return
        block = builder.content[item.position]
        pieces = builder.pieces[item.position]
        if item.kind == "reasoning":
            # the complete item, encrypted content included, is what goes back next turn
            block["thinkingSignature"] = json.dumps(raw, separators=(",", ":"))
            if not pieces:  # no deltas came: the summary, or else the reasoning_text the item holds
                pieces.append(_SUMMARY_SEPARATOR.join(s.get("text", "") for s in raw.get("summary") or []
                                                      if isinstance(s, dict))
                              or "".join(p.get("text", "") for p in raw.get("content") or []
                                         if isinstance(p, dict) and p.get("type") == "reasoning_text"))
        elif item.kind == "message":
            if raw.get("id"):
                block["textSignature"] = raw["id"]
            if raw.get("phase"):
                block["phase"] = raw["phase"]
            if not pieces:
                pieces.append("".join(part.get("text") or part.get("refusal") or ""
                                      for part in raw.get("content") or [] if isinstance(part, dict)))
        elif item.kind == "function_call":
            if isinstance(raw.get("arguments"), str):
                pieces[:] = [raw["arguments"]]  # the complete arguments win over the deltas
            builder.finish_block(item.position)
            ended.add(item.position)
            yield ToolCallEnd(item.ordinal, block["id"], block["name"], block["arguments"])
