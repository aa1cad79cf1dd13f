"""OpenAI Chat Completions, streamed (reference/peers.md §2a, §2d). Also serves the compatible
servers: Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, DeepSeek, Groq…"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from ipyagent.providers import function_calling_format as fcf
from ipyagent.providers import models
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
from ipyagent.providers.transform import image_data_url, openai_tool_id, prepare_history
from ipyagent.providers.transport.http import ErrorContext, error_from_event, stream_object
from ipyagent.providers.transport.message import MessageBuilder, empty_usage
from ipyagent.providers.transport.sse import SSEEvent
from ipyagent.providers.transport.streaming import EventLoop, HTTPProvider

OPENAI_BASE_URL = "https://api.openai.com/v1"
_STOP = {"stop": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse",
         "content_filter": "error"}


def openai_usage(raw: dict[str, Any]) -> dict[str, Any]:
    prompt = raw.get("prompt_tokens") or 0
    output = raw.get("completion_tokens") or 0
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0  # DeepSeek: the latter
    usage = empty_usage()
    usage.update(input=max(0, prompt - cached), output=output, cacheRead=cached, totalTokens=prompt + output)
    return usage


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    blocks = [b for b in content or [] if b.get("type") in ("text", "image")]
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)  # plain strings suit every compatible server
    return [{"type": "text", "text": b["text"]} if b["type"] == "text"
            else {"type": "image_url", "image_url": {"url": image_data_url(b)}} for b in blocks]


def _wire_call(block: dict[str, Any], same: bool) -> dict[str, Any]:
    call = {"id": block["id"], "type": "function",
            "function": {"name": block["name"], "arguments": json.dumps(block.get("arguments") or {})}}
    if same and block.get("extraContent"):
        call["extra_content"] = block["extraContent"]
    return call


def to_openai_messages(request: ModelRequest, provider: str, api: str,
                       results_as_user: bool = False) -> list[dict[str, Any]]:
    """The request's history as Chat Completions messages. ``results_as_user``: tool results go
    as user messages (llama-cpp-python's function-calling format leaves ``tool`` messages out)."""
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    images: list[dict[str, Any]] = []  # images from tool results, sent after the tool messages
    history = prepare_history(request.messages, api=api, provider=provider, model=request.model,
                              tool_id=openai_tool_id)
    for message in history:
        role = message["role"]
        if role != "toolResult" and images:
            out.append({"role": "user", "content": [{"type": "text", "text": "Images from the tool results above:"},
                                                    *images]})
            images = []
        if role == "user":
            out.append({"role": "user", "content": _user_content(message.get("content"))})
        elif role == "assistant":
            text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
            calls = [_wire_call(b, same=message.get("provider") == provider)
                     for b in message["content"] if b["type"] == "toolCall"]
            # "" rather than null beside tool calls: OpenAI takes either, llama-cpp-python only a string
            wire: dict[str, Any] = {"role": "assistant", "content": text or ("" if calls else None)}
            if calls:
                wire["tool_calls"] = calls
            if text or calls:
                out.append(wire)
        elif role == "toolResult":
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
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
        reasoning_model = models.is_reasoning(self.name, request.model)
        # OpenAI's reasoning models reject any temperature but the default
        if request.temperature is not None and not (reasoning_model and "api.openai.com" in self.base_url):
            body["temperature"] = request.temperature
        if request.reasoning and reasoning_model:
            body["reasoning_effort"] = request.reasoning
        if request.options.get("session_id") and "api.openai.com" in self.base_url:
            body["prompt_cache_key"] = str(request.options["session_id"])  # routes turns to a warm cache
        body.update(request.options.get("extra_body") or {})
        return body

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
            delta = {k: message.get(k) for k in ("content", "reasoning_content", "reasoning") if message.get(k)}
            calls = message.get("tool_calls") or []
            if calls:
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(calls)]
            chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason") or "stop"}]
        yield None, json.dumps(chunk).encode()
        yield None, b"[DONE]"

    def repair(self, body: dict[str, Any], status: int, text: str) -> dict[str, Any] | None:
        # older compatible servers reject the usage option: stream without it (usage then unknown)
        if status == 400 and "stream_options" in text and "stream_options" in body:
            return {k: v for k, v in body.items() if k != "stream_options"}
        return super().repair(body, status, text)

    def events(self, sse: Iterator[SSEEvent], builder: MessageBuilder, ctx: ErrorContext,
               cancel: threading.Event | None) -> EventLoop:
        calls: list[int] = []  # builder positions of the tool calls, in call order
        by_index: dict[int, int] = {}  # wire index -> call ordinal
        by_id: dict[str, int] = {}
        finish: str | None = None
        done = False
        seen = False
        for event, data in sse:
            seen = True
            if cancel is not None and cancel.is_set():
                return "aborted"
            if data == b"[DONE]":
                done = True
                break
            chunk = stream_object(ctx, data)
            if event == "error" or chunk.get("error"):  # some servers send "error": null on every chunk
                raise error_from_event(ctx, chunk.get("error") or chunk)
            choices = chunk.get("choices")
            if choices:
                choice = choices[0]
                delta = choice.get("delta")
                if delta:
                    text = delta.get("content")
                    if text:
                        builder.text(text)
                        yield TextDelta(text)
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning and isinstance(reasoning, str):
                        builder.thinking(reasoning)
                        yield ThinkingDelta(reasoning)
                    tool_calls = delta.get("tool_calls")
                    if tool_calls:
                        for call in tool_calls:
                            yield from self._tool_delta(call, builder, calls, by_index, by_id)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            usage = chunk.get("usage")
            if usage:
                builder.usage = openai_usage(usage)
                yield UsageUpdate(builder.usage)
            if builder.response_id is None and chunk.get("id"):
                builder.response_id = chunk["id"]
        if not seen:
            raise EmptyStreamError(f"{ctx.label}: the stream from {ctx.url} ended before its first event")
        if not done and finish is None:
            raise NetworkError(f"{ctx.label}: the stream from {ctx.url} ended before the reply was complete "
                               f"(no finish_reason and no [DONE])")
        for ordinal, position in enumerate(calls):
            block = builder.finish_block(position)
            if not block["id"]:
                block["id"] = f"call_{uuid.uuid4().hex[:24]}"
            if fcf.made_by_the_format(block["id"], block["name"]) and "rawArguments" not in block:
                yield from self._unescape(builder, position)
            yield ToolCallEnd(ordinal, block["id"], block["name"], block["arguments"])
        if finish == "content_filter":
            builder.error_message = f"{ctx.label} stopped the reply: content filter"
        stop = _STOP.get(finish or "stop", "stop")
        return "toolUse" if calls and stop == "stop" else stop

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
