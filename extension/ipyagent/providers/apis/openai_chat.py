"""OpenAI Chat Completions, streamed (reference/peers.md §2a, §2d). Also serves the compatible
servers: Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, DeepSeek, Groq…"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from ipyagent.providers import function_calling_format as fcf
from ipyagent.providers.errors import EmptyStreamError, NetworkError
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
from ipyagent.providers.transform import image_data_url, openai_tool_id, request_history
from ipyagent.providers.transport.http import ErrorContext, error_from_event, stream_object
from ipyagent.providers.transport.message import MessageBuilder, empty_usage
from ipyagent.providers.transport.sse import SSEEvent
from ipyagent.providers.transport.stop_reasons import outcome, unknown_note
from ipyagent.providers.transport.streaming import EventLoop, HTTPProvider
from ipyagent.session.messages import text_block, text_of
from ipyagent.shapes import ContentBlock, Usage

OPENAI_BASE_URL = "https://api.openai.com/v1"
# The fields compatible servers put their reasoning in: DeepSeek, vLLM and llama.cpp
# ``reasoning_content``; OpenRouter, Groq and Ollama ``reasoning``. The thinking block keeps the
# field's name (Pi's ``thinkingSignature`` for this API), and the reasoning goes back in it.
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


class _ImageURL(TypedDict):
    url: str


class _ChatPart(TypedDict, total=False):
    """A part of a user message's content: ``text`` or ``image_url``."""

    type: str
    text: str
    image_url: _ImageURL


class _WireFunction(TypedDict):
    name: str
    arguments: str


class _WireCall(TypedDict, total=False):
    """A tool call of an assistant message as it goes back."""

    id: str
    type: str
    function: _WireFunction
    extra_content: dict[str, object]


class _ChatMessage(TypedDict, total=False):
    """One message of the request's ``messages`` (the reasoning fields of ``_wire_reasoning`` beside)."""

    role: str
    content: str | list[_ChatPart] | None
    tool_calls: list[_WireCall]
    tool_call_id: str


def openai_usage(raw: dict[str, Any]) -> Usage:
    prompt = raw.get("prompt_tokens") or 0
    output = raw.get("completion_tokens") or 0
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0  # DeepSeek: the latter
    usage = empty_usage()
    usage.update({"input": max(0, prompt - cached), "output": output, "cacheRead": cached,
                  "totalTokens": prompt + output})
    return usage


def _user_content(content: Any) -> str | list[_ChatPart]:
    if isinstance(content, str):
        return content
    blocks = [b for b in content or [] if b.get("type") in ("text", "image")]
    if all(b["type"] == "text" for b in blocks):
        return text_of(blocks, "\n")  # plain strings suit every compatible server
    return [{"type": "text", "text": b["text"]} if b["type"] == "text"
            else {"type": "image_url", "image_url": {"url": image_data_url(b)}} for b in blocks]


def _wire_call(block: ContentBlock, same: bool) -> _WireCall:
    call: _WireCall = {"id": block["id"], "type": "function",
            "function": {"name": block["name"], "arguments": json.dumps(block.get("arguments") or {})}}
    if same and block.get("extraContent"):
        call["extra_content"] = block["extraContent"]
    return call


def _wire_reasoning(content: list[ContentBlock]) -> dict[str, str | list[Any]]:
    """The reasoning of an assistant turn in the fields its server sent it in. ``prepare_history``
    leaves thinking blocks only on turns of the model that wrote them (the only one that reads
    them back): DeepSeek answers 400 to a tool loop without them, OpenRouter keeps a model's
    reasoning across calls with ``reasoning_details``."""
    wire: dict[str, str | list[Any]] = {}
    for block in content:
        source = block.get("thinkingSignature") if block.get("type") == "thinking" else None
        if source in REASONING_FIELDS:
            wire[source] = str(wire.get(source, "")) + (block.get("thinking") or "")
        if block.get("type") == "thinking" and block.get("reasoningDetails"):
            details = wire.setdefault("reasoning_details", [])
            assert isinstance(details, list)  # the one key that holds a list
            details.extend(block["reasoningDetails"])
    return wire


