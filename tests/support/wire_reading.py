"""A second, independent reading of a recorded response's bytes, written from the APIs' documents
(reference/peers.md Part 2) and shared with none of ``ipyagent.providers``: the tests compare what
the providers parsed with what this reads.

It decompresses the body itself, splits server-sent events on blank lines with a regular
expression, and collects per API: the text, the refusal, the reasoning, the tool calls, the usage
(Pi's split: input without cached tokens, cacheRead, cacheWrite, output), the stop reason as the
server wrote it, and any error the server sent.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from support.replay_server import Recording

_BLANK_LINE = re.compile(r"\r?\n\r?\n")


@dataclass
class Reading:
    text: str = ""
    refusal: str = ""
    thinking: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    redacted: int = 0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, arguments)
    server_blocks: list[str] = field(default_factory=list)  # Anthropic blocks the server ran itself
    usage: dict[str, int] = field(default_factory=dict)
    stop: str | None = None  # as the server wrote it
    error: dict[str, Any] | None = None  # {"status", "code", "type", "message"}
    unknown: list[str] = field(default_factory=list)  # block or item types outside the documented set


def body_text(rec: Recording) -> str:
    data = rec.body
    if rec.headers.get("content-encoding", "").lower() == "gzip":
        data = zlib.decompress(data, 31)
    return data.decode("utf-8")


def events(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of a server-sent-event stream, comments and ``[DONE]`` left out."""
    out = []
    for block in _BLANK_LINE.split(text):
        data = [line[5:].lstrip(" ") for line in re.split(r"\r?\n", block) if line.startswith("data:")]
        payload = "\n".join(data).strip()
        if payload and payload != "[DONE]":
            out.append(json.loads(payload))
    return out


def read(rec: Recording) -> Reading:
    text = body_text(rec)
    if rec.status >= 400:
        return _http_error(rec.status, text)
    reader = {"anthropic-messages": _anthropic, "openai-completions": _chat, "openai-responses": _responses}[rec.api]
    return reader(events(text) if rec.streamed else [json.loads(text)], rec.streamed)


def continued(parts: list[Reading]) -> Reading:
    """The reading of one reply that came over several responses (Anthropic's ``pause_turn``, the
    turn sent back and continued): the parts in order, the usage added up (every request is
    billed), the last part's stop reason."""
    whole = Reading(stop=parts[-1].stop, error=parts[-1].error)
    for part in parts:
        whole.text += part.text
        whole.refusal += part.refusal
        whole.thinking += part.thinking
        whole.signatures += part.signatures
        whole.redacted += part.redacted
        whole.calls += part.calls
        whole.server_blocks += part.server_blocks
        whole.unknown += part.unknown
        for key, value in part.usage.items():
            whole.usage[key] = whole.usage.get(key, 0) + value
    return whole


def _http_error(status: int, text: str) -> Reading:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = {}
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else {}
    error = error if isinstance(error, dict) else {"message": str(error)}
    return Reading(error={"status": status, "code": error.get("code"), "type": error.get("type"),
                          "message": error.get("message")})


# ---- Anthropic Messages ------------------------------------------------------------------------

_ANTHROPIC_KNOWN = {"text", "thinking", "redacted_thinking", "tool_use"}
_ANTHROPIC_SERVER = {"server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
                     "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
                     "mcp_tool_use", "mcp_tool_result"}


def _anthropic_usage(raw: dict[str, Any], into: dict[str, int]) -> None:
    for wire, pi in (("input_tokens", "input"), ("output_tokens", "output"),
                     ("cache_read_input_tokens", "cacheRead"), ("cache_creation_input_tokens", "cacheWrite")):
        if raw.get(wire) is not None:
            into[pi] = raw[wire]


def _anthropic(payloads: list[dict[str, Any]], streamed: bool) -> Reading:
    reading = Reading()
    if not streamed:
        message = payloads[0]
        blocks = message.get("content") or []
        for block in blocks:
            _anthropic_block(block, reading, block.get("input"))
        _anthropic_usage(message.get("usage") or {}, reading.usage)
        reading.stop = message.get("stop_reason")
        return reading
    started: dict[int, dict[str, Any]] = {}
    pieces: dict[int, list[str]] = {}
    for ev in payloads:
        kind = ev.get("type")
        if kind == "message_start":
            _anthropic_usage(ev["message"].get("usage") or {}, reading.usage)
        elif kind == "content_block_start":
            started[ev["index"]] = dict(ev["content_block"])
            pieces[ev["index"]] = []
        elif kind == "content_block_delta":
            delta = ev["delta"]
            block = started[ev["index"]]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif delta.get("type") == "input_json_delta":
                pieces[ev["index"]].append(delta.get("partial_json") or "")
        elif kind == "content_block_stop":
            block = started[ev["index"]]
            joined = "".join(pieces[ev["index"]])
            _anthropic_block(block, reading, json.loads(joined) if joined.strip() else block.get("input"))
        elif kind == "message_delta":
            reading.stop = (ev.get("delta") or {}).get("stop_reason") or reading.stop
            _anthropic_usage(ev.get("usage") or {}, reading.usage)
        elif kind == "error":
            reading.error = {"status": None, **ev["error"]}
    return reading


