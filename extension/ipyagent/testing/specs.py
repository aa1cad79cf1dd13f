"""What the fake server answers: reply and fault specs, and how they look on each wire protocol."""

from __future__ import annotations

import base64
import json
import math
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict


@dataclass
class ToolCallSpec:
    name: str
    arguments: Mapping[str, object]
    id: str | None = None


@dataclass
class Reply:
    """A successful streamed reply. ``usage`` overrides the computed numbers, with Pi's names
    (``input``, ``output``, ``cacheRead``, ``cacheWrite``). ``stop_reason`` is Pi's name
    (stop/length/toolUse) or a raw wire value (``content_filter``, ``model_context_window_exceeded``)."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, int] | None = None
    stop_reason: str | None = None
    chunk_size: int | None = None  # characters per text/argument chunk; None: the server's default
    delay: float | None = None  # seconds between chunks; None: the server's default
    omit_tool_index: bool = False  # like Ollama / Gemini's OpenAI endpoint
    usage_choices: str = "empty"  # OpenAI usage chunk: "empty" ([]), "null", or "missing"
    signature: str = "fake-signature"
    hold: threading.Event | None = None  # the stream pauses after its first event until it is set

    def output_chars(self) -> int:
        return len(self.text) + len(self.thinking) + sum(len(c.name) + len(json.dumps(c.arguments))
                                                         for c in self.tool_calls)


@dataclass
class Fault:
    """A failure. ``kind``: ``status`` (an HTTP error), ``overflow`` (the provider's over-window
    error for a ``window``, in the style ``error_type`` or the protocol's), ``cut`` (the stream stops after
    ``after_chunks`` events; ``clean`` ends the HTTP body properly, else the connection just
    drops), ``malformed`` (a broken JSON line after ``after_chunks`` events) or ``stream_error``
    (an error event inside a 200 stream), ``empty`` (a 200 stream that closes before its first
    event) or ``hangup`` (the connection closes with no answer). ``body`` None means the
    provider's usual body; ``""`` means no body at all."""

    kind: str = "status"
    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    after_chunks: int = 3
    clean: bool = False
    reply: Reply = field(default_factory=lambda: Reply(text="This reply will be cut short before it ends."))
    error_type: str | None = None
    window: int = 8192


@dataclass
class RawStream:
    """Exactly these bytes as a 200 ``text/event-stream`` body (strings are encoded): for replaying
    a recorded stream or testing a parser against odd servers."""

    chunks: list[bytes | str]
    delay: float | None = None


class _CallFunction(TypedDict, total=False):
    name: str
    arguments: str


class _CallChunk(TypedDict, total=False):
    """A piece of a streamed Chat Completions tool call (``index`` is left out as Ollama does)."""

    index: int
    id: str
    type: str
    function: _CallFunction


_OPENAI_STOP = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}
_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), max(1, size)):
        yield text[start:start + size]


def sse(obj: Any, event: str | None = None) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + data + b"\n\n"


def openai_stream(reply: Reply, model: str, usage: dict[str, int], chunk_size: int,
                  with_usage: bool = True) -> Iterator[bytes]:
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "created": 0,
            "model": model}

    def chunk(delta: Mapping[str, object], finish: str | None = None) -> bytes:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": None})

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.thinking, chunk_size):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.text, chunk_size):
        yield chunk({"content": piece})
    for i, call in enumerate(reply.tool_calls):
        first: _CallChunk = {"index": i, "id": call.id or f"call_{uuid.uuid4().hex[:16]}", "type": "function",
                             "function": {"name": call.name, "arguments": ""}}
        if reply.omit_tool_index:
            del first["index"]
        yield chunk({"tool_calls": [first]})
        for piece in _pieces(json.dumps(call.arguments), chunk_size):
            fragment: _CallChunk = {"function": {"arguments": piece}}
            if not reply.omit_tool_index:
                fragment["index"] = i
            yield chunk({"tool_calls": [fragment]})
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    yield chunk({}, _OPENAI_STOP.get(stop, stop))
    if not with_usage:  # llama-cpp-python: no usage chunk, whatever stream_options asks
        yield sse(b"[DONE]")
        return
    prompt = usage["input"] + usage["cacheRead"]
    wire_usage = {"prompt_tokens": prompt, "completion_tokens": usage["output"],
                  "total_tokens": prompt + usage["output"],
                  "prompt_tokens_details": {"cached_tokens": usage["cacheRead"]}}
    last: dict[str, object] = {**base, "usage": wire_usage}
    if reply.usage_choices == "empty":
        last["choices"] = []
    elif reply.usage_choices == "null":
        last["choices"] = None
    yield sse(last)
    yield sse(b"[DONE]")


