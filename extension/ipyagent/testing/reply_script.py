"""The replies a test scripts for the fake provider server, in the order they are to come.

Chat requests take the next queued reply, summary requests the next queued summary; when a queue
is empty the ``policy`` answers (``policy(request_json)``: a reply, its text, or None), and a
summary request without either gets a default summary. A reply is a
:class:`~ipyagent.testing.specs.Reply`, a :class:`~ipyagent.testing.specs.Fault` or a
:class:`~ipyagent.testing.specs.RawStream`; the ``enqueue_*`` methods build the common ones.
:class:`~ipyagent.testing.fake_server.FakeProviderServer` serves them.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ipyagent.testing.specs import Fault, RawStream, Reply, ToolCallSpec

__all__ = ["DEFAULT_SUMMARY", "Policy", "ReplyScript", "Spec"]

Spec = Reply | Fault | RawStream
Policy = Callable[[dict[str, Any]], "Spec | str | None"]
DEFAULT_SUMMARY = ("## Goal\nContinue the user's task.\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n"
                   "### Done\n- [x] Earlier work (fake summary {n})\n\n## Key Decisions\n- (none)\n\n## Next Steps\n"
                   "1. Continue.\n\n## Critical Context\n- (none)")


class ReplyScript:
    """Queued replies and summaries, and the policy after them (see the module docstring)."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy
        self._queue: deque[Spec] = deque()
        self._summaries: deque[Spec] = deque()
        self._script_lock = threading.Lock()

    def enqueue(self, spec: Spec) -> None:
        with self._script_lock:
            self._queue.append(spec)

    def enqueue_text(self, text: str, **reply: Any) -> None:
        self.enqueue(Reply(text=text, **reply))

    def enqueue_tool_call(self, name: str, arguments: dict[str, Any], *, id: str | None = None, text: str = "",
                          **reply: Any) -> None:
        self.enqueue(Reply(text=text, tool_calls=[ToolCallSpec(name, arguments, id)], **reply))

    def enqueue_tool_calls(self, calls: list[tuple[str, dict[str, Any]] | ToolCallSpec], *, text: str = "",
                           **reply: Any) -> None:
        specs = [c if isinstance(c, ToolCallSpec) else ToolCallSpec(c[0], c[1]) for c in calls]
        self.enqueue(Reply(text=text, tool_calls=specs, **reply))

    def enqueue_raw(self, chunks: list[bytes | str], *, delay: float | None = None) -> None:
        self.enqueue(RawStream(list(chunks), delay))

    def enqueue_summary(self, summary: str | Spec) -> None:
        with self._script_lock:
            self._summaries.append(Reply(text=summary) if isinstance(summary, str) else summary)

    def enqueue_error(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
                      error_type: str | None = None) -> None:
        self.enqueue(Fault("status", status=status, body=body, headers=dict(headers or {}), error_type=error_type))

    def enqueue_rate_limit(self, retry_after: float | str | None = 1, *, header: str = "retry-after") -> None:
        value = retry_after if isinstance(retry_after, str) else (None if retry_after is None else f"{retry_after:g}")
        self.enqueue_error(429, headers={header: value} if value is not None else {})

    def enqueue_auth_error(self) -> None:
        self.enqueue_error(401)

    def enqueue_cut(self, text: str = "This reply will be cut short before it ends.", *, after_chunks: int = 3,
                    clean: bool = False) -> None:
        self.enqueue(Fault("cut", after_chunks=after_chunks, clean=clean, reply=Reply(text=text)))

    def enqueue_malformed(self, *, after_chunks: int = 2) -> None:
        self.enqueue(Fault("malformed", after_chunks=after_chunks))

    def enqueue_stream_error(self, error_type: str | None = None, *, after_chunks: int = 2) -> None:
        self.enqueue(Fault("stream_error", after_chunks=after_chunks, error_type=error_type))

    def enqueue_overflow(self, style: str | None = None, *, window: int = 8192) -> None:
        self.enqueue(Fault("overflow", status=400, error_type=style, window=window))

    def enqueue_empty_stream(self) -> None:
        """The next streamed reply is a ``200`` whose stream closes before its first event."""
        self.enqueue(Fault("empty"))

    def enqueue_hangup(self) -> None:
        """The next request gets no answer at all: the connection closes at once."""
        self.enqueue(Fault("hangup"))

    def pending(self) -> int:
        """Chat replies queued and not yet taken."""
        return len(self._queue)

    def next_reply(self, kind: str, body: dict[str, Any], summaries_before: int) -> Spec | None:
        """The reply to a ``kind`` request ("chat" or "summary") with JSON ``body``: the next queued
        one, else the policy's, else (a summary) the default summary numbered ``summaries_before``;
        None when nothing answers."""
        with self._script_lock:
            if kind == "summary" and self._summaries:
                return self._summaries.popleft()
            if kind == "chat" and self._queue:
                return self._queue.popleft()
        if self.policy is not None:
            chosen = self.policy(body)
            if chosen is not None:
                return Reply(text=chosen) if isinstance(chosen, str) else chosen
        if kind == "summary":
            return Reply(text=DEFAULT_SUMMARY.format(n=summaries_before))
        return None
