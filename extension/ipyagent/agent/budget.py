"""What the next request will hold, where the window it must fit comes from, and whether it fits.

The trigger and the budget widget both count with :func:`request_tokens`, so they agree: the last
provider-reported usage plus estimates of what came after it; and when no reply in the context
carries usage (a server that reports none in streams, or right after a compaction), the estimate
of *everything* the request holds: system prompt, tool definitions and messages. Where the server
has a tokenizer, the chars/4 estimates are scaled by the ratio measured once against it
(:func:`token_factor`); the ratio never goes below 1, so calibration only ever makes compaction
come earlier.

:class:`RequestBudget` puts these together for one session, its settings, its tools and its system
prompt: the window and its source (asking the server when nothing else knows it), the token
factor, the request's tokens, the fixed part (system prompt and tools), the budgets compaction
uses, the room a compaction must leave and the fit checks. The loop, the budget widget, ``%agent
status`` and the explorer all count with it, so their figures agree; none of them needs an agent.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, Final

from ipyagent.agent import run_events as ev
from ipyagent.agent.provider_summarizer import summary_input_budget
from ipyagent.agent.run_config import WINDOW_FLOOR, LearnedWindow, RunConfig, SavedTokenFactor
from ipyagent.compaction.planner import CompactionRoom
from ipyagent.compaction.settings import Budget, CompactionSettings, fit_budget, for_model
from ipyagent.core import Session
from ipyagent.providers import window_discovery
from ipyagent.providers.models import ModelTable
from ipyagent.providers.provider import Provider, ToolSpec
from ipyagent.providers.registry import ProviderRegistry
from ipyagent.providers.window_discovery import Discovery
from ipyagent.session.messages import Message, current_tools, system_prompt_text
from ipyagent.session.tokens import estimated_texts, usage_tokens
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


def resolve_window(models: ModelTable, provider: str, model: str, discovery: Discovery | None,
                   configured: int | None = None) -> WindowInfo:
    """``configured`` (Agent.context_window) wins; then the table (or ``set_override``) — unless
    it lists a local model family and the server said what it runs the model with — then what
    the server said; a smaller window an overflow error revealed caps either (``models``: the
    table with its overrides and learned windows)."""
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


LEARNED_WINDOW: Final = "learned_window"  # the key, in a session's saved settings, of a window an overflow revealed


def learned_window_setting(models: ModelTable, model_string: str, saved: Any = None) -> LearnedWindow | None:
    """The window an overflow error revealed for ``model_string`` in this kernel (as ``models``
    learned it), as saved with the session (with its source and the day it was learned:
    ``saved``'s, the setting saved before, when it is the same window), or None."""
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
            "learned": str(day)}


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


TOKEN_FACTOR: Final = "token_factor"  # the key, in a session's saved settings, of its measured token factor


def server_discovery(providers: ProviderRegistry, provider: Provider, model_string: str) -> Discovery | None:
    """What ``provider``'s server said about the model of ``model_string`` (None: nothing yet)."""
    return providers.discovery.cached(provider, providers.parse(model_string)[1])


def token_factor_setting(config: RunConfig, providers: ProviderRegistry) -> SavedTokenFactor | None:
    """The token factor measured for the settings' model against its server's tokenizer, as saved
    with the session (with the model it is for); None when the server has no tokenizer or was not
    asked yet."""
    if not config.model:
        return None
    try:
        found = server_discovery(providers, configured_provider(config, providers)(), config.model)
    except ValueError:  # an unknown provider: nothing measured
        return None
    if found is None or not found.sample_tokens or not found.sample:
        return None
    return {"model": config.model, "factor": token_factor(found),
            "tokenizer": found.tokenizer or "the server's tokenizer"}


def with_saved_token_factor(config: RunConfig, settings: Any) -> RunConfig:
    """``config`` counting with the token factor a session's saved settings hold for its model (a
    restart, a reopen: the counts stay those the session had); another model's factor, or a value
    that is no factor, is not used."""
    saved = settings.get(TOKEN_FACTOR) if isinstance(settings, dict) else None
    if not isinstance(saved, dict) or saved.get("model") != config.model:
        return config
    factor = saved.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= MAX_TOKEN_FACTOR:
        return config
    return replace(config, token_factor=float(factor))


def request_tokens(session: Session, system_prompt: str, tool_specs: Iterable[Any], factor: float = 1.0) -> int:
    """The tokens the next request will hold (see the module docstring)."""
    state = session.context_state()
    if state.last_usage_index >= 0:
        usage = usage_tokens(state.agent_messages[state.last_usage_index].get("usage"))
        return usage + math.ceil(float(state.trailing) * factor)
    return math.ceil(float(state.trailing + system_tools_tokens(system_prompt, tool_specs)) * factor)