def openai_completion(reply: Reply, model: str, usage: dict[str, int]) -> dict[str, object]:
    """The whole reply as one ``chat.completion`` answer (a request with ``"stream": false``)."""
    message: dict[str, object] = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [{"id": call.id or f"call_{uuid.uuid4().hex[:16]}", "type": "function",
                                  "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                                 for call in reply.tool_calls]
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    prompt = usage["input"] + usage["cacheRead"]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": _OPENAI_STOP.get(stop, stop)}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": usage["output"],
                      "total_tokens": prompt + usage["output"]}}


def anthropic_stream(reply: Reply, model: str, usage: dict[str, int], chunk_size: int) -> Iterator[bytes]:
    start_usage = {"input_tokens": usage["input"], "cache_creation_input_tokens": usage["cacheWrite"],
                   "cache_read_input_tokens": usage["cacheRead"], "output_tokens": 1}
    yield sse({"type": "message_start", "message": {
        "id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None, "usage": start_usage}}, "message_start")
    yield sse({"type": "ping"}, "ping")
    index = 0

    def block(start: Mapping[str, object], deltas: Iterator[Mapping[str, object]]) -> Iterator[bytes]:
        yield sse({"type": "content_block_start", "index": index, "content_block": start}, "content_block_start")
        for delta in deltas:
            yield sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")

    if reply.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(reply.thinking, chunk_size)]
        deltas.append({"type": "signature_delta", "signature": reply.signature})
        yield from block({"type": "thinking", "thinking": "", "signature": ""}, iter(deltas))
        index += 1
    if reply.text:
        yield from block({"type": "text", "text": ""},
                         ({"type": "text_delta", "text": p} for p in _pieces(reply.text, chunk_size)))
        index += 1
    for call in reply.tool_calls:
        start = {"type": "tool_use", "id": call.id or f"toolu_{uuid.uuid4().hex[:20]}", "name": call.name, "input": {}}
        yield from block(start, ({"type": "input_json_delta", "partial_json": p}
                                 for p in _pieces(json.dumps(call.arguments), chunk_size)))
        index += 1
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    yield sse({"type": "message_delta",
               "delta": {"stop_reason": _ANTHROPIC_STOP.get(stop, stop), "stop_sequence": None},
               "usage": {"output_tokens": usage["output"]}}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


def _response_usage(usage: dict[str, int], reasoning: int) -> dict[str, object]:
    prompt = usage["input"] + usage["cacheRead"]
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": usage["cacheRead"]},
            "output_tokens": usage["output"], "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + usage["output"]}


def encrypted_reasoning(thinking: str, signature: str) -> str:
    """The fake's stand-in for an encrypted reasoning item: opaque, but the test can recognise it."""
    return "gAAAAB" + base64.b64encode(json.dumps({"sig": signature, "thinking": thinking}).encode()).decode()


class _ResponsesEvents:
    """The events of one streamed Responses reply: numbered, and the output items so far."""

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self.seq = iter(range(1_000_000))
        self.output: list[Mapping[str, object]] = []

    def event(self, kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(self.seq), **fields}, kind)

    def reasoning(self, thinking: str, signature: str) -> Iterator[bytes]:
        index, item_id = len(self.output), f"rs_{uuid.uuid4().hex[:24]}"
        yield self.event("response.output_item.added", output_index=index,
                         item={"id": item_id, "type": "reasoning", "summary": []})
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        yield self.event("response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""})
        for piece in _pieces(thinking, self.chunk_size):
            yield self.event("response.reasoning_summary_text.delta", **where, delta=piece)
        yield self.event("response.reasoning_summary_text.done", **where, text=thinking)
        yield self.event("response.reasoning_summary_part.done", **where,
                         part={"type": "summary_text", "text": thinking})
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": thinking}],
                "encrypted_content": encrypted_reasoning(thinking, signature)}
        self.output.append(item)
        yield self.event("response.output_item.done", output_index=index, item=item)

    def message(self, text: str) -> Iterator[bytes]:
        index, item_id = len(self.output), f"msg_{uuid.uuid4().hex[:24]}"
        item: dict[str, object] = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress",
                                   "content": []}
        yield self.event("response.output_item.added", output_index=index, item=item)
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield self.event("response.content_part.added", **where,
                         part={"type": "output_text", "text": "", "annotations": []})
        for piece in _pieces(text, self.chunk_size):
            yield self.event("response.output_text.delta", **where, delta=piece, logprobs=[])
        part: dict[str, object] = {"type": "output_text", "text": text, "annotations": []}
        yield self.event("response.output_text.done", **where, text=text, logprobs=[])
        yield self.event("response.content_part.done", **where, part=part)
        item = {**item, "status": "completed", "content": [part]}
        self.output.append(item)
        yield self.event("response.output_item.done", output_index=index, item=item)

    def function_call(self, call: ToolCallSpec) -> Iterator[bytes]:
        index, item_id = len(self.output), f"fc_{uuid.uuid4().hex[:24]}"
        arguments = json.dumps(call.arguments)
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call.id or f"call_{uuid.uuid4().hex[:24]}", "name": call.name}
        yield self.event("response.output_item.added", output_index=index, item=item)
        for piece in _pieces(arguments, self.chunk_size):
            yield self.event("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                             delta=piece)
        yield self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                         arguments=arguments)
        item = {**item, "status": "completed", "arguments": arguments}
        self.output.append(item)
        yield self.event("response.output_item.done", output_index=index, item=item)


