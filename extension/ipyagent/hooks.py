"""Session hooks: Python functions that observe or steer compaction, tree navigation and provider
calls, as Pi's extension hooks do (``reference/pi.md`` §6.1). Register one with :meth:`HookRegistry.on`
(a plugin does so in its ``register_hooks`` plugin hook, ``ipyagent/plugins``)::

    from ipyagent.hooks import SessionBeforeCompactResult, hooks

    @hooks.on("session_before_compact")
    def no_automatic_compaction(call):
        if call.reason == "threshold":
            return SessionBeforeCompactResult(cancel=True)

A handler is called with a *hook call*: one dataclass per session hook (:data:`CALLS`), its fields
as attributes (``call.preparation``, ``call.messages``). The hooks that steer return a result
dataclass (:class:`SessionBeforeCompactResult`, :class:`SessionBeforeTreeResult`,
:class:`ContextResult`, :class:`BeforeProviderRequestResult`), or a ``dict`` with Pi's field
names (``{"cancel": True}``, ``{"compaction": {"summary": …, "firstKeptEntryId": …}}``), read into
that dataclass here; what the other hooks return is ignored.

Result rules (Pi's): handlers run in registration order; the last result wins and a result that
cancels returns at once. A handler that raises, or returns what its hook cannot take, is reported
(``registry.errors`` and a warning) and does not break the session.
"""

from __future__ import annotations

import builtins
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar, overload

from ipyagent.shapes import Entry, Message

__all__ = ["CALLS", "SESSION_HOOKS", "AgentEndCall", "BeforeProviderRequestCall", "BeforeProviderRequestResult",
           "ContextCall", "ContextResult", "HookCall", "HookError", "HookRegistry", "SessionBeforeCompactCall",
           "SessionBeforeCompactResult", "SessionBeforeTreeCall", "SessionBeforeTreeResult", "SessionCompactCall",
           "SessionTreeCall", "SuppliedBranchSummary", "SuppliedCompaction", "TreePreparation", "TurnEndCall", "hooks"]

R = TypeVar("R")


class HookResultError(TypeError):
    """A handler returned what its hook cannot take."""


@dataclass
class HookCall(Generic[R]):
    """What the handlers of one session hook are called with (``type``: the hook's name)."""

    type: ClassVar[str] = ""
    result_type: ClassVar[builtins.type[Any] | None] = None  # what a handler may return (None: its result is ignored)
    session: Any = None  # the ipyagent.core.Session

    def result_of(self, value: Any) -> R | None:
        """``value`` (a handler's return) as this hook's result; None when it gives none."""
        if self.result_type is None or not value:
            return None
        result: R = read_result(self.result_type, value)
        return result


# ---- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuppliedCompaction:
    """A compaction a ``session_before_compact`` handler wrote itself; what it leaves out is the plan's."""

    summary: str = ""  # (an empty one is refused: the session is left as it was)
    first_kept_entry_id: str | None = None
    tokens_before: int | None = None
    details: Any = None


@dataclass(frozen=True)
class SessionBeforeCompactResult:
    cancel: bool = False
    compaction: SuppliedCompaction | None = None  # replaces the summariser


@dataclass(frozen=True)
class SuppliedBranchSummary:
    """A branch summary a ``session_before_tree`` handler wrote itself."""

    summary: str = ""
    details: Any = None


@dataclass(frozen=True)
class SessionBeforeTreeResult:
    cancel: bool = False
    summary: SuppliedBranchSummary | None = None
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


@dataclass(frozen=True)
class ContextResult:
    messages: list[Message]  # the messages the model gets instead


@dataclass(frozen=True)
class BeforeProviderRequestResult:
    payload: Any  # the ipyagent.providers.provider.ModelRequest sent instead


# the results' fields that Pi names otherwise (camelCase): a dict result uses Pi's names
_PI_NAMES = {"first_kept_entry_id": "firstKeptEntryId", "tokens_before": "tokensBefore",
             "custom_instructions": "customInstructions", "replace_instructions": "replaceInstructions"}
_NESTED: dict[tuple[type[Any], str], type[Any]] = {
    (SessionBeforeCompactResult, "compaction"): SuppliedCompaction,
    (SessionBeforeTreeResult, "summary"): SuppliedBranchSummary,
}


def read_result(result_type: type[Any], value: Any) -> Any:
    """``value`` as a ``result_type``: the dataclass itself, or a dict with Pi's field names.
    Raises :class:`HookResultError` for anything else (an unknown field, another type)."""
    if isinstance(value, result_type):
        return value
    if not isinstance(value, Mapping):
        raise HookResultError(f"returned a {type(value).__name__}, not a {result_type.__name__} or a dict")
    names = {_PI_NAMES.get(f.name, f.name): f.name for f in fields(result_type)}  # Pi's name -> the field
    given: dict[str, Any] = {}
    for key, item in value.items():
        name = names.get(key)
        if name is None:
            raise HookResultError(f"returned an unknown field {key!r} for {result_type.__name__} "
                                  f"(Pi's fields: {', '.join(names)})")
        nested = _NESTED.get((result_type, name))
        if nested is not None:
            item = read_result(nested, item) if item else None
        given[name] = item
    try:
        return result_type(**given)
    except TypeError as exc:  # a required field left out
        raise HookResultError(f"returned an incomplete {result_type.__name__}: {exc}") from None