def merge_reasoning_details(held: list[dict[str, Any]], pieces: list[Any]) -> None:
    """Add OpenRouter's streamed ``reasoning_details`` pieces to ``held``: a piece with the index
    and type of the last one held continues it (its text, summary or data is appended)."""
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        last = held[-1] if held else None
        if last is not None and last.get("index") == piece.get("index") and last.get("type") == piece.get("type"):
            for key, value in piece.items():
                if key in ("text", "summary", "data") and isinstance(value, str):
                    last[key] = (last.get(key) or "") + value
                elif value is not None:
                    last[key] = value
        else:
            held.append(dict(piece))


def to_openai_messages(request: ModelRequest, provider: str, api: str,
                       results_as_user: bool = False) -> list[_ChatMessage]:
    """The request's history as Chat Completions messages. ``results_as_user``: tool results go
    as user messages (llama-cpp-python's function-calling format leaves ``tool`` messages out)."""
    out: list[_ChatMessage] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    images: list[_ChatPart] = []  # images from tool results, sent after the tool messages
    history = request_history(request, api=api, provider=provider, tool_id=openai_tool_id)
    for message in history:
        role = message["role"]
        if role != "toolResult" and images:
            out.append({"role": "user", "content": [{"type": "text", "text": "Images from the tool results above:"},
                                                    *images]})
            images = []
        if role == "user":
            out.append({"role": "user", "content": _user_content(message.get("content"))})
        elif role == "assistant":
            text = text_of(message["content"])
            calls = [_wire_call(b, same=message.get("provider") == provider)
                     for b in message["content"] if b["type"] == "toolCall"]
            # "" rather than null beside tool calls: OpenAI takes either, llama-cpp-python only a string
            wire: _ChatMessage = {"role": "assistant", "content": text or ("" if calls else None)}
            if calls:
                wire["tool_calls"] = calls
            if text or calls:
                out.append(cast(_ChatMessage, {**wire, **_wire_reasoning(message["content"])}))
        elif role == "toolResult":
            content = message.get("content")
            blocks: list[ContentBlock] = [text_block(content)] if isinstance(content, str) else content or []
            text = text_of(blocks, "\n")
            images += [{"type": "image_url", "image_url": {"url": image_data_url(b)}}
                       for b in blocks if b.get("type") == "image"]
            if results_as_user:
                out.append({"role": "user",
                            "content": fcf.result_as_user_text(message.get("toolName") or "", text or "(no output)")})
            else:
                out.append({"role": "tool", "tool_call_id": message["toolCallId"], "content": text or "(no output)"})
    if images:
        out.append({"role": "user", "content": [{"type": "text", "text": "Images from the tool results above:"},
                                                *images]})
    return out