def responses_stream(reply: Reply, model: str, usage: dict[str, int], chunk_size: int) -> Iterator[bytes]:
    """A reply as the Responses API streams it: ``response.created``, then per output item
    ``output_item.added`` / deltas / ``output_item.done``, then ``response.completed`` (or
    ``response.incomplete``) carrying the usage."""
    events = _ResponsesEvents(chunk_size)
    shell = {"id": f"resp_{uuid.uuid4().hex[:24]}", "object": "response", "created_at": 0, "model": model,
             "status": "in_progress", "output": [], "usage": None, "error": None, "incomplete_details": None,
             "store": False}
    yield events.event("response.created", response=shell)
    yield events.event("response.in_progress", response=shell)
    if reply.thinking:
        yield from events.reasoning(reply.thinking, reply.signature)
    if reply.text:
        yield from events.message(reply.text)
    for call in reply.tool_calls:
        yield from events.function_call(call)
    reasoning = (reply.usage or {}).get("reasoning", math.ceil(len(reply.thinking) / 4))
    final = {**shell, "status": "completed", "output": events.output, "usage": _response_usage(usage, reasoning)}
    stop = reply.stop_reason or "stop"
    if stop in ("length", "max_output_tokens", "content_filter"):
        reason = "content_filter" if stop == "content_filter" else "max_output_tokens"
        yield events.event("response.incomplete", response={**final, "status": "incomplete",
                                                            "incomplete_details": {"reason": reason}})
    else:
        yield events.event("response.completed", response=final)


