"""A run's entries reach the notebook as they are made, not when the cell ends.

:class:`EntryStream` listens to a run's agent events and hands each new entry of the slot to
:meth:`Persister.stream <ipyagent.kernel.persistence.Persister.stream>` (the bridge), batching the
entries made within ``window`` seconds of the last message into one. It sends at once, whatever
the window, right before anything that may take long or never return: a tool call (the code may
kill its own kernel, as an out-of-memory kill would), a provider request, a compaction, and the
run's end. So a kernel that dies mid-run loses at most the step in flight.

Everything runs on the thread that runs the cell (the agent emits its events there), so the
messages carry the cell's parent header like the rest of its output; no timer thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ipyagent.agent import run_events as ev
from ipyagent.shapes import Entry

__all__ = ["EntryStream", "BATCH_WINDOW"]

BATCH_WINDOW = 0.1  # s
# events after which the loop may wait a long time (or never come back): send what is pending first
_BARRIERS = (ev.ToolExecutionStart, ev.RequestStart, ev.CompactionStart, ev.AgentEnd, ev.AgentError, ev.TurnEnd)


class EntryStream:
    """Send a slot's new entries through ``send(entries)`` while a run goes on (see the module)."""

    def __init__(self, entries: Callable[[], list[Entry]], send: Callable[[list[Entry]], Any],
                 *, window: float = BATCH_WINDOW, clock: Callable[[], float] = time.monotonic,
                 already: Callable[[Mapping[str, Any]], bool] = lambda entry: False):
        self._entries = entries  # the session's entries, in arrival order (append-only)
        # the first message also carries the entries made before the run's first event that the
        # notebook lacks (``already``: the notebook holds it), e.g. a reset notice
        self._send = send
        self._window = window
        self._clock = clock
        self._cursor = 0
        self._already = already
        self._last = float("-inf")
        self.messages = 0

    def __call__(self, event: Any) -> None:
        if isinstance(event, _BARRIERS):
            self.flush()
        elif isinstance(event, ev.EntryAppended) or self._pending():
            if self._clock() - self._last >= self._window:
                self.flush()

    def _pending(self) -> bool:
        return len(self._entries()) > self._cursor

    def flush(self) -> None:
        entries = self._entries()
        if self._cursor == 0:  # the first message: every entry the notebook does not hold yet
            batch = [e for e in entries if not self._already(e)]
        else:
            batch = entries[self._cursor:]
        self._cursor = len(entries)
        if batch:
            self._last = self._clock()
            self._send(batch)
            self.messages += 1
