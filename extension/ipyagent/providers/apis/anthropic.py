"""Anthropic Messages, streamed (reference/peers.md §2c; cache breakpoints as Pi places them,
reference/pi.md §8.1: the system prompt block and the last block of the last user message)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import httpx

from ipyagent.providers.errors import ContextOverflowError, MalformedStreamError, NetworkError
from ipyagent.providers.provider import (
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from ipyagent.providers.transform import anthropic_tool_id, prepare_history
from ipyagent.providers.transport.http import ErrorContext, error_from_event, error_from_response, network_error
from ipyagent.providers.transport.message import MessageBuilder, empty_usage
from ipyagent.providers.transport.sse import SSEEvent
from ipyagent.providers.transport.sse import loads as sse_loads
from ipyagent.providers.transport.streaming import EventLoop, HTTPProvider

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
         "tool_use": "toolUse", "refusal": "error"}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def anthropic_usage(raw: dict[str, int]) -> dict[str, Any]:
    usage = empty_usage()
    usage.update(input=raw.get("input_tokens", 0), output=raw.get("output_tokens", 0),
                 cacheRead=raw.get("cache_read_input_tokens", 0), cacheWrite=raw.get("cache_creation_input_tokens", 0))
    usage["totalTokens"] = usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    return usage


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[dict[str, Any]] = []
    for block in content or []:
        if block.get("type") == "text" and block.get("text"):
            out.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image":
            out.append({"type": "image", "source": {"type": "base64", "media_type": block.get("mimeType", "image/png"),
                                                    "data": block.get("data", "")}})
    return out


def _assistant_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
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
                          cache: dict[str, str] | None = CACHE) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    info = request.info()
    history = prepare_history(request.messages, api=api, provider=provider, model=request.model,
                              tool_id=anthropic_tool_id, images=bool(info and info.vision))
    for message in history:
        role = message["role"]
        if role == "user":
            blocks = _blocks(message.get("content"))
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks = _assistant_blocks(message["content"])
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            result = {"type": "tool_result", "tool_use_id": message["toolCallId"],
                      "content": _blocks(message.get("content")) or [{"type": "text", "text": "(no output)"}],
                      "is_error": bool(message.get("isError"))}
            previous = out[-1] if out else None
            # consecutive results share one user message, as the API expects after parallel calls
            if previous and previous["role"] == "user" and previous["content"][-1]["type"] == "tool_result":
                previous["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
    for message in reversed(out):
        if message["role"] == "user" and cache:
            message["content"][-1] = {**message["content"][-1], "cache_control": cache}
            break
    return out


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
        body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "stream": True,
                                "messages": to_anthropic_messages(request, self.name, self.api, cache)}
        if request.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
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
        body.update(request.options.get("extra_body") or {})
        return body

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

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        loads = sse_loads
        # by the event's block index as sent (None when an event leaves it out)
        positions: dict[int | None, int] = {}  # wire block index -> builder position
        ordinals: dict[int | None, int] = {}  # wire block index -> tool-call ordinal
        raw_usage: dict[str, int] = {}
        stop_reason: str | None = None
        done = False
        for _event, data in sse:
            if cancel is not None and cancel.is_set():
                return "aborted"
            try:
                ev = loads(data)
                kind = ev["type"]
            except (ValueError, KeyError, TypeError):
                raise MalformedStreamError(f"{ctx.label}: the stream from {ctx.url} sent data that is not a JSON "
                                           f"event: {data[:200]!r}") from None
            if kind == "content_block_delta":
                position = positions.get(ev.get("index"))
                if position is None:
                    continue  # a delta of a block type we do not keep (server tools, citations)
                delta = ev["delta"]
                dtype = delta.get("type")
                if dtype == "text_delta":
                    builder.pieces[position].append(delta["text"])
                    yield TextDelta(delta["text"])
                elif dtype == "input_json_delta":
                    piece = delta.get("partial_json") or ""
                    if piece:
                        builder.pieces[position].append(piece)
                        yield ToolCallDelta(ordinals[ev["index"]], piece)
                elif dtype == "thinking_delta":
                    builder.pieces[position].append(delta["thinking"])
                    yield ThinkingDelta(delta["thinking"])
                elif dtype == "signature_delta":
                    block = builder.content[position]
                    block["thinkingSignature"] = block.get("thinkingSignature", "") + delta["signature"]
            elif kind == "content_block_start":
                yield from self._block_start(ev, builder, positions, ordinals)
            elif kind == "content_block_stop":
                index = ev.get("index")
                if index in ordinals:
                    block = builder.finish_block(positions[index])
                    yield ToolCallEnd(ordinals[index], block["id"], block["name"], block["arguments"])
            elif kind == "message_delta":
                stop_reason = (ev.get("delta") or {}).get("stop_reason") or stop_reason
                usage = ev.get("usage") or {}
                # values here are cumulative: take the latest, never add
                raw_usage.update({k: usage[k] for k in _USAGE_KEYS if usage.get(k) is not None})
                builder.usage = anthropic_usage(raw_usage)
                yield UsageUpdate(builder.usage)
            elif kind == "message_start":
                message = ev.get("message") or {}
                builder.response_id = message.get("id")
                usage = message.get("usage") or {}
                raw_usage.update({k: usage[k] for k in _USAGE_KEYS if usage.get(k) is not None})
                builder.usage = anthropic_usage(raw_usage)
                yield UsageUpdate(builder.usage)
            elif kind == "message_stop":
                done = True
                break
            elif kind == "error":
                raise error_from_event(ctx, ev.get("error") or ev)
            # ping and unknown event types are ignored, as the protocol asks
        if not done:
            raise NetworkError(f"{ctx.label}: the stream from {ctx.url} ended before the reply was complete "
                               f"(no message_stop)")
        if stop_reason == "model_context_window_exceeded":
            raise ContextOverflowError(f"{ctx.label}: {ctx.model!r} stopped with model_context_window_exceeded: "
                                       f"the context window is full")
        if stop_reason == "refusal":
            builder.error_message = f"{ctx.label} refused to answer (stop_reason: refusal)"
        return _STOP.get(stop_reason or "end_turn", "stop")

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