# ---- the calls -----------------------------------------------------------------------------------


@dataclass
class SessionBeforeCompactCall(HookCall[SessionBeforeCompactResult]):
    type: ClassVar[str] = "session_before_compact"
    result_type: ClassVar[builtins.type[Any] | None] = SessionBeforeCompactResult
    preparation: Any = None  # the ipyagent.compaction.prepare.CompactionPlan
    branch_entries: list[Entry] = field(default_factory=list)
    custom_instructions: str | None = None  # the user's focus
    reason: str = "manual"  # "manual", "threshold", "overflow" or "idle"


@dataclass
class SessionCompactCall(HookCall[None]):
    type: ClassVar[str] = "session_compact"
    compaction_entry: Entry | None = None
    from_extension: bool = False  # a handler wrote the summary


@dataclass(frozen=True)
class TreePreparation:
    """What ``navigate`` is about to do (Pi's ``TreePreparation``)."""

    target_id: str = ""
    old_leaf_id: str | None = None
    common_ancestor_id: str | None = None
    entries_to_summarize: list[Entry] = field(default_factory=list)
    user_wants_summary: bool = False
    custom_instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None


@dataclass
class SessionBeforeTreeCall(HookCall[SessionBeforeTreeResult]):
    type: ClassVar[str] = "session_before_tree"
    result_type: ClassVar[builtins.type[Any] | None] = SessionBeforeTreeResult
    preparation: TreePreparation = field(default_factory=TreePreparation)


@dataclass
class SessionTreeCall(HookCall[None]):
    type: ClassVar[str] = "session_tree"
    new_leaf_id: str | None = None
    old_leaf_id: str | None = None
    summary_entry: Entry | None = None
    from_extension: bool = False


@dataclass
class ContextCall(HookCall[ContextResult]):
    type: ClassVar[str] = "context"
    result_type: ClassVar[builtins.type[Any] | None] = ContextResult
    messages: list[Message] = field(default_factory=list)


@dataclass
class BeforeProviderRequestCall(HookCall[BeforeProviderRequestResult]):
    type: ClassVar[str] = "before_provider_request"
    result_type: ClassVar[builtins.type[Any] | None] = BeforeProviderRequestResult
    payload: Any = None  # the ipyagent.providers.provider.ModelRequest


@dataclass
class TurnEndCall(HookCall[None]):
    type: ClassVar[str] = "turn_end"
    message: Message | None = None  # the assistant message
    tool_results: list[Message] = field(default_factory=list)


@dataclass
class AgentEndCall(HookCall[None]):
    type: ClassVar[str] = "agent_end"
    messages: list[Message] = field(default_factory=list)  # the run's new messages


CALLS: dict[str, type[HookCall[Any]]] = {c.type: c for c in (
    SessionBeforeCompactCall, SessionCompactCall, SessionBeforeTreeCall, SessionTreeCall, ContextCall,
    BeforeProviderRequestCall, TurnEndCall, AgentEndCall)}
SESSION_HOOKS = tuple(CALLS)  # the session hooks' names

Handler = Callable[[Any], Any]  # called with the hook's HookCall
H = TypeVar("H", bound=Handler)


@dataclass
class HookError:
    hook: str
    handler: str
    error: str


@dataclass
class HookRegistry:
    handlers: dict[str, list[Handler]] = field(default_factory=lambda: {name: [] for name in SESSION_HOOKS})
    errors: list[HookError] = field(default_factory=list)

    @overload
    def on(self, hook: str, handler: None = None) -> Callable[[H], H]: ...

    @overload
    def on(self, hook: str, handler: H) -> H: ...

    def on(self, hook: str, handler: H | None = None) -> H | Callable[[H], H]:
        """Register ``handler`` for the session hook ``hook``; usable as ``@registry.on("hook")``."""
        if hook not in self.handlers:
            raise ValueError(f"unknown session hook {hook!r}; session hooks are: {', '.join(SESSION_HOOKS)}")

        def register(fn: H) -> H:
            self.handlers[hook].append(fn)
            return fn

        return register(handler) if handler is not None else register

    def off(self, hook: str, handler: Handler) -> None:
        """Unregister ``handler`` from ``hook`` (nothing happens if it was not registered)."""
        if handler in self.handlers.get(hook, []):
            self.handlers[hook].remove(handler)

    def clear(self) -> None:
        for handlers in self.handlers.values():
            handlers.clear()

    def has(self, hook: str) -> bool:
        """Whether ``hook`` has a handler."""
        return bool(self.handlers.get(hook))

    def emit(self, call: HookCall[R]) -> R | None:
        """Call the handlers of ``call``'s hook; return the last result, or the first that cancels."""
        result = None
        for handler in list(self.handlers.get(call.type, [])):
            try:
                value = call.result_of(handler(call))
            except Exception as exc:  # noqa: BLE001 - a hook's failure is reported, never fatal
                name = getattr(handler, "__qualname__", repr(handler))
                self.errors.append(HookError(call.type, name, "".join(traceback.format_exception_only(exc)).strip()))
                warnings.warn(f"ipyagent hook {name} failed on {call.type}: {exc}", RuntimeWarning, stacklevel=2)
                continue
            if value is not None:
                result = value
                if getattr(value, "cancel", False):
                    return value
        return result


hooks = HookRegistry()  # the process-wide registry; a Session may be given its own
