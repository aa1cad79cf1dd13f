"""Anthropic Messages, streamed (reference/peers.md §2c; cache breakpoints as Pi places them,
reference/pi.md §8.1: the system prompt block and the last block of the last user message)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import httpx

from ipyagent.providers.errors import ContextOverflowError, MalformedStreamError, NetworkError
from ipyagent.providers.provider import (
    MessageDone,
    ModelRequest,
    ProviderNote,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from ipyagent.providers.transform import anthropic_tool_id, request_history, same_model
from ipyagent.providers.transport.http import ErrorContext, error_from_event, error_from_response, network_error
from ipyagent.providers.transport.message import MessageBuilder, empty_usage
from ipyagent.providers.transport.sse import SSEEvent
from ipyagent.providers.transport.sse import loads as sse_loads
from ipyagent.providers.transport.stop_reasons import outcome, unknown_note
from ipyagent.providers.transport.streaming import EventLoop, HTTPProvider
from ipyagent.shapes import ContentBlock, JsonSchema, Message, Usage

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_PI_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
# blocks of the tools Anthropic runs itself (web search and fetch, code execution, MCP): they go
# back unchanged in the same assistant turn; any other unknown block is kept the same way, said once
SERVER_BLOCKS = frozenset({"server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                           "code_execution_tool_result", "bash_code_execution_tool_result",
                           "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
                           "tool_search_tool_result", "container_upload"})
MAX_PAUSES = 5  # pause_turn continuations of one reply before giving up


def anthropic_usage(raw: dict[str, int]) -> Usage:
    usage = empty_usage()
    usage.update({"input": raw.get("input_tokens", 0), "output": raw.get("output_tokens", 0),
                  "cacheRead": raw.get("cache_read_input_tokens", 0),
                  "cacheWrite": raw.get("cache_creation_input_tokens", 0)})
    usage["totalTokens"] = usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    return usage


class _ImageSource(TypedDict):
    type: str
    media_type: str
    data: str


class _Block(TypedDict, total=False):
    """A content block of a request message: text, image, thinking, redacted_thinking, tool_use,
    tool_result (or a block of ``providerContent`` sent back as the API wrote it)."""

    type: str
    text: str
    source: _ImageSource
    data: str
    thinking: str
    signature: str
    id: str
    name: str
    input: Mapping[str, object]
    tool_use_id: str
    content: list[_Block]
    is_error: bool
    cache_control: dict[str, str]


class _AnthropicMessage(TypedDict):
    role: str
    content: list[_Block]


class _Tool(TypedDict):
    name: str
    description: str
    input_schema: JsonSchema


class _Thinking(TypedDict):
    type: str
    budget_tokens: int


class _Body(TypedDict, total=False):
    """The request body this provider writes (``extra_body`` may add any field after it)."""

    model: str
    max_tokens: int
    stream: bool
    messages: list[_AnthropicMessage]
    system: list[_Block]
    tools: list[_Tool]
    thinking: _Thinking
    temperature: float


def _blocks(content: Any) -> list[_Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[_Block] = []
    for block in content or []:
        if block.get("type") == "text" and block.get("text"):
            out.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image":
            out.append({"type": "image", "source": {"type": "base64", "media_type": block.get("mimeType", "image/png"),
                                                    "data": block.get("data", "")}})
    return out


def _assistant_blocks(content: list[ContentBlock], raw: Any = None) -> list[_Block]:
    """An assistant turn's blocks. ``raw`` is the turn's ``providerContent`` (every block as the
    API sent it, kept when it held server-tool or unknown blocks) when the turn is this model's:
    it goes back unchanged, its tool_use blocks taking the (possibly rewritten) ids of the calls."""
    if isinstance(raw, list) and raw:
        calls = iter(b for b in content if b["type"] == "toolCall")
        out: list[_Block] = []
        for block in raw:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call = next(calls, None)
                if call is not None:
                    out.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                                "input": call.get("arguments") or {}})
            elif isinstance(block, dict):
                out.append(cast(_Block, block))
        return out
    out = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            out.append({"type": "text", "text": block["text"]})
        elif kind == "thinking":
            signature = block.get("thinkingSignature")
            if block.get("redacted") and signature:
                out.append({"type": "redacted_thinking", "data": signature})
            elif signature:
                out.append({"type": "thinking", "thinking": block.get("thinking", ""), "signature": signature})
            elif block.get("thinking", "").strip():  # unsigned (an aborted reply): only valid as text
                out.append({"type": "text", "text": block["thinking"]})
        elif kind == "toolCall":
            out.append({"type": "tool_use", "id": block["id"], "name": block["name"],
                        "input": block.get("arguments") or {}})
    return out


def to_anthropic_messages(request: ModelRequest, provider: str, api: str,
                          cache: dict[str, str] | None = CACHE) -> list[_AnthropicMessage]:
    out: list[_AnthropicMessage] = []
    history = request_history(request, api=api, provider=provider, tool_id=anthropic_tool_id)
    for message in history:
        role = message["role"]
        if role == "user":
            blocks = _blocks(message.get("content"))
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            same = same_model(message, api, provider, request.model)
            blocks = _assistant_blocks(message["content"], message.get("providerContent") if same else None)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            result: _Block = {"type": "tool_result", "tool_use_id": message["toolCallId"],
                              "content": _blocks(message.get("content")) or [{"type": "text", "text": "(no output)"}],
                              "is_error": bool(message.get("isError"))}
            previous = out[-1] if out else None
            # consecutive results share one user message, as the API expects after parallel calls
            if previous and previous["role"] == "user" and previous["content"][-1]["type"] == "tool_result":
                previous["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
    for sent in reversed(out):
        if sent["role"] == "user" and cache:
            sent["content"][-1] = cast(_Block, {**sent["content"][-1], "cache_control": cache})
            break
    return out


def merge_raw_delta(raw: dict[str, Any], json_pieces: list[str], delta: dict[str, Any]) -> None:
    """Apply one ``content_block_delta`` to the block as the API will want it back."""
    dtype = delta.get("type")
    if dtype == "text_delta":
        raw["text"] = raw.get("text", "") + delta.get("text", "")
    elif dtype == "thinking_delta":
        raw["thinking"] = raw.get("thinking", "") + delta.get("thinking", "")
    elif dtype == "signature_delta":
        raw["signature"] = raw.get("signature", "") + delta.get("signature", "")
    elif dtype == "input_json_delta":
        json_pieces.append(delta.get("partial_json") or "")
    elif dtype == "citations_delta":
        raw.setdefault("citations", []).append(delta.get("citation"))
    else:  # a delta type nobody documented yet: its text fields extend the block, the rest replace
        for key, value in delta.items():
            if key == "type":
                continue
            raw[key] = raw.get(key, "") + value if isinstance(value, str) and isinstance(raw.get(key), str) else value


def _relay(events: Iterator[StreamEvent]) -> Generator[StreamEvent, None, Message]:
    """Pass on a request's events but its ``MessageDone`` (returned instead); an interrupt thrown
    in between goes to the request, which closes its connection and reports what arrived."""
    done: Message | None = None
    try:
        event = next(events)
        while True:
            if isinstance(event, MessageDone):
                done = event.message
                event = next(events)
                continue
            try:
                yield event
            except GeneratorExit:
                close = getattr(events, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as exc:  # noqa: BLE001 - a KeyboardInterrupt belongs to the request in flight
                event = events.throw(exc)  # type: ignore[attr-defined]
                continue
            event = next(events)
    except StopIteration:
        pass
    assert done is not None, "a provider stream ended without MessageDone"
    return done


def joined_replies(parts: list[Message]) -> Message:
    """The parts of one paused-and-continued reply as one message: blocks in order, usage and cost
    added up (every request is billed), the last part's ending."""
    joined: Message = {**parts[-1], "content": [b for p in parts for b in p["content"]]}
    if any(p.get("providerContent") for p in parts):
        joined["providerContent"] = [b for p in parts
                                     for b in (p.get("providerContent") or _assistant_blocks(p["content"]))]
    usage: dict[str, Any] = dict(empty_usage())  # summed key by key
    for part in parts:
        got = part.get("usage") or {}
        for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
            usage[key] += got.get(key) or 0
        for key in usage["cost"]:
            usage["cost"][key] += (got.get("cost") or {}).get(key) or 0
        for key, value in (got.get("serverToolUse") or {}).items():
            usage.setdefault("serverToolUse", {})[key] = usage.get("serverToolUse", {}).get(key, 0) + value
    joined["usage"] = cast(Usage, usage)
    return joined