def openai_headers(key: str | None) -> dict[str, str]:
    """The headers of OpenAI's APIs (Chat Completions and Responses): JSON in, a stream out, the
    key as a bearer token."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


@dataclass
class _ChatStream:
    """What one streamed reply has said so far."""

    calls: list[int] = field(default_factory=list)  # builder positions of the tool calls, in call order
    by_index: dict[int, int] = field(default_factory=dict)  # wire index -> call ordinal
    by_id: dict[str, int] = field(default_factory=dict)
    finish: str | None = None
    done: bool = False
    seen: bool = False


class OpenAIChatProvider(HTTPProvider):
    name = "openai"
    api = "openai-completions"
    label = "OpenAI"
    default_base_url = OPENAI_BASE_URL
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    discovers_window = True  # compatible servers publish their windows (providers/window_discovery.py)

    def __init__(self, *, stream: bool = True, **options: Any):
        super().__init__(**options)
        # stream=False asks for each reply whole: no text as it arrives, but servers that send no
        # usage in streams (llama-cpp-python) report it in complete answers
        self.streaming = bool(stream)
        # set once a reply's tool call shows llama-cpp-python's chatml-function-calling format
        # (providers/function_calling_format.py): said once, undone from then on
        self.function_calling_format = False

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self, key: str | None) -> dict[str, str]:
        return openai_headers(key)

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(
                request, self.name, self.api,
                results_as_user=self.function_calling_format
                or fcf.calls_of_the_format(request.messages, self.name, request.model)),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        whole = request.options.get("stream") is False or (bool(request.tools) and self.tools_whole)
        if not self.streaming or whole:
            body = self.unstreamed(body)
        if request.tools:
            body["tools"] = [{"type": "function", "function": t.to_dict()} for t in request.tools]
            # OpenAI's default with tools, said aloud: llama-cpp-python's function-calling chat
            # format takes a missing tool_choice for "none" and leaves the tools out of the prompt
            body["tool_choice"] = "auto"
        if request.max_tokens:
            # api.openai.com wants the new name; compatible servers mostly know only the old one
            field = "max_completion_tokens" if "api.openai.com" in self.base_url else "max_tokens"
            body[field] = request.max_tokens
        info = request.info()
        reasoning_model = bool(info and info.reasoning)
        # OpenAI's reasoning models reject any temperature but the default
        if request.temperature is not None and not (reasoning_model and "api.openai.com" in self.base_url):
            body["temperature"] = request.temperature
        if request.reasoning and reasoning_model:
            body["reasoning_effort"] = request.reasoning
        if request.options.get("session_id") and "api.openai.com" in self.base_url:
            body["prompt_cache_key"] = str(request.options["session_id"])  # routes turns to a warm cache
        return request.with_extra_body(body)

    def unstreamed(self, body: dict[str, Any]) -> dict[str, Any]:
        plain = {k: v for k, v in body.items() if k != "stream_options"}
        plain["stream"] = False
        return plain

    def completion_events(self, answer: Any) -> Iterator[SSEEvent]:
        """A ``chat.completion`` object as the one chunk (plus ``[DONE]``) a stream would carry."""
        if answer.get("error"):
            yield "error", json.dumps(answer["error"]).encode()
            return
        choices = answer.get("choices") or []
        chunk: dict[str, Any] = {"id": answer.get("id"), "usage": answer.get("usage")}
        if choices:
            choice = choices[0]
            message = choice.get("message") or {}
            delta = {k: message.get(k) for k in ("content", "refusal", *REASONING_FIELDS, "reasoning_details")
                     if message.get(k)}
            calls = message.get("tool_calls") or []
            if calls:
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(calls)]
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason") or ""}]
        yield None, json.dumps(chunk).encode()
        yield None, b"[DONE]"

    def repair(self, body: dict[str, Any], status: int, text: str) -> dict[str, Any] | None:
        # older compatible servers reject the usage option: stream without it (usage then unknown)
        if status == 400 and "stream_options" in text and "stream_options" in body:
            return {k: v for k, v in body.items() if k != "stream_options"}
        return super().repair(body, status, text)

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        state = _ChatStream()
        for event, data in sse:
            state.seen = True
            if cancel is not None and cancel.is_set():
                return "aborted"
            if data == b"[DONE]":
                state.done = True
                break
            chunk = stream_object(ctx, data)
            if event == "error" or chunk.get("error"):  # some servers send "error": null on every chunk
                if state.finish is not None:
                    # the reply had ended (OpenRouter's "Token limit reached" follows finish_reason
                    # "length"): keep it as it ended and say what came after
                    error = chunk.get("error") or chunk
                    yield ProviderNote(f"{ctx.label} sent an error after the reply had ended, which is kept as it "
                                       f"ended: {ctx.scrub(str(error.get('message') or error))}")
                    break
                raise error_from_event(ctx, chunk.get("error") or chunk)
            yield from self._chunk(chunk, builder, state)
        if not state.seen:
            raise EmptyStreamError(f"{ctx.label}: the stream from {ctx.url} ended before its first event")
        if not state.done and state.finish is None:
            raise NetworkError(f"{ctx.label}: the stream from {ctx.url} ended before the reply was complete "
                               f"(no finish_reason and no [DONE])")
        for ordinal, position in enumerate(state.calls):
            block = builder.finish_block(position)
            if not block["id"]:
                block["id"] = f"call_{uuid.uuid4().hex[:24]}"
            if fcf.made_by_the_format(block["id"], block["name"]) and "rawArguments" not in block:
                yield from self._unescape(builder, position)
            yield ToolCallEnd(ordinal, block["id"], block["name"], block["arguments"])
        end = outcome(self.api, ctx.label, state.finish, bool(state.calls))
        if end.unknown is not None:
            builder.extra["providerStopReason"] = end.unknown
            yield ProviderNote(unknown_note(ctx.label, "stop reason", end.unknown))
        builder.error_message = end.error
        return end.stop

    def _chunk(self, chunk: dict[str, Any], builder: MessageBuilder, state: _ChatStream) -> Iterator[Any]:
        """One chunk's text, refusal, reasoning, tool-call pieces, finish reason and usage."""
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):  # a refusal is the reply's text (as the Responses API has it)
                text = delta.get(key)
                if text and isinstance(text, str):
                    builder.text(text)
                    yield TextDelta(text)
            yield from self._reasoning(delta, builder)
            for call in delta.get("tool_calls") or []:
                yield from self._tool_delta(call, builder, state.calls, state.by_index, state.by_id)
            if choice.get("finish_reason"):
                state.finish = choice["finish_reason"]
        usage = chunk.get("usage")
        if usage:
            builder.usage = openai_usage(usage)
            yield UsageUpdate(builder.usage)
        if builder.response_id is None and chunk.get("id"):
            builder.response_id = chunk["id"]

    @staticmethod
    def _reasoning(delta: dict[str, Any], builder: MessageBuilder) -> Iterator[Any]:
        source = next((f for f in REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        details = delta.get("reasoning_details")
        if source is None and not details:
            return
        piece = delta[source] if source else ""
        block = builder.thinking(piece, source or "reasoning")
        if details and isinstance(details, list):
            merge_reasoning_details(block.setdefault("reasoningDetails", []), details)
        if piece:
            yield ThinkingDelta(piece)

    def _unescape(self, builder: MessageBuilder, position: int) -> Iterator[ProviderNote]:
        """Undo the HTML escaping the model copied into a call's arguments (once per kernel, said)."""
        builder.pieces[position] = [json.dumps(fcf.unescaped(builder.content[position]["arguments"]))]
        builder.finish_block(position)
        if not self.function_calling_format:
            self.function_calling_format = True
            yield ProviderNote(fcf.NOTE)

    @staticmethod
    def _tool_delta(call: dict[str, Any], builder: MessageBuilder, calls: list[int], by_index: dict[int, int],
                    by_id: dict[str, int]) -> Iterator[Any]:
        index = call.get("index")
        call_id = call.get("id") or ""
        function = call.get("function") or {}
        ordinal: int | None
        if index is not None:
            ordinal = by_index.get(index)
            # a server that numbers every call 0 still gives each a new id
            if ordinal is not None and call_id and builder.content[calls[ordinal]]["id"] not in ("", call_id):
                ordinal = None
        elif call_id:
            ordinal = by_id.get(call_id)
        else:
            ordinal = len(calls) - 1 if calls else None  # no index, no id: continues the last call
        if ordinal is None:
            ordinal = len(calls)
            calls.append(builder.tool_call(call_id, function.get("name") or ""))
            if index is not None:
                by_index[index] = ordinal
            if call_id:
                by_id[call_id] = ordinal
            yield ToolCallStart(ordinal, call_id, function.get("name") or "")
        block = builder.content[calls[ordinal]]
        if call.get("extra_content"):  # Gemini's thought_signature: must go back with the call
            block["extraContent"] = call["extra_content"]
        if call_id and not block["id"]:
            block["id"] = call_id
        if function.get("name") and not block["name"]:
            block["name"] = function["name"]
        arguments = function.get("arguments")
        if arguments:
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            builder.pieces[calls[ordinal]].append(arguments)
            yield ToolCallDelta(ordinal, arguments)