def recorded_request_tokens(session: Session, factor: float = 1.0) -> int:
    """:func:`request_tokens` with the system prompt and tools the session recorded last (its
    system messages): the figure outside a kernel (``ipyagent inspect``), equal to the agent's
    after a run."""
    state = session.context_state()
    system = state.current_system_message()
    tools = current_tools([m for _, m, _ in state.system_messages])
    return request_tokens(session, system_prompt_text(system), tools, factor)


def configured_provider(config: RunConfig, providers: ProviderRegistry) -> Callable[[], Provider]:
    """The provider of the settings' model in ``providers``, resolved when asked (ValueError: an
    unknown one)."""
    return lambda: providers.resolve(config.model, config.provider_options)[0]


@dataclass(frozen=True)
class RequestFit:
    """Whether the next request fits its window with room for the reply."""

    fits: bool
    tokens: int  # what it holds, as the budget counts it
    window: int | None


@dataclass
class RequestBudget:
    """The budget of one session's next request (see the module docstring)."""

    session: Session
    config: RunConfig
    tool_specs: Sequence[ToolSpec]  # the tool definitions the request offers
    system_prompt: Callable[[], str]  # the system prompt the request sends, composed when asked
    providers: ProviderRegistry  # the kernel's: its model table and the servers' answers, asked and cached
    provider: Callable[[], Provider]  # the session model's provider (ValueError: an unknown one)

    def server(self) -> Discovery | None:
        """What the server said about the session model (None: nothing yet, or no such server)."""
        if not self.config.model:
            return None
        try:
            return server_discovery(self.providers, self.provider(), self.config.model)
        except ValueError:  # an unknown provider: the call itself will say so
            return None

    def window_info(self) -> WindowInfo:
        """The context window and where it came from (config, table, server or error)."""
        if self.config.context_window or not self.config.model:
            source = ("notebook" if self.config.window_note else "config") if self.config.context_window else ""
            return WindowInfo(self.config.context_window or None, source, self.config.window_note or (
                "Agent.context_window" if self.config.context_window else "no model"))
        provider_name, model_id = self.providers.parse(self.config.model)
        return resolve_window(self.providers.models, provider_name, model_id, self.server())

    def window(self) -> int | None:
        return self.window_info().window

    def discover(self, wait: float | None = None, prompt: str = "", emit: Callable[[Any], None] | None = None) -> None:
        """Ask the server for the window (when nothing else knows it) and for a tokenizer count of
        the system prompt, the tools, the context and ``prompt``, once per base URL and model;
        waits at most ``wait`` seconds (telling ``emit`` while it does) and never raises."""
        if not self.config.model:
            return
        try:
            provider = self.provider()
            provider_name, model_id = self.providers.parse(self.config.model)
            if not window_discovery.supports_discovery(provider):
                return
            known, _, vendor = self.providers.models.known_window(provider_name, model_id)
            needs_window = not self.config.context_window and (not known or vendor == "local")
            self_hosted = getattr(provider, "base_url", None) != getattr(provider, "default_base_url", None)
            answered = self.providers.discovery.cached(provider, model_id)
            if (needs_window or self_hosted) and (answered is None or answered.provisional):
                # the sample is built only when the server will be asked: it reads the whole context
                wait = window_discovery.DEFAULT_WAIT if wait is None else wait
                sample = calibration_sample(self.system_prompt(), self.tool_specs, self.session.agent_messages(),
                                            prompt)
                if not needs_window or wait <= 0:
                    self.providers.discovery.discover(provider, model_id, wait=0.0, sample=sample)
                    return
                self._wait_for_window(provider, model_id, wait, sample, emit or _ignore)
        except Exception:  # noqa: BLE001 - discovery is a help, never a reason for a prompt to fail
            return

    def _wait_for_window(self, provider: Provider, model_id: str, wait: float, sample: str,
                         emit: Callable[[Any], None]) -> None:
        what = "Asking the server for the model's context window"
        started = time.monotonic()
        emit(ev.WaitStart(what))
        try:
            self.providers.discovery.discover(provider, model_id, wait=wait, sample=sample)
        finally:
            found = self.window()
            emit(ev.WaitEnd(what, f"context window {found:,} tokens" if found else "no window known",
                            time.monotonic() - started))

    def token_factor(self) -> float:
        """Real tokens per chars/4-estimated token: the session's saved one, else from the server's
        tokenizer (1 when unknown)."""
        if self.config.token_factor:  # measured before and saved with the session: the same counts
            return self.config.token_factor
        try:
            return token_factor(self.server())
        except Exception:  # noqa: BLE001 - no factor is the estimate as it is
            return 1.0

    def request_tokens(self) -> int:
        """What the next request will hold: the count the trigger and the widget share."""
        return request_tokens(self.session, self.system_prompt(), self.tool_specs, self.token_factor())

    def fixed_tokens(self) -> int:
        """The fixed part of every request, the system prompt and the tool definitions, as the
        budget counts it (chars/4, times the server's token factor): the same figure everywhere."""
        return math.ceil(system_tools_tokens(self.system_prompt(), self.tool_specs) * self.token_factor())

    def fitted(self) -> Budget:
        """The reserve and kept tail for the session model and its window (``compaction/settings.py``'s
        :func:`fit_budget`): ``Agent.model_overrides["provider/model"]`` where it sets one (Pi 1.6's
        ``compaction.modelOverrides``), else ``Agent.reserve_tokens`` / ``keep_recent_tokens``, both
        counting as set by the user; what is not set is derived from the window. Set values that
        cannot work with the window are replaced (the budget's ``problem`` says so)."""
        settings = self.config.compaction
        if self.config.model and self.config.model_overrides:
            provider_name, model_id = self.providers.parse(self.config.model)
            settings = for_model(settings, self.config.model_overrides, provider_name, model_id)
        try:
            window = self.window()
        except ValueError:  # a model string the registry does not know: the call will say so
            window = None
        return fit_budget(settings, window)

    def settings(self) -> CompactionSettings:
        """The budgets compaction uses now: :meth:`fitted`'s, as settings."""
        return self.fitted().settings(self.config.compaction.enabled)

    def room(self, budget: Budget | None = None) -> CompactionRoom | None:
        """What a compaction must leave the next request: under the threshold of ``budget`` (default
        :meth:`fitted`), next to the fixed part, messages counted as the trigger counts them (None:
        no window)."""
        threshold = (budget or self.fitted()).threshold
        if threshold is None:
            return None
        return CompactionRoom(threshold, fixed=self.fixed_tokens(), factor=self.token_factor())

    def fits_after_deepest_compaction(self) -> bool:
        """Whether the next request could fit the window after the deepest compaction there is: one
        that cuts at the last cut point, keeping only from there (a prompt, or a tool call with its
        results, is never cut), with a summary counted as nothing. When it could not, a compaction
        cannot help and is not run."""
        window = self.window()
        if not window:
            return True
        state = self.session.context_state()
        start = state.cut_points[-1] if state.cut_points else 0
        kept = math.ceil(sum(state.entry_tokens[start:]) * self.token_factor())
        return self.fixed_tokens() + kept + (self.config.max_output_tokens or 0) <= window

    def request_fits(self) -> RequestFit:
        window = self.window()
        tokens = self.request_tokens()
        return RequestFit(not window or tokens + (self.config.max_output_tokens or 0) <= window, tokens, window)

    def summary_input_tokens(self) -> int | None:
        """The most a summary request may hold (``agent/provider_summarizer.py``)."""
        summary_model = self.config.summary_model or self.config.model
        session_window = self.window() if summary_model and summary_model == self.config.model else None
        return summary_input_budget(self.config, session_window, self.providers)

    def too_large(self, tokens: int, window: int, why: str) -> str:
        """What to tell a user whose next request (``tokens``) cannot fit ``window`` (``why``: and
        why compaction does not help): what takes the room, and what to do."""
        head = (f"The next request would hold about {tokens:,} tokens"
                + (f" (with {self.config.max_output_tokens:,} for the reply)" if self.config.max_output_tokens else "")
                + f", more than the {window:,}-token window, {why}: ")
        fixed = self.fixed_tokens()
        state = self.session.context_state()
        largest = max(range(len(state.estimates)), key=state.estimates.__getitem__, default=None)
        biggest = math.ceil(state.estimates[largest] * self.token_factor()) if largest is not None else 0
        if largest is None or fixed >= biggest:
            return head + (f"the system prompt and the {len(self.tool_specs)} tool definitions take {fixed:,} of them. "
                           "Run the cell with %%agent --no-tools, leave instruction files out "
                           "(%config Agent.instruction_files = []), or use a model with a larger window "
                           "(and set Agent.context_window).")
        return head + _largest_message(state.agent_messages[largest], state.entry_ids[largest], biggest, fixed)


def _ignore(event: Any) -> None:
    """An event nobody listens to."""


def _largest_message(message: Message, entry_id: str, tokens: int, fixed: int) -> str:
    """What takes most of a request that cannot fit: one message (``tokens`` of it), and what to do."""
    role = message.get("role")
    if role == "user":
        return (f"one prompt (entry {entry_id}) takes about {tokens:,} of them, the system prompt and "
                f"tools {fixed:,}. Shorten it or split it over several cells (%%agent --no-context "
                "leaves the notebook activity out), or use a model with a larger window.")
    if role == "toolResult":
        return (f"the result of a {message.get('toolName') or 'tool'} call (entry {entry_id}) takes "
                f"about {tokens:,} of them. Mask it (%agent mask {entry_id}), or start a new "
                "session (%agent new).")
    if role == "compactionSummary":
        return (f"the compaction summary takes about {tokens:,} of them. Compact with a focus that "
                "asks for a shorter summary (%compact keep it short), or start a new session (%agent new).")
    return (f"one {role} message (entry {entry_id}) takes about {tokens:,} of them. Start a new "
            "session (%agent new) or use a model with a larger window.")
