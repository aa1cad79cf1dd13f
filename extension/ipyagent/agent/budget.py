"""What the next request will hold, and where the window it must fit comes from.

The trigger and the budget widget both count with :func:`request_tokens`, so they agree: the last
provider-reported usage plus estimates of what came after it; and when no reply in the context
carries usage (a server that reports none in streams, or right after a compaction), the estimate
of *everything* the request holds: system prompt, tool definitions and messages. Where the server
has a tokenizer, the chars/4 estimates are scaled by the ratio measured once against it
(:func:`token_factor`); the ratio never goes below 1, so calibration only ever makes compaction
come earlier.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

from ipyagent.agent.run_config import WINDOW_FLOOR
from ipyagent.providers import models
from ipyagent.providers.window_discovery import Discovery
from ipyagent.session.messages import Message, current_tools, system_prompt_text
from ipyagent.session.tokens import estimated_texts, message_chars, usage_tokens
from ipyagent.text import chars4

MAX_TOKEN_FACTOR = 4.0


@dataclass(frozen=True)
class WindowInfo:
    window: int | None
    source: str = ""  # "config", "table", "server", "error" (an overflow error said so), "" unknown
    detail: str = ""  # which setting, endpoint or error; or why the window is unknown

    def describe(self) -> str:
        if not self.window:
            return f"window unknown ({self.detail})" if self.detail else "window unknown"
        if self.source == "notebook":  # restored with the session, or learned in this notebook
            return f"window {self.detail}"
        if self.source == "table":
            return "window from the model table"
        if self.source == "error":
            return "window from an overflow error"
        where = "config" if self.source == "config" else "the server"
        return f"window from {where}" + (f" ({self.detail})" if self.detail else "")


def resolve_window(provider: str, model: str, discovery: Discovery | None, configured: int | None = None) -> WindowInfo:
    """``configured`` (Agent.context_window) wins; then the table (or ``set_override``) — unless
    it lists a local model family and the server said what it runs the model with — then what
    the server said; a smaller window an overflow error revealed caps either."""
    if configured:
        return WindowInfo(configured, "config", "Agent.context_window")
    known, source, vendor = models.known_window(provider, model)
    served = discovery.window if discovery is not None else None
    if known and not (vendor == "local" and served):
        info = WindowInfo(known, source, "the model table" if source == "table" else "set_override")
    elif served and discovery is not None:
        info = WindowInfo(served, "server", discovery.where)
    else:
        info = WindowInfo(None, "", discovery.error if discovery is not None else "")
    learned = models.learned_window(provider, model)
    if learned and (not info.window or learned < info.window):
        return WindowInfo(learned, "error", "an overflow error named it")
    return info


LEARNED_WINDOW = "learned_window"  # the key, in a session's saved settings, of a window an overflow revealed


def learned_window_setting(model_string: str, saved: Any = None) -> dict[str, Any] | None:
    """The window an overflow error revealed for ``model_string`` in this kernel, as saved with the
    session (with its source and the day it was learned: ``saved``'s, the setting saved before,
    when it is the same window), or None."""
    if ":" not in model_string:
        return None
    provider, model = model_string.split(":", 1)
    window = models.learned_window(provider, model)
    if not window:
        return None
    before = saved if isinstance(saved, dict) and saved.get("model") == model_string \
        and saved.get("window") == window else {}
    day = before.get("learned") if isinstance(before.get("learned"), str) else date.today().isoformat()
    return {"model": model_string, "window": window, "source": "error", "detail": "an overflow error named it",
            "learned": day}


def notebook_learned_window(settings: Any, model_string: str, table_window: int | None) -> tuple[int, str] | None:
    """The window a session's saved settings say an overflow revealed for ``model_string``, for
    that session only (never taught to the kernel's table: a notebook is shared, and its value
    would shrink every session's window and travel into the user's own notebooks): (window,
    "learned in this notebook on DATE"). Ignored below WINDOW_FLOOR, above ``table_window`` (the
    model table's), or for another model."""
    saved = settings.get(LEARNED_WINDOW) if isinstance(settings, dict) else None
    if not isinstance(saved, dict) or saved.get("model") != model_string or not model_string:
        return None
    window = saved.get("window")
    if isinstance(window, bool) or not isinstance(window, int) or window < WINDOW_FLOOR \
            or (table_window and window > table_window):
        return None
    day = saved.get("learned")
    when = f" on {day}" if isinstance(day, str) and _is_day(day) else ""
    return window, f"learned in this notebook{when}"


def _is_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def tool_dicts(tool_specs: Iterable[Any]) -> list[Any]:
    return [s.to_dict() if hasattr(s, "to_dict") else s for s in tool_specs]


def system_tools_tokens(system_prompt: str, tool_specs: Iterable[Any]) -> int:
    """chars/4 of the system prompt and of the tool definitions as JSON."""
    specs = tool_dicts(tool_specs)
    return chars4(system_prompt or "") + (chars4(specs) if specs else 0)


CALIBRATION_CHARS = 24_000  # the longest sample sent to a tokenizer


def calibration_sample(system_prompt: str, tool_specs: Iterable[Any], messages: Iterable[Message] = (),
                       prompt: str = "") -> str:
    """The text counted with the server's tokenizer: the system prompt, the tool definitions, and
    the newest text of the context and the prompt, as the chars/4 estimate counts it (the tail of
    it when it is long)."""
    specs = tool_dicts(tool_specs)
    head = (system_prompt or "") + ("\n" + json.dumps(specs, ensure_ascii=False, default=str) if specs else "")
    tail = "\n".join([*(_message_text(m) for m in messages), prompt])
    room = max(0, CALIBRATION_CHARS - len(head))
    return head + (tail[-room:] if room else "")


def _message_text(message: Message) -> str:
    return "\n".join(estimated_texts(message)[0])


def token_factor(discovery: Discovery | None) -> float:
    """Real tokens per chars/4-estimated token, from the server's tokenizer; 1 when unknown."""
    if discovery is None or not discovery.sample_tokens or not discovery.sample:
        return 1.0
    estimate = chars4(discovery.sample)
    if estimate <= 0:
        return 1.0
    return min(MAX_TOKEN_FACTOR, max(1.0, discovery.sample_tokens / estimate))


def raw_token_ratio(discovery: Discovery | None) -> float:
    """Real tokens per chars/4-estimated token as the server's tokenizer counted the sample, not
    clamped (:func:`token_factor` never goes below 1); 1 when unknown."""
    if discovery is None or not discovery.sample_tokens or not discovery.sample:
        return 1.0
    estimate = chars4(discovery.sample)
    return min(MAX_TOKEN_FACTOR, max(1 / MAX_TOKEN_FACTOR, discovery.sample_tokens / estimate)) if estimate else 1.0


TOOLS_SHARE_TO_JUDGE = 0.5  # tool definitions at least half the rest of the request: tokenizers differ less


def tools_left_out(reported: int, system_prompt: str, tool_specs: Iterable[Any], messages: Iterable[Message],
                   ratio: float = 1.0) -> tuple[bool, int, int]:
    """Whether a server's reported prompt tokens say it left the tool definitions out of the
    prompt (llama-cpp-python without a function-calling chat format does, silently): the count is
    nearer the request without the tools than the request with them. Judged only when the
    definitions are a large share of the request, so that a tokenizer counting differently from
    chars/4 cannot pass for missing tools. Returns (left out?, the request's estimate, the tools')."""
    specs = tool_dicts(tool_specs)
    tools = chars4(specs) if specs else 0
    rest = chars4(system_prompt or "") + sum(math.ceil(message_chars(m) / 4) for m in messages)
    whole = math.ceil((rest + tools) * ratio)
    if not tools or reported <= 0 or tools < TOOLS_SHARE_TO_JUDGE * rest:
        return False, whole, math.ceil(tools * ratio)
    return reported < (rest + tools / 2) * ratio, whole, math.ceil(tools * ratio)


def request_tokens(session: Any, system_prompt: str, tool_specs: Iterable[Any], factor: float = 1.0) -> int:
    """The tokens the next request will hold (see the module docstring)."""
    state = session.context_state()
    if state.last_usage_index >= 0:
        usage = usage_tokens(state.agent_messages[state.last_usage_index].get("usage"))
        return usage + math.ceil(float(state.trailing) * factor)
    return math.ceil(float(state.trailing + system_tools_tokens(system_prompt, tool_specs)) * factor)


def recorded_request_tokens(session: Any, factor: float = 1.0) -> int:
    """:func:`request_tokens` with the system prompt and tools the session recorded last (its
    system messages): the figure outside a kernel (``ipyagent inspect``), equal to the agent's
    after a run."""
    state = session.context_state()
    system = state.current_system_message()
    tools = current_tools([m for _, m, _ in state.system_messages])
    return request_tokens(session, system_prompt_text(system), tools, factor)
