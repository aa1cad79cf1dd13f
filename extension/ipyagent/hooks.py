"""Hooks: Python functions (or plugins, ``register_hooks`` in ``ipyagent/plugins``) that observe or
steer compaction, tree navigation and provider calls; and the plugins' pluggy markers
(:data:`hookimpl`, :data:`hookspec`), here so that every layer can mark its built-in plugin.

    from ipyagent.hooks import hooks

    @hooks.on("session_before_compact")
    def cheaper_summary(event):
        if event.reason == "threshold":
            return {"cancel": True}

Result rules (Pi's): handlers run in registration order; for "before" events the last truthy
result wins and a result with ``cancel`` returns at once. A handler that raises is reported
(``registry.errors`` and a warning) and does not break the session.
"""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import pluggy

EVENTS = (
    "session_before_compact",
    "session_compact",
    "session_before_tree",
    "session_tree",
    "context",
    "before_provider_request",
    "turn_end",
    "agent_end",
)
PROJECT = "ipyagent"  # pluggy's project name, and the plugins' entry-point group
hookimpl = pluggy.HookimplMarker(PROJECT)
hookspec = pluggy.HookspecMarker(PROJECT)

Handler = Callable[["HookEvent"], Any]
H = TypeVar("H", bound=Handler)


class HookEvent:
    """The payload of one event; fields are attributes (``event.preparation``, ``event.messages``)."""

    def __init__(self, type: str, **fields: Any):
        self.type = type
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        names = ", ".join(k for k in self.__dict__ if k != "type")
        return f"HookEvent({self.type!r}: {names})"


@dataclass
class HookError:
    event: str
    handler: str
    error: str


@dataclass
class HookRegistry:
    handlers: dict[str, list[Handler]] = field(default_factory=lambda: {e: [] for e in EVENTS})
    errors: list[HookError] = field(default_factory=list)

    @overload
    def on(self, event: str, handler: None = None) -> Callable[[H], H]: ...

    @overload
    def on(self, event: str, handler: H) -> H: ...

    def on(self, event: str, handler: H | None = None) -> H | Callable[[H], H]:
        """Register ``handler`` for ``event``; usable as ``@registry.on("event")``."""
        if event not in self.handlers:
            raise ValueError(f"unknown hook event {event!r}; events are: {', '.join(EVENTS)}")

        def register(fn: H) -> H:
            self.handlers[event].append(fn)
            return fn

        return register(handler) if handler is not None else register

    def off(self, event: str, handler: Handler) -> None:
        if handler in self.handlers.get(event, []):
            self.handlers[event].remove(handler)

    def clear(self) -> None:
        for handlers in self.handlers.values():
            handlers.clear()

    def has(self, event: str) -> bool:
        return bool(self.handlers.get(event))

    def emit(self, event: str, **fields: Any) -> Any:
        """Run the handlers; return the last truthy result, or the first one that cancels."""
        payload = HookEvent(event, **fields)
        result = None
        for handler in list(self.handlers.get(event, [])):
            try:
                value = handler(payload)
            except Exception as exc:  # noqa: BLE001 - a hook's failure is reported, never fatal
                name = getattr(handler, "__qualname__", repr(handler))
                self.errors.append(HookError(event, name, "".join(traceback.format_exception_only(exc)).strip()))
                warnings.warn(f"ipyagent hook {name} failed on {event}: {exc}", RuntimeWarning, stacklevel=2)
                continue
            if value:
                result = value
                if _cancels(value):
                    return value
        return result


def _cancels(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value.get("cancel"))
    return bool(getattr(value, "cancel", False))


hooks = HookRegistry()  # the process-wide registry; a Session may be given its own
