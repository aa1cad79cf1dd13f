"""The agent loop: call the model, run its tool calls, append every entry as it completes, and
keep the context inside the window — a budget check before every provider call (also inside tool
loops), compact-and-retry once on overflow, and a stop after three failed compactions in a row.

    agent = AgentLoop(session, model="openai:gpt-4.1-mini", tools=default_tools())
    agent.subscribe(print)
    agent.prompt("What is in data.csv?")

The loop has collaborators, each in its own module: what the next request holds and whether it
fits (:class:`~ipyagent.agent.budget.RequestBudget`), when and how to compact
(:class:`~ipyagent.agent.compactor.Compactor`), the system prompt and its record in the session
(:class:`~ipyagent.agent.prompt.record.SystemPromptRecord`), whether the server passed the tools on
(:class:`~ipyagent.agent.tool_support.ToolSupportCheck`), and where its events go
(:class:`~ipyagent.agent.run_events.RunOutput`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ipyagent.agent import run_events as ev
from ipyagent.agent.budget import RequestBudget, raw_token_ratio
from ipyagent.agent.compactor import OVERFLOW_GAVE_UP, AgentRunError, Compactor
from ipyagent.agent.ports import RunPorts, ToolResultSource
from ipyagent.agent.prompt.activity_block import format_activity
from ipyagent.agent.prompt.notebook_context import NotebookContext
from ipyagent.agent.prompt.record import SystemPromptRecord
from ipyagent.agent.redaction import Redactor
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tool_support import ToolSupportCheck
from ipyagent.agent.tools.approval import ApprovalPolicy, run_tool_call
from ipyagent.agent.tools.cell import CellRunner
from ipyagent.agent.tools.notebook_port import NotebookPort
from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.tool_registry import default_tools
from ipyagent.compaction.compact import FailureTracker
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import Summarizer
from ipyagent.core import Session
from ipyagent.hooks import AgentEndCall, BeforeProviderRequestCall, ContextCall, TurnEndCall
from ipyagent.providers.errors import ContextOverflowError, ProviderError, StreamInterrupted
from ipyagent.providers.overflow import is_silent_overflow
from ipyagent.providers.provider import MessageDone, ModelRequest, Provider, ProviderNote, Retrying, TextDelta
from ipyagent.providers.registry import ProviderRegistry, default_registry
from ipyagent.providers.transport.retry import stream_with_retry
from ipyagent.session.ids import now_ms
from ipyagent.session.messages import (
    CELL_PROMPT_FIELD,
    NOT_RUN_INTERRUPTED,
    call_arguments,
    text_block,
    text_of,
    tool_calls_of,
    tool_result_message,
    unanswered_tool_calls,
    user_message,
)
from ipyagent.session.tokens import normalize_usage
from ipyagent.shapes import ContentBlock, Entry, Message

__all__ = ["AgentLoop", "AgentRunError", "RunPorts", "RunResult", "ToolResultSource"]


@dataclass
class RunResult:
    new_entries: list[Entry] = field(default_factory=list)
    final_message: Message | None = None
    error: str | None = None

    @property
    def text(self) -> str:
        if not self.final_message:
            return ""
        return text_of(self.final_message.get("content", []), "\n")


class AgentLoop:
    def __init__(self, session: Session, model: str | None = None, tools: Iterable[Tool] | None = None,
                 settings: CompactionSettings | None = None, *, config: RunConfig | None = None,
                 namespace: dict[str, Any] | None = None, cwd: str = ".", approve: ApprovalCallback | None = None,
                 summarizer: Summarizer | None = None, sleep: Callable[[float], None] = time.sleep,
                 provider: Provider | None = None, tool_results: ToolResultSource | None = None,
                 notebook: NotebookContext | None = None, ports: RunPorts | None = None,
                 providers: ProviderRegistry | None = None):
        self.session = session
        # the providers by name and what is known of their models (the kernel's, passed in)
        self.providers = providers or default_registry()
        self.config = config or RunConfig()
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
        self.system = SystemPromptRecord(self.config.system_prompt, notebook)
        self._sleep = sleep
        self.failures = FailureTracker()
        self.cancel = threading.Event()
        self.output = ev.RunOutput()
        self.tool_support = ToolSupportCheck()

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

    def configure(self, *, session: Session | None = None, config: RunConfig | None = None,
                  tools: Iterable[Tool] | None = None, notebook: NotebookContext | None = None,
                  cwd: str | None = None, namespace: dict[str, Any] | None = None, root: str | None = None,
                  cell_runner: CellRunner | None = None, notebook_port: NotebookPort | None = None,
                  providers: ProviderRegistry | None = None) -> None:
        """Change what the agent works on between runs; what is not given stays as it is."""
        if providers is not None:
            self.providers = providers
        if session is not None:
            self.session = self.tool_context.history = session
        if config is not None:
            self.config = config
            self.system.base = config.system_prompt
        if tools is not None:
            self.tools = {t.name: t for t in tools}
        if notebook is not None:
            self.notebook = self.system.notebook = notebook
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

    @property
    def budget(self) -> RequestBudget:
        """What the next request holds and whether it fits (``agent/budget.py``), as set up now."""
        return RequestBudget(self.session, self.config, [t.spec() for t in self.tools.values()],
                             lambda: self.system.text(self.session, self.tools, self._ports.approve),
                             self.providers, self._provider)

    @property
    def compactor(self) -> Compactor:
        """When and how this agent compacts (``agent/compactor.py``), as set up now."""
        return Compactor(self.budget, self._ports, self.output, self.failures, self.cancel)

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Hear the run's events (``agent/run_events.py``); returns what unsubscribes."""
        return self.output.subscribe(listener)

    def redactor(self) -> Redactor:
        """What scrubs the configured keys from what the session stores (agent/redaction.py)."""
        return Redactor.configured(self.config.provider_options, extra=self.config.secrets)

    def _append(self, message: Message) -> Entry:
        """Store ``message``, the configured keys scrubbed from it."""
        return self.output.append(self.session, message, self.redactor())

    def _model(self) -> tuple[str, str]:
        if not self.config.model:
            raise AgentRunError("No model configured. Set one with %config Agent.model = \"openai:gpt-4.1-mini\" "
                                "(or the IPYAGENT_MODEL environment variable).")
        return self.providers.parse(self.config.model)

    def _provider(self) -> Provider:
        return self._ports.provider or self.providers.resolve(self.config.model, self.config.provider_options)[0]

    def compact(self, focus: str | None = None, *, reason: str = "manual",
                extra: Entry | None = None, plan: CompactionPlan | None = None,
                cancel: threading.Event | None = None, trigger: str | None = None) -> Entry | None:
        """Compact now. Manual compaction raises on failure; automatic compaction reports and counts it.

        ``plan`` (from ``prepare_compaction`` on the current path) compacts as planned, e.g. with
        another estimator's cut (the explorer); default: planned now with the session's settings.
        ``reason``: "manual", "threshold", "overflow" or "idle" (the kernel's idle time, off the
        main thread: ``cancel`` stops its summary request). The entry records what made it in its
        ``trigger`` field (``session/entries.py``'s TRIGGERS; ``trigger`` overrides it, as a
        replay does with the recorded one)."""
        return self.compactor.compact(focus, reason=reason, extra=extra, plan=plan, cancel=cancel, trigger=trigger)

    # ---- notebook activity -----------------------------------------------------------------

    def notebook_activity_block(self) -> str:
        """The notebook-activity block the next prompt would carry ("" when off or nothing happened)."""
        if self.notebook is None or not self.config.notebook_context:
            return ""
        return format_activity(self.notebook.activity(), self.config.notebook_context_tokens)

    def _prompt_message(self, text: str | list[ContentBlock], extra: dict[str, Any]) -> Message:
        block = self.notebook_activity_block() if isinstance(text, str) else ""
        if not block or not isinstance(text, str):
            return user_message(text, **extra)
        extra.setdefault(CELL_PROMPT_FIELD, text)
        return user_message([text_block(block), text_block(text)], **extra)

    # ---- the loop --------------------------------------------------------------------------

    def prompt(self, text: str | list[ContentBlock], *, compact_after: bool = True,
               **message_extra: Any) -> RunResult:
        """Send a prompt and run until the model stops. ``message_extra`` rides on the user
        message (e.g. ``cellId``); Pi ignores such fields. ``compact_after=False``: no compaction
        check once the run has ended (the kernel compacts in its idle time instead, kernel/idle.py)."""
        self._model()
        self.cancel.clear()
        entries = self.output.begin_run()
        result = RunResult(new_entries=entries)
        self.output.emit(ev.AgentStart(text if isinstance(text, str) else "[content blocks]"))
        sent = False
        try:
            self._begin(text)
            self._append(self._prompt_message(text, dict(message_extra)))
            sent = True
            result.final_message = self._run()
        except KeyboardInterrupt:
            self.close_dangling_calls()  # wherever it landed, no tool call is left without a result
            raise
        except AgentRunError as exc:
            result.error = self.redactor().text(str(exc))
            self.output.emit(ev.AgentError(result.error))
        finally:
            self.output.end_run()
            self.system.end()
            if sent and self.notebook is not None:
                self.notebook.prompt_sent()
            self.session.hooks.emit(AgentEndCall(self.session, [e["message"] for e in entries if "message" in e]))
            self.output.emit(ev.AgentEnd(entries, error=result.error))
        if result.error is None and self.config.compaction.enabled and compact_after:
            self.compactor.check_budget()
        return result

    def _begin(self, text: str | list[ContentBlock]) -> None:
        """Before the prompt is appended: the system prompt composed (and the skills it lists given
        to the tools), what it left out said, the window asked for, the budget checked, the system
        prompt recorded."""
        parts = self.system.begin(self.session, self.tools, self._ports.approve)
        skills = tuple(self.system.context.skills) if self.system.context is not None else ()
        self.tool_context.skills = skills
        self.tool_context.readable = tuple(s.folder for s in skills if s.readable)
        for line in self.system.notices():
            self.output.emit(ev.Notice(line))
        budget = self.budget
        budget.discover(prompt=text if isinstance(text, str) else "", emit=self.output.emit)
        self.compactor.check_budget()
        self.system.record(self.session, parts, budget.tool_specs, self.redactor(), self._append)

    def _run(self) -> Message | None:
        overflow_retried = False
        rounds = 0
        while True:
            compactor = self.compactor
            compactor.check_budget()
            compactor.check_request_fits()
            provider_name, model_id = self._model()
            try:
                message = self._call_model(model_id)
            except ContextOverflowError as exc:
                if exc.context_window:
                    self.providers.models.learn_window(provider_name, model_id, exc.context_window)
                if overflow_retried or not self.config.compaction.enabled:
                    raise AgentRunError(f"{exc}\n{OVERFLOW_GAVE_UP}") from exc
                overflow_retried = True
                compactor.recover_from_overflow(str(exc))
                continue
            if is_silent_overflow(message, self.budget.window()):
                if overflow_retried or not self.config.compaction.enabled:
                    raise AgentRunError(OVERFLOW_GAVE_UP)
                overflow_retried = True
                compactor.recover_from_overflow("the provider silently truncated the request")
                continue
            stored: Message = self._append(message)["message"]  # keys scrubbed; calls run as written
            if message.get("stopReason") == "aborted":
                raise AgentRunError("The response was cancelled.")
            calls = tool_calls_of(message)
            results = [self._run_tool(call) for call in calls]
            self.session.hooks.emit(TurnEndCall(self.session, stored, results))
            self.output.emit(ev.TurnEnd(stored, results))
            rounds += 1
            if not calls:
                return stored
            if self.config.max_tool_rounds and rounds >= self.config.max_tool_rounds:
                raise AgentRunError(f"Stopped after {rounds} tool round{'s' * (rounds != 1)} (Agent.max_tool_rounds).")

    def request(self, model_id: str) -> ModelRequest:
        """The request the next model call sends (after the ``context`` and ``before_provider_request``
        hooks): what ``%agent context`` shows."""
        messages = self.session.build_context()
        replaced = self.session.hooks.emit(ContextCall(self.session, messages))
        if replaced is not None and isinstance(replaced.messages, list):
            messages = replaced.messages
        system_prompt = self.system.text(self.session, self.tools, self._ports.approve)
        session_id = self.session.header.get("id")
        request = ModelRequest(model=model_id, messages=messages, system_prompt=system_prompt,
                               tools=[t.spec() for t in self.tools.values()],
                               max_tokens=self.config.max_output_tokens, reasoning=self.config.reasoning,
                               # the prompt-cache key: one session's requests share a warm cache
                               options={"session_id": session_id} if session_id else {},
                               model_info=self.providers.models.info(self._model()[0], model_id))
        sending = self.session.hooks.emit(BeforeProviderRequestCall(self.session, request))
        if sending is not None and isinstance(sending.payload, ModelRequest):
            request = sending.payload
        return request

    def _call_model(self, model_id: str) -> Message:
        provider, budget = self._provider(), self.budget
        request = self.tool_support.prepare(provider, self.request(model_id), budget.server())
        self.output.emit(ev.RequestStart(self.config.model, budget.request_tokens(), len(request.messages)))
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
                        self.output.notice_once(event.text, event.text)
                        continue
                    self.output.emit(event)
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
        notice = self.tool_support.judge(request, message, raw_token_ratio(budget.server()))
        if notice is not None:
            self.output.notice_once("tools-left-out", notice)
        return message

    def _aborted_message(self, model_id: str, text: str) -> Message:
        provider_name, _ = self._model()
        return {"role": "assistant", "content": [{"type": "text", "text": text}] if text else [],
                "api": "", "provider": provider_name, "model": model_id, "usage": normalize_usage({}),
                "stopReason": "aborted", "errorMessage": "Interrupted by the user", "timestamp": now_ms()}

    def _run_tool(self, call: ContentBlock) -> Message:
        name, call_id = call.get("name", ""), call.get("id", "")
        arguments = call_arguments(call)
        tool = self.tools.get(name)
        try:
            # inside the try: an interrupt here still closes the call
            self.output.emit(ev.ToolExecutionStart(call_id, name, arguments))
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
            result = self._append(result)["message"].copy()
            self.output.emit(ev.ToolExecutionEnd(call_id, name, result))
            raise
        result = tool_result_message(call_id, name, output_text, is_error=is_error, details=details or None,
                                     timestamp=now_ms(), images=images)
        result = self._append(result)["message"].copy()  # what the model and the notebook see: keys scrubbed
        self.output.emit(ev.ToolExecutionEnd(call_id, name, result))
        return result

    def close_dangling_calls(self) -> int:
        """Give every tool call of the last assistant message that has no result an error result
        (after an interrupt), so the session is always one a provider accepts. Returns how many."""
        missing = unanswered_tool_calls(self.session.path())
        for call in missing:
            self._append(tool_result_message(call.get("id", ""), call.get("name", ""), NOT_RUN_INTERRUPTED,
                                             is_error=True, timestamp=now_ms()))
        return len(missing)
