"""The agent loop: call the model, run its tool calls, append every entry as it completes, and
keep the context inside the window — a budget check before every provider call (also inside tool
loops), compact-and-retry once on overflow, and a stop after three failed compactions in a row.

    agent = Agent(session, model="openai:gpt-4.1-mini", tools=default_tools())
    agent.subscribe(print)
    agent.prompt("What is in data.csv?")
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ipyagent.agent import events as ev
from ipyagent.agent.budget import (
    WindowInfo,
    calibration_sample,
    raw_token_ratio,
    request_tokens,
    resolve_window,
    system_tools_tokens,
    token_factor,
    tools_left_out,
)
from ipyagent.agent.compaction_oracle import CompactionRuling
from ipyagent.agent.ports import RunPorts, ToolResultSource
from ipyagent.agent.prompt.activity_block import format_activity
from ipyagent.agent.prompt.notebook_context import NotebookContext, SystemContext
from ipyagent.agent.prompt.pinned import active_pins
from ipyagent.agent.prompt.record import declarations, is_system_entry, sections_of, system_patch
from ipyagent.agent.prompt.system import PromptPart, compose_system_prompt, system_prompt_parts
from ipyagent.agent.provider_summarizer import summarizer_for, summary_input_budget
from ipyagent.agent.redaction import RedactedSummaries, Redactor
from ipyagent.agent.run_config import AgentConfig
from ipyagent.agent.skills.skill_tool import listed_skills
from ipyagent.agent.tools.approval import ApprovalPolicy, run_tool_call
from ipyagent.agent.tools.cell import CellRunner
from ipyagent.agent.tools.notebook_port import NotebookPort
from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.tool_registry import default_tools
from ipyagent.compaction.compact import FailureTracker
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import Budget, CompactionSettings, fit_budget, for_model, should_compact
from ipyagent.compaction.summarizer import Summarizer, SummarizerError
from ipyagent.core import CompactionCancelled, NothingToCompact, Session
from ipyagent.providers import models
from ipyagent.providers import window_discovery as discovery
from ipyagent.providers.errors import ContextOverflowError, ProviderError, StreamInterrupted
from ipyagent.providers.overflow import is_silent_overflow
from ipyagent.providers.provider import MessageDone, ModelRequest, Provider, ProviderNote, Retrying, TextDelta
from ipyagent.providers.registry import parse_model_string, resolve_provider
from ipyagent.providers.transport.retry import stream_with_retry
from ipyagent.providers.window_discovery import Discovery
from ipyagent.session import masking
from ipyagent.session.context import edits_by_target
from ipyagent.session.ids import now_ms
from ipyagent.session.messages import (
    CELL_PROMPT_FIELD,
    NOT_RUN_INTERRUPTED,
    call_arguments,
    system_prompt_text,
    text_block,
    tool_calls_of,
    tool_result_message,
    unanswered_tool_calls,
    user_message,
)
from ipyagent.session.tokens import normalize_usage, usage_tokens

Listener = Callable[[Any], None]
__all__ = ["Agent", "AgentRunError", "RunPorts", "RunResult", "ToolResultSource"]

OVERFLOW_GAVE_UP = ("Context overflow recovery failed after one compact-and-retry attempt. "
                    "Reduce the context (%compact with a focus, or a new session) or switch to a larger-context model.")


# Agent.compact's reason -> the trigger its entry records
_TRIGGER_OF = {"manual": "manual", "threshold": "foreground", "overflow": "overflow", "idle": "idle"}


def tools_left_out_message(reported: int, whole: int, tools: int, count: int) -> str:
    return (f"The server left the tool definitions out of the prompt: it counted {reported:,} prompt tokens, where "
            f"the request holds about {whole:,} with the {count} tool definitions (about {tools:,} of them). The "
            "model cannot call a tool this way; a reply that says it ran one made it up. For tools, start "
            "llama-cpp-python's server with --chat_format chatml-function-calling, or use a model and server that "
            "support tool calls (Ollama, llama.cpp's llama-server --jinja, vLLM --enable-auto-tool-choice); "
            "without tools, run the cells with %%agent --no-tools.")


class AgentRunError(RuntimeError):
    """The run stopped on an error the user must act on; the session stays valid."""


@dataclass
class RunResult:
    new_entries: list[dict[str, Any]] = field(default_factory=list)
    final_message: dict[str, Any] | None = None
    error: str | None = None

    @property
    def text(self) -> str:
        if not self.final_message:
            return ""
        return "\n".join(b.get("text", "") for b in self.final_message.get("content", []) if b.get("type") == "text")


class Agent:
    def __init__(self, session: Session, model: str | None = None, tools: Iterable[Tool] | None = None,
                 settings: CompactionSettings | None = None, *, config: AgentConfig | None = None,
                 namespace: dict[str, Any] | None = None, cwd: str = ".", approve: ApprovalCallback | None = None,
                 summarizer: Summarizer | None = None, sleep: Callable[[float], None] = time.sleep,
                 provider: Provider | None = None, tool_results: ToolResultSource | None = None,
                 notebook: NotebookContext | None = None, ports: RunPorts | None = None):
        self.session = session
        self.config = config or AgentConfig()
        if model:
            self.config.model = model
        if settings is not None:
            self.config.compaction = settings
        self.tools: dict[str, Tool] = {t.name: t for t in (default_tools() if tools is None else tools)}
        self.tool_context = ToolContext(cwd=cwd, namespace=namespace if namespace is not None else {}, history=session)
        # the agent's own ports; ``using`` declares another set for one run (agent/ports.py)
        self._ports = ports or RunPorts(provider=provider, summarizer=summarizer, tool_results=tool_results,
                                        approve=approve)
        self.notebook = notebook  # the notebook's activity and environment, when there is one
        self._system_prompt: str | None = None  # composed once per prompt
        self._sleep = sleep
        self.failures = FailureTracker()
        self.cancel = threading.Event()
        self._listeners: list[Listener] = []
        self._run_entries: list[dict[str, Any]] | None = None
        self._notices_given: set[str] = set()  # notices given once (budgets that do not fit the window)
        self._run_notices: set[str] = set()  # what this run said already (a compaction skipped, and why)
        # whether the server's count of a prompt with tools was read (left out or not), and whether a
        # streamed reply to one came without usage (then the next goes whole once: _whole_for_tools)
        self._tools_judged = False
        self._streamed_without_usage = False
        self.system_context: SystemContext | None = None  # the notebook's, as the last prompt parts read it

    # ---- what the agent works on, and what a run takes from outside -------------------------

    @property
    def ports(self) -> RunPorts:
        return self._ports

    @contextlib.contextmanager
    def using(self, ports: RunPorts) -> Iterator[RunPorts]:
        """Run with ``ports`` inside the block (the agent's own ports again after it)."""
        previous, self._ports = self._ports, ports
        try:
            yield ports
        finally:
            self._ports = previous

    def configure(self, *, session: Session | None = None, config: AgentConfig | None = None,
                  tools: Iterable[Tool] | None = None, notebook: NotebookContext | None = None,
                  cwd: str | None = None, namespace: dict[str, Any] | None = None, root: str | None = None,
                  cell_runner: CellRunner | None = None, notebook_port: NotebookPort | None = None) -> None:
        """Change what the agent works on between runs; what is not given stays as it is."""
        if session is not None:
            self.session = self.tool_context.history = session
        if config is not None:
            self.config = config
        if tools is not None:
            self.tools = {t.name: t for t in tools}
        if notebook is not None:
            self.notebook = notebook
        context = self.tool_context
        if cwd is not None:
            context.cwd = cwd
        if namespace is not None:
            context.namespace = namespace
        if root is not None:
            context.root = root
        if cell_runner is not None:
            context.cell_runner = cell_runner
        if notebook_port is not None:
            context.notebook = notebook_port

    # ---- events ----------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _emit(self, event: Any) -> None:
        for listener in list(self._listeners):
            listener(event)

    def redactor(self) -> Redactor:
        """What scrubs the configured keys from what the session stores (agent/redaction.py)."""
        return Redactor.configured(self.config.provider_options, extra=self.config.secrets)

    def _append(self, entry: dict[str, Any], *, message: bool = True) -> dict[str, Any]:
        """Store ``entry`` (a message, or a whole entry), the configured keys scrubbed from it."""
        entry = self.redactor().data(entry)
        stored = self.session.append_message(entry) if message else self.session.append(entry)
        if self._run_entries is not None:
            self._run_entries.append(stored)
        self._emit(ev.EntryAppended(stored))
        return stored

    # ---- model and window ------------------------------------------------------------------

    def _model(self) -> tuple[str, str]:
        if not self.config.model:
            raise AgentRunError("No model configured. Set one with %config Agent.model = \"openai:gpt-4.1-mini\" "
                                "(or the IPYAGENT_MODEL environment variable).")
        return parse_model_string(self.config.model)

    def _provider(self) -> Provider:
        return self._ports.provider or resolve_provider(self.config.model, self.config.provider_options)[0]

    def _discovery(self, model_id: str) -> Discovery | None:
        try:
            return discovery.cached(self._provider(), model_id)
        except ValueError:  # an unknown provider: the call itself will say so
            return None

    def window_info(self) -> WindowInfo:
        """The context window and where it came from (config, table, server or error)."""
        if self.config.context_window or not self.config.model:
            return WindowInfo(self.config.context_window or None, "config" if self.config.context_window else "",
                              "Agent.context_window" if self.config.context_window else "no model")
        provider_name, model_id = self._model()
        return resolve_window(provider_name, model_id, self._discovery(model_id))

    def context_window(self) -> int | None:
        return self.window_info().window

    def discover(self, wait: float | None = None, prompt: str = "") -> None:
        """Ask the server for the window (when nothing else knows it) and for a tokenizer count of
        the system prompt, the tools, the context and ``prompt``, once per base URL and model;
        waits at most ``wait`` seconds and never raises."""
        if not self.config.model:
            return
        try:
            provider = self._provider()
            provider_name, model_id = self._model()
            if not discovery.supports_discovery(provider):
                return
            known, _, vendor = models.known_window(provider_name, model_id)
            needs_window = not self.config.context_window and (not known or vendor == "local")
            self_hosted = getattr(provider, "base_url", None) != getattr(provider, "default_base_url", None)
            answered = discovery.cached(provider, model_id)
            if (needs_window or self_hosted) and (answered is None or answered.provisional):
                # the sample is built only when the server will be asked: it reads the whole context
                tools = [t.spec() for t in self.tools.values()]
                wait = discovery.DEFAULT_WAIT if wait is None else wait
                sample = calibration_sample(self.composed_system_prompt(), tools, self.session.agent_messages(),
                                            prompt)
                if not needs_window or wait <= 0:
                    discovery.discover(provider, model_id, wait=0.0, sample=sample)
                    return
                what = "Asking the server for the model's context window"
                started = time.monotonic()
                self._emit(ev.WaitStart(what))
                try:
                    discovery.discover(provider, model_id, wait=wait, sample=sample)
                finally:
                    found = self.window_info().window
                    self._emit(ev.WaitEnd(what, f"context window {found:,} tokens" if found
                                          else "no window known", time.monotonic() - started))
        except Exception:  # noqa: BLE001 - discovery is a help, never a reason for a prompt to fail
            return

    def token_factor(self) -> float:
        if not self.config.model:
            return 1.0
        try:
            return token_factor(self._discovery(self._model()[1]))
        except Exception:  # noqa: BLE001 - no factor is the estimate as it is
            return 1.0

    def request_tokens(self) -> int:
        """What the next request will hold: the count the trigger and the widget share."""
        return request_tokens(self.session, self.composed_system_prompt(), [t.spec() for t in self.tools.values()],
                              self.token_factor())

    def composed_system_prompt(self) -> str:
        """The system prompt the next request sends: composed once per prompt during a run."""
        return self._system_prompt if self._system_prompt is not None else self.system_prompt()

    def summarizer(self, cancel: threading.Event | None = None, reason: str = "threshold") -> Summarizer:
        """The run's summariser (the ports', else one from the settings that reports its progress as
        :class:`~ipyagent.agent.events.CompactionProgress` and stops on ``cancel``, default the run's)."""
        if self._ports.summarizer is not None:
            return self._ports.summarizer
        window = self.context_window() if self.config.model else None
        started = time.monotonic()

        def progress(tokens: int, limit: int | None) -> None:
            self._emit(ev.CompactionProgress(reason, tokens, limit, time.monotonic() - started))

        return summarizer_for(self.config, cancel=cancel or self.cancel, session_window=window, progress=progress)

    def _summary_input_tokens(self) -> int | None:
        summary_model = self.config.summary_model or self.config.model
        session_window = self.context_window() if summary_model and summary_model == self.config.model else None
        return summary_input_budget(self.config, session_window)

    # ---- system prompt and notebook activity ------------------------------------------------

    def system_prompt_parts(self) -> list[PromptPart]:
        """The system prompt's parts: base, environment, instruction files, pins (from the session)."""
        context = self.notebook.system_context(self._ports.approve) if self.notebook is not None else None
        if context is not None and context.skills and "skill" not in self.tools:
            context = dataclasses.replace(context, skills=())  # listed only where the skill tool is offered
        self.system_context = context
        skills = tuple(context.skills) if context is not None else ()
        self.tool_context.skills = skills
        self.tool_context.readable = tuple(s.folder for s in skills if s.readable)
        return system_prompt_parts(self.config.system_prompt, context, active_pins(self.session.entries))

    def system_prompt(self) -> str:
        return compose_system_prompt(self.system_prompt_parts())

    def _report_context(self) -> None:
        """A notice, in each run, for each instruction file found and not read, and one line for
        the skills left out of the system prompt's list."""
        context = self.system_context
        for skipped in context.skipped if context is not None else ():
            self._emit(ev.Notice(f"Instruction file not read: {skipped.reason}."))
        if context is None:
            return
        _, unlisted = listed_skills(context.skills)
        left_out = len(context.skipped_skills)
        if unlisted or left_out:
            over = f"{len(unlisted):,} of {len(context.skills):,} skills are over the list's cap (named in one line)"
            said = [over] if unlisted else []
            said += [f"{left_out:,} skill(s) found are not used"] if left_out else []
            self._emit(ev.Notice(f"Skills: {'; '.join(said)}. %agent skills lists each one, and why."))

    def _record_system_prompt(self) -> None:
        """Record the system prompt this prompt sends as Pi 1.6's system message (the whole
        prompt first, then only what changed: ``agent/prompt/record.py``), and send the text the
        recorded messages replay to. A replay follows the recorded system message, whatever this
        kernel's environment is now, and records none where the recording has none."""
        session = self.session
        if session.on_followed_path():
            recorded = session.followed_next()
            if is_system_entry(recorded):
                assert recorded is not None
                self._append(dict(recorded["message"]))  # the same entry: the path is followed
            return
        sections = self.redactor().data(sections_of(self.system_prompt_parts()))  # as the record stores them
        tools = declarations(t.spec() for t in self.tools.values())
        patch = system_patch(session.system_message(), sections, tools)
        if patch is not None:
            self._append(patch)
        current = session.system_message()
        if current is not None:
            self._system_prompt = system_prompt_text(current)

    def notebook_activity_block(self) -> str:
        """The notebook-activity block the next prompt would carry ("" when off or nothing happened)."""
        if self.notebook is None or not self.config.notebook_context:
            return ""
        return format_activity(self.notebook.activity(), self.config.notebook_context_tokens)

    def _prompt_message(self, text: str | list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
        block = self.notebook_activity_block() if isinstance(text, str) else ""
        if not block or not isinstance(text, str):
            return user_message(text, **extra)
        extra.setdefault(CELL_PROMPT_FIELD, text)
        return user_message([text_block(block), text_block(text)], **extra)

    # ---- compaction ------------------------------------------------------------------------

    def compact(self, focus: str | None = None, *, reason: str = "manual",
                extra: dict[str, Any] | None = None, plan: CompactionPlan | None = None,
                cancel: threading.Event | None = None, trigger: str | None = None) -> dict[str, Any] | None:
        """Compact now. Manual compaction raises on failure; automatic compaction reports and counts it.

        ``plan`` (from ``prepare_compaction`` on the current path) compacts as planned, e.g. with
        another estimator's cut (the explorer); default: planned now with the session's settings.
        ``reason``: "manual", "threshold", "overflow" or "idle" (the kernel's idle time, off the
        main thread: ``cancel`` stops its summary request). The entry records what made it in its
        ``trigger`` field (``session/entries.py``'s TRIGGERS; ``trigger`` overrides it, as a
        replay does with the recorded one)."""
        oracle = self._ports.compaction_oracle
        if plan is None and reason == "manual" and oracle is not None:
            ruling = oracle.rule(self.session, manual=True)
            plan = self._ruled_plan(ruling)
            trigger = trigger or (ruling.trigger if ruling is not None and ruling.compact else None)
        extra = {**(extra or {}), "trigger": trigger or _TRIGGER_OF.get(reason, "foreground")}
        started = time.monotonic()
        tokens_before = self.request_tokens()  # what the trigger saw (the entry's tokensBefore stays Pi's)
        self._emit(ev.CompactionStart(reason, tokens_before))
        budget = self.budget()
        try:
            entry = self.session.compact(RedactedSummaries(self.summarizer(cancel, reason), self.redactor()),
                                         budget.settings(self.config.compaction.enabled), focus=focus, reason=reason,
                                         summary_input_tokens=self._summary_input_tokens(), extra=extra,
                                         describe=self._ports.describe_namespace, plan=plan,
                                         fits=self._room_under(budget.threshold),
                                         room=self._summary_room(budget.threshold))
        except KeyboardInterrupt:
            self._emit(ev.CompactionEnd(reason, aborted=True, duration=time.monotonic() - started))
            raise
        except (NothingToCompact, CompactionCancelled, SummarizerError) as exc:
            repeated = reason != "manual" and isinstance(exc, NothingToCompact) and str(exc) in self._run_notices
            self._run_notices.add(str(exc))
            if not repeated:  # an automatic compaction skipped for the same reason is said once a run
                self._emit(ev.CompactionEnd(reason, error=str(exc), aborted=isinstance(exc, CompactionCancelled),
                                            duration=time.monotonic() - started,
                                            skipped=isinstance(exc, NothingToCompact)))
            if reason == "manual":
                raise
            if isinstance(exc, SummarizerError):
                self.failures.failed(str(exc))
                if self.failures.blocked:
                    self._emit(ev.AgentError(self.failures.message(), kind="compaction"))
            return None
        if self._run_entries is not None:
            self._run_entries.append(entry)
        self._emit(ev.EntryAppended(entry))
        self.failures.succeeded()
        self._emit(ev.CompactionEnd(reason, entry=entry, will_retry=reason == "overflow",
                                    duration=time.monotonic() - started))
        return entry

    def check_budget(self) -> dict[str, Any] | None:
        """Compact if the context is over the threshold; called before every provider call."""
        if not self.config.compaction.enabled or self.failures.blocked:
            return None
        oracle = self._ports.compaction_oracle
        ruling = oracle.rule(self.session, manual=False) if oracle else None
        if ruling is not None:
            return self.compact(reason="threshold", plan=self._ruled_plan(ruling),
                                trigger=ruling.trigger) if ruling.compact else None
        budget = self.budget()
        self._tell_budget_problem(budget)
        settings, window = budget.settings(self.config.compaction.enabled), budget.window
        if not should_compact(self.request_tokens(), window, settings):
            return None
        if not self.fits_after_deepest_compaction():
            return None  # no summary makes room: the request's check says what is too large
        if self.config.auto_mask_turns is not None and self._auto_mask(self.config.auto_mask_turns) \
                and not should_compact(self.request_tokens(), window, settings):
            return None  # masking old tool results made room: no summary needed
        return self.compact(reason="threshold")

    def fixed_tokens(self) -> int:
        """The fixed part of every request, the system prompt and the tool definitions, as the
        budget counts it (chars/4, times the server's token factor): the same figure everywhere."""
        fixed = system_tools_tokens(self.composed_system_prompt(), [t.spec() for t in self.tools.values()])
        return math.ceil(fixed * self.token_factor())

    def _room_under(self, threshold: int | None) -> Callable[[int], bool] | None:
        """Whether a compaction leaves the next request under ``threshold``: its summary and kept
        tail (estimated) with the fixed part, counted as the trigger counts (None: no window)."""
        if threshold is None:
            return None
        fixed, factor = self.fixed_tokens(), self.token_factor()
        return lambda after: fixed + math.ceil(after * factor) <= threshold

    def _summary_room(self, threshold: int | None) -> Callable[[int], int] | None:
        """The tokens a compaction leaves its summary under ``threshold``, next to the fixed part and
        what it keeps (estimated, as the trigger counts): the summary's output limit, so that the
        summary a small window's compaction gets back leaves the room it is for (None: no window)."""
        if threshold is None:
            return None
        fixed, factor = self.fixed_tokens(), self.token_factor()
        return lambda kept: threshold - fixed - math.ceil(kept * factor)

    def fits_after_deepest_compaction(self) -> bool:
        """Whether the next request could fit the window after the deepest compaction there is: one
        that cuts at the last cut point, keeping only from there (a prompt, or a tool call with its
        results, is never cut), with a summary counted as nothing. When it could not, a compaction
        cannot help and is not run."""
        window = self.context_window()
        if not window:
            return True
        state = self.session.context_state()
        start = state.cut_points[-1] if state.cut_points else 0
        kept = math.ceil(sum(state.entry_tokens[start:]) * self.token_factor())
        return self.fixed_tokens() + kept + (self.config.max_output_tokens or 0) <= window

    def _request_fits(self) -> tuple[bool, int, int | None]:
        window = self.context_window()
        tokens = self.request_tokens()
        return not window or tokens + (self.config.max_output_tokens or 0) <= window, tokens, window

    def check_request_fits(self) -> None:
        """Refuse to send a request known not to fit the window, saying what is too large and
        what to do; compact first where that may still make room."""
        fits, tokens, window = self._request_fits()
        if fits:
            return
        if self.config.compaction.enabled and not self.failures.blocked and self.fits_after_deepest_compaction():
            self.compact(reason="threshold")
            fits, tokens, window = self._request_fits()
            if fits:
                return
        assert window is not None
        raise AgentRunError(self._too_large(tokens, window))

    def _too_large(self, tokens: int, window: int) -> str:
        factor = self.token_factor()
        fixed = self.fixed_tokens()
        state = self.session.context_state()
        if not self.config.compaction.enabled:
            why = "and automatic compaction is off (Agent.auto_compact = False; %compact compacts by hand)"
        elif self.failures.blocked:
            why = "and automatic compaction has stopped after failing (see above; %compact retries)"
        elif not self.fits_after_deepest_compaction():
            why = "even after the deepest compaction (so none was run)"
        else:
            why = "and compaction cannot make it smaller"
        head = (f"The next request would hold about {tokens:,} tokens"
                + (f" (with {self.config.max_output_tokens:,} for the reply)" if self.config.max_output_tokens else "")
                + f", more than the {window:,}-token window, {why}: ")
        largest = max(range(len(state.estimates)), key=state.estimates.__getitem__, default=None)
        biggest = math.ceil(state.estimates[largest] * factor) if largest is not None else 0
        if largest is None or fixed >= biggest:
            return head + (f"the system prompt and the {len(self.tools)} tool definitions take {fixed:,} of them. "
                           "Run the cell with %%agent --no-tools, leave instruction files out "
                           "(%config Agent.instruction_files = []), or use a model with a larger window "
                           "(and set Agent.context_window).")
        message, entry_id = state.agent_messages[largest], state.entry_ids[largest]
        role = message.get("role")
        if role == "user":
            return head + (f"one prompt (entry {entry_id}) takes about {biggest:,} of them, the system prompt and "
                           f"tools {fixed:,}. Shorten it or split it over several cells (%%agent --no-context "
                           "leaves the notebook activity out), or use a model with a larger window.")
        if role == "toolResult":
            return head + (f"the result of a {message.get('toolName') or 'tool'} call (entry {entry_id}) takes "
                           f"about {biggest:,} of them. Mask it (%agent mask {entry_id}), or start a new "
                           "session (%agent new).")
        if role == "compactionSummary":
            return head + (f"the compaction summary takes about {biggest:,} of them. Compact with a focus that "
                           "asks for a shorter summary (%compact keep it short), or start a new session (%agent new).")
        return head + (f"one {role} message (entry {entry_id}) takes about {biggest:,} of them. Start a new "
                       "session (%agent new) or use a model with a larger window.")

    def _auto_mask(self, recent_turns: int) -> int:
        """Mask the tool results before the last ``recent_turns`` turns (Agent.auto_mask_turns);
        how many were masked."""
        state = self.session.context_state()
        targets = masking.tool_results_before(state.projection, edits_by_target(self.session.path()), recent_turns)
        for entry in targets:
            self._append(masking.mask_edit(entry), message=False)
        return len(targets)

    def compaction_settings(self) -> CompactionSettings:
        """The budgets compaction uses now: :meth:`budget`'s, as settings."""
        return self.budget().settings(self.config.compaction.enabled)

    def budget(self) -> Budget:
        """The reserve and kept tail for the session model and its window (``compaction/settings.py``'s
        :func:`fit_budget`): ``Agent.model_overrides["provider/model"]`` where it sets one (Pi 1.6's
        ``compaction.modelOverrides``), else ``Agent.reserve_tokens`` / ``keep_recent_tokens``, both
        counting as set by the user; what is not set is derived from the window. Set values that
        cannot work with the window are replaced, and said once (a notice)."""
        settings = self.config.compaction
        if self.config.model and self.config.model_overrides:
            provider_name, model_id = self._model()
            settings = for_model(settings, self.config.model_overrides, provider_name, model_id)
        try:
            window = self.context_window()
        except ValueError:  # a model string the registry does not know: the call will say so
            window = None
        return fit_budget(settings, window)

    def _tell_budget_problem(self, budget: Budget) -> None:
        if budget.problem and budget.problem not in self._notices_given:
            self._notices_given.add(budget.problem)
            self._emit(ev.Notice(budget.problem))

    def _ruled_plan(self, ruling: CompactionRuling | None) -> CompactionPlan | None:
        """The plan with the oracle's cut (None: planned as usual)."""
        if ruling is None or not ruling.compact or ruling.first_kept_entry_id is None:
            return None
        return self.session.prepare_compaction(self.compaction_settings(),
                                               first_kept_entry_id=ruling.first_kept_entry_id)

    # ---- the loop --------------------------------------------------------------------------

    def prompt(self, text: str | list[dict[str, Any]], *, compact_after: bool = True,
               **message_extra: Any) -> RunResult:
        """Send a prompt and run until the model stops. ``message_extra`` rides on the user
        message (e.g. ``cellId``); Pi ignores such fields. ``compact_after=False``: no compaction
        check once the run has ended (the kernel compacts in its idle time instead, kernel/idle.py)."""
        self._model()
        self.cancel.clear()
        self._run_notices = set()
        entries: list[dict[str, Any]] = []
        self._run_entries = entries
        result = RunResult(new_entries=entries)
        self._emit(ev.AgentStart(text if isinstance(text, str) else "[content blocks]"))
        sent = False
        try:
            self._system_prompt = self.system_prompt()
            self._report_context()
            self.discover(prompt=text if isinstance(text, str) else "")
            self.check_budget()
            self._record_system_prompt()
            self._append(self._prompt_message(text, dict(message_extra)))
            sent = True
            result.final_message = self._run()
        except KeyboardInterrupt:
            self.close_dangling_calls()  # wherever it landed, no tool call is left without a result
            raise
        except AgentRunError as exc:
            result.error = self.redactor().text(str(exc))
            self._emit(ev.AgentError(result.error))
        finally:
            self._run_entries = None
            self._system_prompt = None
            if sent and self.notebook is not None:
                self.notebook.prompt_sent()
            self.session.hooks.emit("agent_end", messages=[e.get("message") for e in entries if "message" in e],
                                    session=self.session)
            self._emit(ev.AgentEnd(entries, error=result.error))
        if result.error is None and self.config.compaction.enabled and compact_after:
            self.check_budget()
        return result

    def _run(self) -> dict[str, Any] | None:
        overflow_retried = False
        rounds = 0
        while True:
            self.check_budget()
            self.check_request_fits()
            provider_name, model_id = self._model()
            try:
                message = self._call_model(model_id)
            except ContextOverflowError as exc:
                if exc.context_window:
                    models.learn_window(provider_name, model_id, exc.context_window)
                if overflow_retried or not self.config.compaction.enabled:
                    raise AgentRunError(f"{exc}\n{OVERFLOW_GAVE_UP}") from exc
                overflow_retried = True
                self._recover_from_overflow(str(exc))
                continue
            if is_silent_overflow(message, self.context_window()):
                if overflow_retried or not self.config.compaction.enabled:
                    raise AgentRunError(OVERFLOW_GAVE_UP)
                overflow_retried = True
                self._recover_from_overflow("the provider silently truncated the request")
                continue
            stored: dict[str, Any] = self._append(message)["message"]  # keys scrubbed; calls run as written
            if message.get("stopReason") == "aborted":
                raise AgentRunError("The response was cancelled.")
            calls = tool_calls_of(message)
            results = [self._run_tool(call) for call in calls]
            self.session.hooks.emit("turn_end", message=stored, tool_results=results, session=self.session)
            self._emit(ev.TurnEnd(stored, results))
            rounds += 1
            if not calls:
                return stored
            if self.config.max_tool_rounds and rounds >= self.config.max_tool_rounds:
                raise AgentRunError(f"Stopped after {rounds} tool round{'s' * (rounds != 1)} (Agent.max_tool_rounds).")

    def _recover_from_overflow(self, reason: str) -> None:
        _, tokens, window = self._request_fits()
        if window and not self.fits_after_deepest_compaction():
            raise AgentRunError(f"Context overflow ({reason}). " + self._too_large(tokens, window))
        self._emit(ev.AgentError(f"Context overflow ({reason}); compacting and retrying once.", kind="overflow"))
        if self.compact(reason="overflow") is None:
            raise AgentRunError(f"Context overflow, and compaction was not possible. {OVERFLOW_GAVE_UP}")

    def request(self, model_id: str) -> ModelRequest:
        """The request the next model call sends (after the ``context`` and ``before_provider_request``
        hooks): what ``%agent context`` shows."""
        messages = self.session.build_context()
        replaced = self.session.hooks.emit("context", messages=messages, session=self.session)
        if isinstance(replaced, dict) and isinstance(replaced.get("messages"), list):
            messages = replaced["messages"]
        system_prompt = self.composed_system_prompt()
        session_id = self.session.header.get("id")
        request = ModelRequest(model=model_id, messages=messages, system_prompt=system_prompt,
                               tools=[t.spec() for t in self.tools.values()],
                               max_tokens=self.config.max_output_tokens, reasoning=self.config.reasoning,
                               # the prompt-cache key: one session's requests share a warm cache
                               options={"session_id": session_id} if session_id else {})
        replaced = self.session.hooks.emit("before_provider_request", payload=request, session=self.session)
        if isinstance(replaced, dict) and isinstance(replaced.get("payload"), ModelRequest):
            request = replaced["payload"]
        return request

    def _notice_once(self, key: str, message: str) -> None:
        if key not in self._notices_given:
            self._notices_given.add(key)
            self._emit(ev.Notice(message))

    def _whole_for_tools(self, provider: Provider, request: ModelRequest, model_id: str) -> ModelRequest:
        """One request that offers tools goes whole to a server whose streams carry no usage
        (llama-cpp-python, known by its model listing, or any whose streamed reply came without
        usage): whole answers carry usage, the server's own count of the prompt, which shows
        whether it passed the tools to the model (:meth:`_check_tools_sent`). Once judged, requests
        stream again."""
        if not request.tools or self._tools_judged or "stream" in request.options \
                or not getattr(provider, "streaming", False):
            return request
        found = self._discovery(model_id)
        if not (self._streamed_without_usage or (found is not None and found.server == "llama-cpp-python")):
            return request
        return dataclasses.replace(request, options={**request.options, "stream": False})

    def _check_tools_sent(self, request: ModelRequest, message: dict[str, Any], model_id: str) -> None:
        """Say once when the server's own count of the prompt shows it left the tool definitions out."""
        if not request.tools or self._tools_judged:
            return
        usage = message.get("usage") or {}
        reported = usage_tokens(usage) - int(usage.get("output") or 0)
        if reported <= 0:
            self._streamed_without_usage = request.options.get("stream") is not False
            return
        self._tools_judged = True
        if tool_calls_of(message):
            return
        left_out, whole, tools = tools_left_out(reported, request.system_prompt, request.tools, request.messages,
                                                raw_token_ratio(self._discovery(model_id)))
        if left_out:
            self._notice_once("tools-left-out", tools_left_out_message(reported, whole, tools, len(request.tools)))

    def _call_model(self, model_id: str) -> dict[str, Any]:
        provider = self._provider()
        request = self._whole_for_tools(provider, self.request(model_id), model_id)
        self._emit(ev.RequestStart(self.config.model, self.request_tokens(), len(request.messages)))
        message = None
        received: list[str] = []
        try:
            for event in stream_with_retry(provider, request, max_retries=self.config.max_retries,
                                           base_delay=self.config.retry_base_delay,
                                           max_delay=self.config.retry_max_delay, sleep=self._sleep,
                                           cancel=self.cancel):
                if isinstance(event, MessageDone):
                    message = event.message
                else:
                    if isinstance(event, TextDelta):
                        received.append(event.text)
                    elif isinstance(event, Retrying):
                        received.clear()
                    elif isinstance(event, ProviderNote):
                        self._notice_once(event.text, event.text)
                        continue
                    self._emit(event)
        except StreamInterrupted as exc:
            self._append(exc.partial)  # what arrived, recorded as an aborted message
            raise KeyboardInterrupt from None
        except KeyboardInterrupt:
            # The interrupt landed between two events rather than inside the provider's read.
            self._append(self._aborted_message(model_id, "".join(received)))
            raise
        except ContextOverflowError:
            raise
        except ProviderError as exc:
            raise AgentRunError(str(exc)) from exc
        if message is None:
            raise AgentRunError("The provider's stream ended without a message.")
        self._check_tools_sent(request, message, model_id)
        return message

    def _aborted_message(self, model_id: str, text: str) -> dict[str, Any]:
        provider_name, _ = self._model()
        return {"role": "assistant", "content": [{"type": "text", "text": text}] if text else [],
                "api": "", "provider": provider_name, "model": model_id, "usage": normalize_usage({}),
                "stopReason": "aborted", "errorMessage": "Interrupted by the user", "timestamp": now_ms()}

    def _run_tool(self, call: dict[str, Any]) -> dict[str, Any]:
        name, call_id = call.get("name", ""), call.get("id", "")
        arguments = call_arguments(call)
        tool = self.tools.get(name)
        try:
            # inside the try: an interrupt here still closes the call
            self._emit(ev.ToolExecutionStart(call_id, name, arguments))
            def run(tool: Tool | None = tool) -> ToolOutput:
                if tool is None and self._ports.late_tool is not None:  # an MCP server still starting
                    tool = self._ports.late_tool(name, self.tools)
                if tool is None:
                    return ToolOutput(f"Unknown tool {name!r}. Available: {', '.join(self.tools)}", is_error=True)
                self.tool_context.history = self.session  # recall reads this session's history
                policy: ApprovalPolicy = "auto" if self.config.tool_approval == "auto" else "ask"
                return run_tool_call(tool, arguments, self.tool_context, policy=policy,
                                     approve=self._ports.approve)

            # a recording answers even for a tool this kernel lacks (an MCP server's, replayed)
            source = self._ports.tool_results
            output = source(call, run) if source else run()
            output_text, is_error, details = output.text, output.is_error, output.details
            images = output.images
        except KeyboardInterrupt:
            result = tool_result_message(call_id, name, "Interrupted by the user before the tool finished.",
                                         is_error=True, timestamp=now_ms())
            result = dict(self._append(result)["message"])
            self._emit(ev.ToolExecutionEnd(call_id, name, result))
            raise
        result = tool_result_message(call_id, name, output_text, is_error=is_error, details=details or None,
                                     timestamp=now_ms(), images=images)
        result = dict(self._append(result)["message"])  # what the model and the notebook see: keys scrubbed
        self._emit(ev.ToolExecutionEnd(call_id, name, result))
        return result

    def close_dangling_calls(self) -> int:
        """Give every tool call of the last assistant message that has no result an error result
        (after an interrupt), so the session is always one a provider accepts. Returns how many."""
        missing = unanswered_tool_calls(self.session.path())
        for call in missing:
            self._append(tool_result_message(call.get("id", ""), call.get("name", ""), NOT_RUN_INTERRUPTED,
                                             is_error=True, timestamp=now_ms()))
        return len(missing)
