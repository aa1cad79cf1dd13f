"""How the fake server counts: which requests are summariser calls, a deterministic token
estimate (``ceil(chars / 4)`` of the serialised prompt), and the shared prefix between prompts
that it reports as cached."""

from __future__ import annotations

import json
import math
from typing import Any


def default_summary_detector(body: dict[str, Any]) -> bool:
    """A summariser request: its system prompt presents a summarisation assistant (Pi's and
    ipyagent's do), or its last message carries a ``<conversation>`` transcript."""
    system = body.get("system") or body.get("instructions")  # Anthropic / the Responses API
    if isinstance(system, list):
        system = " ".join(b.get("text", "") for b in system if isinstance(b, dict))
    messages = body.get("messages") or body.get("input") or []
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not system and messages and messages[0].get("role") == "system":
        system = messages[0].get("content")
    if isinstance(system, str) and "summarization assistant" in system.lower():
        return True
    last = json.dumps(messages[-1]) if messages else ""
    return "<conversation>" in last


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def prompt_pieces(body: dict[str, Any], protocol: str) -> tuple[list[str], int]:
    """The prompt as prefix-stable pieces (tools, system, each message), and how many pieces lie
    before Anthropic's last cache breakpoint."""
    tools = body.get("tools") or []
    pieces = [json.dumps(_strip_cache_control(tools))]
    marked = 1 if "cache_control" in json.dumps(tools) else 0
    if protocol == "anthropic":
        system = body.get("system") or ""
        pieces.append(json.dumps(_strip_cache_control(system)))
        if "cache_control" in json.dumps(system):
            marked = len(pieces)
    elif protocol == "responses":
        pieces.append(json.dumps(body.get("instructions") or ""))
    items = body.get("input") if protocol == "responses" else body.get("messages")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for message in items or []:
        raw = json.dumps(message)
        pieces.append(json.dumps(_strip_cache_control(message)) if "cache_control" in raw else raw)
        if "cache_control" in raw:
            marked = len(pieces)
    return pieces, marked


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while lo < hi:  # binary search over C-level slice comparisons
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def tokens(chars: int) -> int:
    return math.ceil(chars / 4)
