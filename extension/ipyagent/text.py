"""Small text helpers every layer shares: a text's length as JavaScript counts it, Pi's chars/4
token estimate, one short line of a text, and a clip that keeps a long text's head and tail.

It imports nothing of ipyagent, so the lowest layer (``session/``) can use it too.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["chars4", "clip", "js_length", "one_line"]


def js_length(text: str) -> int:
    """``String.prototype.length``: UTF-16 code units, so the estimate matches Pi's exactly."""
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate (Pi's grep can cut a pair in half) is one code unit too
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def chars4(value: Any) -> int:
    """Pi's estimate, ceil(chars / 4), of a text, or of any other value as JSON (tool definitions)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return math.ceil(js_length(text) / 4)


def one_line(text: Any, limit: int = 70) -> str:
    """``text`` on one line (runs of white space made one space), cut to ``limit`` with "…"."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def clip(text: str, limit: int, *, head: int | None = None, tail: int | None = None) -> tuple[str, str, int]:
    """(head, tail, characters left out between them) of ``text`` when it is longer than ``limit``:
    its first ``head`` characters (default three quarters of ``limit``) and its last ``tail`` (one
    quarter); the whole text, "" and 0 when it fits."""
    if len(text) <= limit:
        return text, "", 0
    first = text[:limit * 3 // 4 if head is None else head]
    keep = limit // 4 if tail is None else tail
    last = text[len(text) - keep:] if keep > 0 else ""
    return first, last, len(text) - len(first) - len(last)