def _anthropic_block(block: dict[str, Any], reading: Reading, arguments: Any) -> None:
    kind = block.get("type", "")
    if kind == "text":
        reading.text += block.get("text", "")
    elif kind == "thinking":
        reading.thinking.append(block.get("thinking", ""))
        reading.signatures.append(block.get("signature", ""))
    elif kind == "redacted_thinking":
        reading.redacted += 1
    elif kind == "tool_use":
        reading.calls.append((block["name"], arguments or {}))
    elif kind in _ANTHROPIC_SERVER:
        reading.server_blocks.append(kind)
    else:
        reading.unknown.append(kind)


# ---- OpenAI Chat Completions (and the compatible servers) -------------------------------------

_REASONING_FIELDS = ("reasoning_content", "reasoning")


def _chat_usage(raw: dict[str, Any]) -> dict[str, int]:
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0
    return {"input": raw.get("prompt_tokens", 0) - cached, "output": raw.get("completion_tokens", 0),
            "cacheRead": cached, "cacheWrite": 0}


def _chat(payloads: list[dict[str, Any]], streamed: bool) -> Reading:
    reading = Reading()
    calls: dict[Any, dict[str, Any]] = {}
    thinking = ""
    for chunk in payloads:
        if chunk.get("error"):
            if reading.stop is None:  # an error after the finish reason leaves the reply as it ended
                reading.error = {"status": None, **chunk["error"]}
            break
        if chunk.get("usage"):
            reading.usage = _chat_usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            part = choice.get("delta") if streamed else choice.get("message")
            part = part or {}
            reading.text += part.get("content") or ""
            reading.refusal += part.get("refusal") or ""
            thinking += next((part[f] for f in _REASONING_FIELDS if isinstance(part.get(f), str) and part[f]), "")
            for position, call in enumerate(part.get("tool_calls") or []):
                key = call.get("index", position) if streamed else position
                slot = calls.setdefault(key, {"name": "", "arguments": ""})
                function = call.get("function") or {}
                slot["name"] = slot["name"] or function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                reading.stop = choice["finish_reason"]
    if thinking:
        reading.thinking.append(thinking)
    reading.calls = [(c["name"], json.loads(c["arguments"]) if c["arguments"].strip() else {}) for c in calls.values()]
    return reading


# ---- OpenAI Responses ---------------------------------------------------------------------------

def _responses(payloads: list[dict[str, Any]], streamed: bool) -> Reading:
    reading = Reading()
    final: dict[str, Any] = payloads[0] if not streamed else {}
    for ev in payloads if streamed else []:
        kind = ev.get("type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            final = ev["response"]
        elif kind == "error":
            reading.error = {"status": None, **(ev.get("error") or ev)}
    for item in final.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                reading.text += part.get("text") or ""
                reading.refusal += part.get("refusal") or ""
        elif kind == "reasoning":  # a summary (OpenAI), or the reasoning itself as reasoning_text (DeepSeek)
            summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or [])
            own = "".join(p.get("text", "") for p in item.get("content") or [] if p.get("type") == "reasoning_text")
            reading.thinking.append(summary or own)
            reading.signatures.append(item.get("encrypted_content") or "")
        elif kind == "function_call":
            reading.calls.append((item["name"], json.loads(item.get("arguments") or "{}")))
        else:
            reading.unknown.append(kind or "")
    usage = final.get("usage") or {}
    if usage:
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        reading.usage = {"input": usage["input_tokens"] - cached, "output": usage["output_tokens"],
                         "cacheRead": cached, "cacheWrite": 0}
    reading.stop = final.get("status")
    if final.get("incomplete_details"):
        reading.stop = f"incomplete:{final['incomplete_details'].get('reason')}"
    if final.get("error") and reading.error is None:
        reading.error = {"status": None, **final["error"]}
    return reading
