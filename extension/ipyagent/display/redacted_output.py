"""Everything a block of code outputs, scrubbed by one redactor: what it prints (stdout and stderr,
a line at a time, so a secret written in pieces is still whole when it is scrubbed), what it
displays (every MIME type of every bundle, through the shell's display publisher), and the message
of the exception it raises (IPython prints a ``UsageError``'s; a traceback quotes the others')::

    with redacted_output(shell, redactor):
        command(...)

The ``%agent`` commands run inside it (``kernel/magics/commands.py``), so a command cannot forget
to scrub its output. Like IPython's own ``capture_output``, it swaps the shell's display publisher
and ``sys.stdout``/``sys.stderr`` while the block runs; output from other threads meanwhile is
scrubbed too.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from IPython.core.displaypub import DisplayPublisher

from ipyagent.agent.redaction import Redactor

__all__ = ["redacted_output"]

Redact = Callable[[str], str]


class _RedactedStream:
    """A text stream that writes whole lines, scrubbed, to ``inner`` (the rest on ``flush``)."""

    def __init__(self, inner: Any, redact: Redact):
        self._inner, self._redact = inner, redact
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            head, newline, self._pending = (self._pending + text).rpartition("\n")
            if newline:
                self._inner.write(self._redact(head + newline))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, ""
            if pending:
                self._inner.write(self._redact(pending))
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno…: the stream's own
        return getattr(self._inner, name)


class _RedactedPublisher(DisplayPublisher):
    """The shell's display publisher, with every bundle scrubbed before it is published."""

    def __init__(self, inner: Any, redactor: Redactor, shell: Any):
        super().__init__(shell=shell)  # type: ignore[no-untyped-call]
        self._inner, self._redactor = inner, redactor

    def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:
        self._inner.publish(self._redactor.data(data), self._redactor.data(metadata), *args, **kwargs)

    def clear_output(self, wait: bool = False) -> None:
        self._inner.clear_output(wait)

    def __getattr__(self, name: str) -> Any:  # set_parent, parent_header, session…: the kernel's own
        return getattr(self._inner, name)


@contextlib.contextmanager
def redacted_output(shell: Any, redactor: Redactor) -> Iterator[None]:
    """Scrub what the block prints, displays and raises with ``redactor``."""
    publisher = getattr(shell, "display_pub", None)
    out, err = _RedactedStream(sys.stdout, redactor.text), _RedactedStream(sys.stderr, redactor.text)
    if publisher is not None:
        shell.display_pub = _RedactedPublisher(publisher, redactor, shell)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                yield
            except Exception as exc:
                exc.args = redactor.data(exc.args)  # its message, as shown
                raise
            finally:
                out.flush()
                err.flush()
    finally:
        if publisher is not None:
            shell.display_pub = publisher