def responses_failed_stream(error: Mapping[str, object], model: str) -> Iterator[bytes]:
    """A 200 stream that fails: ``response.created`` then ``response.failed`` with ``error``."""
    shell = {"id": f"resp_{uuid.uuid4().hex[:24]}", "object": "response", "created_at": 0, "model": model,
             "status": "in_progress", "output": [], "usage": None, "error": None}
    yield sse({"type": "response.created", "sequence_number": 0, "response": shell}, "response.created")
    yield sse({"type": "response.failed", "sequence_number": 1,
               "response": {**shell, "status": "failed", "error": error}}, "response.failed")


RESPONSES_OVERFLOW_MESSAGE = ("Your input exceeds the context window of this model. Please adjust your input and "
                              "try again.")


def error_body(protocol: str, status: int, error_type: str | None = None,
               message: str | None = None) -> dict[str, object]:
    """The body each provider really sends for ``status``."""
    if protocol == "anthropic":
        kind = error_type or {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                              429: "rate_limit_error", 529: "overloaded_error"}.get(
            status, "api_error" if status >= 500 else "invalid_request_error")
        text = message or {401: "invalid x-api-key", 429: "Number of request tokens has exceeded your rate limit.",
                           529: "Overloaded", 404: "model: not found"}.get(status, f"fake {kind}")
        return {"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_fake"}
    kind = error_type or {401: "invalid_request_error", 429: "requests", 404: "invalid_request_error"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error")
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded", 404: "model_not_found"}.get(status)
    text = message or {401: "Incorrect API key provided: sk-fa***********key. You can find your API key at "
                            "https://platform.openai.com/account/api-keys.",
                       429: "Rate limit reached for requests. Please try again later.",
                       404: "The model does not exist or you do not have access to it."}.get(
        status, "The server had an error while processing your request. Sorry about that!")
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def overflow_response(style: str, tokens: int, window: int, max_tokens: int | None = None) -> tuple[int, Any]:
    """(status, body) of a real over-window answer: ``openai``, ``anthropic``, ``llamacpp``,
    ``cerebras`` (a 400 without body), ``responses`` (the Responses API; the fake server sends
    its ``responses_failed`` variant as a ``response.failed`` event in a 200 stream) or
    ``llama-cpp-python`` (its answer to a request without streaming)."""
    if style == "llama-cpp-python":
        completion = max_tokens or 0
        return 400, {"error": {"message": f"This model's maximum context length is {window} tokens. However, you "
                                          f"requested {tokens + completion} tokens ({tokens} in the messages, "
                                          f"{completion} in the completion). Please reduce the length of the "
                                          f"messages or completion.",
                               "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
    if style == "anthropic":
        return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": f"prompt is too long: {tokens} tokens > {window} maximum"},
                     "request_id": "req_fake"}
    if style == "llamacpp":
        return 400, {"error": {"code": 400, "type": "exceed_context_size_error",
                               "message": f"request ({tokens} tokens) exceeds the available context size "
                                          f"({window} tokens), try increasing it",
                               "n_prompt_tokens": tokens, "n_ctx": window}}
    if style == "cerebras":
        return 400, ""
    if style in ("responses", "responses_failed"):  # the Responses API (in a stream: response.failed)
        return 400, {"error": {"message": RESPONSES_OVERFLOW_MESSAGE, "type": "invalid_request_error",
                               "param": "input", "code": "context_length_exceeded"}}
    return 400, {"error": {"message": f"This model's maximum context length is {window} tokens. However, your "
                                      f"messages resulted in {tokens} tokens. Please reduce the length of the "
                                      f"messages.",
                           "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def stream_error_event(protocol: str, error_type: str | None) -> bytes:
    if protocol == "responses":
        return sse({"type": "error", "sequence_number": 999, "code": error_type or "server_error",
                    "message": "The server had an error while processing your request.", "param": None}, "error")
    if protocol == "anthropic":
        kind = error_type or "overloaded_error"
        return sse({"type": "error", "error": {"type": kind, "message": "Overloaded"}}, "error")
    return sse({"error": {"message": "The server had an error while processing your request.",
                          "type": error_type or "server_error", "code": None}})