@dataclass
class _AnthropicStream:
    """What one streamed reply has said so far, by the event's block index as sent."""

    positions: dict[int | None, int] = field(default_factory=dict)  # wire block index -> builder position
    ordinals: dict[int | None, int] = field(default_factory=dict)  # wire block index -> tool-call ordinal
    raw: dict[int | None, dict[str, Any]] = field(default_factory=dict)  # every block as the API sent it
    raw_json: dict[int | None, list[str]] = field(default_factory=dict)  # input_json pieces of raw blocks
    usage: dict[str, int] = field(default_factory=dict)
    server_tools: dict[str, Any] = field(default_factory=dict)  # usage.server_tool_use
    stop: str | None = None


class AnthropicProvider(HTTPProvider):
    name = "anthropic"
    api = "anthropic-messages"
    label = "Anthropic"
    default_base_url = ANTHROPIC_BASE_URL
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"

    def endpoint(self) -> str:
        return f"{self.base_url}/v1/messages"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream",
                   "anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        info = request.info()
        max_tokens = request.max_tokens or min((info.max_output if info else 0) or 8192, 32_000)
        cache = self.cache_control(request)
        body: _Body = {"model": request.model, "max_tokens": max_tokens, "stream": True,
                       "messages": to_anthropic_messages(request, self.name, self.api, cache)}
        if request.system_prompt:
            system: _Block = {"type": "text", "text": request.system_prompt}
            body["system"] = [{**system, "cache_control": cache} if cache else system]
        if request.tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in request.tools]
        budget = THINKING_BUDGET.get(request.reasoning or "")
        if budget and info is not None and info.reasoning:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(max_tokens, budget + 1024)  # the budget must fit inside max_tokens
        elif request.temperature is not None:
            body["temperature"] = request.temperature  # not allowed together with thinking
        return request.with_extra_body(body)

    def cache_control(self, request: ModelRequest) -> dict[str, str] | None:
        """Pi's ``cacheRetention`` (request option ``cache_retention``, or ``PI_CACHE_RETENTION``):
        ``none`` sends no breakpoints, ``long`` asks for a 1 h TTL (only api.anthropic.com has it),
        ``short`` (default) the 5 min one."""
        retention = request.options.get("cache_retention") or os.environ.get("PI_CACHE_RETENTION", "short")
        if retention == "none":
            return None
        if retention == "long" and "api.anthropic.com" in self.base_url:
            return {**CACHE, "ttl": "1h"}
        return CACHE

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens of ``request`` by Anthropic's own count (``/v1/messages/count_tokens``:
        free, rate-limited, and itself an estimate)."""
        key = self.api_key()
        url = f"{self.base_url}/v1/messages/count_tokens"
        body = {k: v for k, v in self.payload(request).items() if k not in ("stream", "max_tokens", "temperature")}
        ctx = ErrorContext(self.label, url, request.model, self.key_env, key)
        target, headers = self.request_target(url, key)
        try:
            response = self.client.post(target, json=body, headers=headers)
        except httpx.TransportError as exc:
            raise network_error(ctx, exc) from None
        if response.status_code >= 400:
            raise error_from_response(ctx, response.status_code, response.headers, response.text)
        return int(response.json()["input_tokens"])

    def stream(self, request: ModelRequest, cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
        """One reply; a reply the server paused (``pause_turn``: its own tool loop ran long) is
        continued by sending it back as the last assistant turn, and the parts come back as one
        message whose usage adds up every request."""
        paused: list[Message] = []
        for _ in range(MAX_PAUSES + 1):
            current = request if not paused else dataclasses.replace(
                request, messages=[*request.messages, joined_replies(paused)])
            done = yield from _relay(super().stream(current, cancel))
            if done["stopReason"] != "pause":
                yield MessageDone(joined_replies([*paused, done]) if paused else done)
                return
            paused.append(done)
        last = joined_replies(paused)
        last.update({"stopReason": "error",
                     "errorMessage": f"{self.label} paused its server-tool turn {len(paused)} times (pause_turn); "
                                     "ipyagent stopped continuing it"})
        yield MessageDone(last)

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        state = _AnthropicStream()
        done = False
        for _event, data in sse:
            if cancel is not None and cancel.is_set():
                return "aborted"
            try:
                ev = sse_loads(data)
                kind = ev["type"]
            except (ValueError, KeyError, TypeError):
                raise MalformedStreamError(f"{ctx.label}: the stream from {ctx.url} sent data that is not a JSON "
                                           f"event: {data[:200]!r}") from None
            if kind == "message_stop":
                done = True
                break
            if kind == "error":
                raise error_from_event(ctx, ev.get("error") or ev)
            if kind == "content_block_delta":
                yield from self._delta(ev, builder, state)
            elif kind == "content_block_start":
                state.raw[ev.get("index")] = dict(ev.get("content_block") or {})
                yield from self._block_start(ev, builder, state.positions, state.ordinals)
            elif kind == "content_block_stop":
                yield from self._block_stop(ev.get("index"), builder, state)
            elif kind in ("message_start", "message_delta"):
                yield from self._message_event(kind, ev, builder, state)
            # ping and unknown event types are ignored, as the protocol asks
        if not done:
            raise NetworkError(f"{ctx.label}: the stream from {ctx.url} ended before the reply was complete "
                               f"(no message_stop)")
        return (yield from self._finish(builder, ctx, state))

    @staticmethod
    def _delta(ev: dict[str, Any], builder: MessageBuilder, state: _AnthropicStream) -> Iterator[Any]:
        index = ev.get("index")
        delta = ev.get("delta") or {}
        dtype = delta.get("type")
        merge_raw_delta(state.raw.setdefault(index, {}), state.raw_json.setdefault(index, []), delta)
        position = state.positions.get(index)
        if position is None:
            return  # a block the Pi message does not hold (server tools, unknown): kept raw above
        if dtype == "text_delta":
            builder.pieces[position].append(delta["text"])
            yield TextDelta(delta["text"])
        elif dtype == "input_json_delta" and index in state.ordinals:
            piece = delta.get("partial_json") or ""
            if piece:
                builder.pieces[position].append(piece)
                yield ToolCallDelta(state.ordinals[index], piece)
        elif dtype == "thinking_delta":
            builder.pieces[position].append(delta["thinking"])
            yield ThinkingDelta(delta["thinking"])
        elif dtype == "signature_delta":
            block = builder.content[position]
            block["thinkingSignature"] = block.get("thinkingSignature", "") + delta["signature"]

    @staticmethod
    def _block_stop(index: int | None, builder: MessageBuilder, state: _AnthropicStream) -> Iterator[Any]:
        pieces = state.raw_json.pop(index, [])
        raw = state.raw.get(index)
        if raw is not None and "".join(pieces).strip():
            try:
                raw["input"] = json.loads("".join(pieces))
            except ValueError:
                raw["input"] = {}
        if index in state.ordinals:
            block = builder.finish_block(state.positions[index])
            yield ToolCallEnd(state.ordinals[index], block["id"], block["name"], block["arguments"])

    @staticmethod
    def _message_event(kind: str, ev: dict[str, Any], builder: MessageBuilder,
                       state: _AnthropicStream) -> Iterator[Any]:
        if kind == "message_start":
            message = ev.get("message") or {}
            builder.response_id = message.get("id")
            usage = message.get("usage") or {}
        else:
            state.stop = (ev.get("delta") or {}).get("stop_reason") or state.stop
            usage = ev.get("usage") or {}
        # values are cumulative (over the server's own tool iterations too): take the latest, never add
        state.usage.update({k: usage[k] for k in _USAGE_KEYS if usage.get(k) is not None})
        if isinstance(usage.get("server_tool_use"), dict):
            state.server_tools = usage["server_tool_use"]
        builder.usage = anthropic_usage(state.usage)
        yield UsageUpdate(builder.usage)

    def _finish(self, builder: MessageBuilder, ctx: ErrorContext, state: _AnthropicStream) -> EventLoop:
        if state.stop == "model_context_window_exceeded":
            raise ContextOverflowError(f"{ctx.label}: {ctx.model!r} stopped with model_context_window_exceeded: "
                                       f"the context window is full")
        raws = [state.raw[i] for i in state.raw]
        kinds = {str(r.get("type")) for r in raws}
        if kinds - _PI_BLOCKS:
            builder.extra["providerContent"] = raws  # the whole turn as sent: it goes back unchanged
            for kind in sorted(kinds - _PI_BLOCKS - SERVER_BLOCKS):
                yield ProviderNote(unknown_note(ctx.label, "content block", kind))
        if kinds & SERVER_BLOCKS or any(state.server_tools.values()):
            # the usage adds up the server's own tool iterations: it does not measure the context
            builder.usage["serverToolUse"] = {k: v for k, v in state.server_tools.items() if isinstance(v, int)}
        end = outcome(self.api, ctx.label, state.stop, bool(state.ordinals))
        if end.unknown is not None:
            builder.extra["providerStopReason"] = end.unknown
            yield ProviderNote(unknown_note(ctx.label, "stop reason", end.unknown))
        builder.error_message = end.error
        return end.stop

    @staticmethod
    def _block_start(ev: dict[str, Any], builder: MessageBuilder, positions: dict[int | None, int],
                     ordinals: dict[int | None, int]) -> Iterator[Any]:
        index = ev.get("index")
        block = ev.get("content_block") or {}
        btype = block.get("type")
        if btype == "text":
            positions[index] = builder.add_block({"type": "text", "text": ""})
            if block.get("text"):
                builder.pieces[positions[index]].append(block["text"])
        elif btype == "thinking":
            positions[index] = builder.add_block({"type": "thinking", "thinking": "",
                                                  "thinkingSignature": block.get("signature") or ""})
            if block.get("thinking"):
                builder.pieces[positions[index]].append(block["thinking"])
        elif btype == "redacted_thinking":
            positions[index] = builder.add_block({"type": "thinking", "thinking": "", "redacted": True,
                                                  "thinkingSignature": block.get("data", "")})
            builder.pieces[positions[index]].append("[Reasoning redacted]")
        elif btype == "tool_use":
            ordinal = len(ordinals)
            ordinals[index] = ordinal
            positions[index] = builder.tool_call(block.get("id", ""), block.get("name", ""))
            if block.get("input"):
                builder.pieces[positions[index]].append(json.dumps(block["input"]))
            yield ToolCallStart(ordinal, block.get("id", ""), block.get("name", ""))
