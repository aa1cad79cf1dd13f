"""Pi's output limits: 2000 lines or 50 KB, whichever comes first, never cutting a line in half.

``truncate_head`` keeps the start (file reads, listings); ``truncate_tail`` keeps the end (command
output, where the errors and final results are). Both report what they cut so tools can say so.
A single line over the byte limit: ``truncate_tail`` keeps its end; ``truncate_head`` keeps nothing
(a file read points at ``sed`` instead), unless asked to keep its start (``cut_long_line``, for
results that have no other way to be read, such as an MCP tool's).
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Literal

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500


@dataclass
class Truncation:
    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    # Tail only: the one kept line was longer than the byte limit and was cut from its start.
    last_line_partial: bool = False
    # Head only: the first line alone is over the byte limit, so nothing could be kept.
    first_line_exceeds_limit: bool = False
    # Head only, with cut_long_line: that first line was cut by characters and its start kept.
    first_line_partial: bool = False

    def as_details(self) -> dict[str, object]:
        return {
            "truncated_by": self.truncated_by,
            "total_lines": self.total_lines,
            "total_bytes": self.total_bytes,
            "output_lines": self.output_lines,
            "output_bytes": self.output_bytes,
        }


def format_size(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes}B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.1f}KB"
    return f"{n_bytes / (1024 * 1024):.1f}MB"


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", errors="replace"))


def _untruncated(text: str, lines: list[str], total_bytes: int) -> Truncation:
    n = len(lines)
    return Truncation(text, False, None, n, total_bytes, n, total_bytes)


def truncate_head(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES, *,
    cut_long_line: bool = False,
) -> Truncation:
    lines = text.split("\n")
    total_bytes = _nbytes(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, lines, total_bytes)
    if _nbytes(lines[0]) > max_bytes:
        if cut_long_line:
            start = _head_bytes(lines[0], max_bytes)
            return Truncation(start, True, "bytes", len(lines), total_bytes, 1, _nbytes(start),
                              first_line_partial=True)
        return Truncation("", True, "bytes", len(lines), total_bytes, 0, 0, first_line_exceeds_limit=True)

    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines[:max_lines]:
        size = _nbytes(line) + (1 if kept else 0)
        if used + size > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        used += size
    return Truncation("\n".join(kept), True, by, len(lines), total_bytes, len(kept), used)


def _head_bytes(line: str, max_bytes: int) -> str:
    # "ignore" drops a character cut in half at the end: the start stays whole characters
    return line.encode("utf-8", errors="replace")[:max_bytes].decode("utf-8", errors="ignore")


def _tail_bytes(line: str, max_bytes: int) -> str:
    data = line.encode("utf-8", errors="replace")[-max_bytes:]
    # Dropping leading continuation bytes keeps us on a character boundary.
    start = 0
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8")


def truncate_tail(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    lines = text.split("\n")
    total_bytes = _nbytes(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, lines, total_bytes)

    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        size = _nbytes(line) + (1 if kept else 0)
        if used + size > max_bytes:
            by = "bytes"
            if not kept:
                line = _tail_bytes(line, max_bytes)
                kept.append(line)
                used = _nbytes(line)
                partial = True
            break
        kept.append(line)
        used += size
    kept.reverse()
    return Truncation("\n".join(kept), True, by, len(lines), total_bytes, len(kept), used, partial)


def cut_result(text: str, tool: str) -> str:
    """A tool's result text within the limits, its start kept (a single long line cut by
    characters), with a line saying what was cut: for results that come whole from elsewhere (a
    function tool's return value, an MCP server's result, a plugin's tool; see
    :func:`bounded_result`)."""
    cut = truncate_head(text, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, cut_long_line=True)
    if cut.first_line_partial:  # one long line (a JSON document, say): its start, cut by characters
        return cut.content + (f"\n\n[{tool}: output cut to the first {format_size(cut.output_bytes)} of line 1 "
                              f"({format_size(cut.total_bytes)}; {cut.total_lines} lines in all)]")
    if cut.truncated:
        return cut.content + f"\n\n[{tool}: output cut to {cut.output_lines} lines of {cut.total_lines}]"
    return text


# what a built-in's result may hold beyond the limits: its own notice of what it cut
NOTICE_MARGIN_LINES = 20
NOTICE_MARGIN_BYTES = 4 * 1024


def bounded_result(text: str, tool: str) -> str:
    """Every tool's result on its way into the session: the built-ins cut their own (a tail, a
    window of a file…) and pass unchanged; a result past the limits and the margin of a notice —
    a plugin's tool that returns 20 MB — is cut by :func:`cut_result`."""
    if len(text) <= DEFAULT_MAX_BYTES // 4:  # fewer characters than any limit can be over (4 bytes each at most)
        return text
    if text.count("\n") < DEFAULT_MAX_LINES + NOTICE_MARGIN_LINES \
            and _nbytes(text) <= DEFAULT_MAX_BYTES + NOTICE_MARGIN_BYTES:
        return text
    return cut_result(text, tool)


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    if len(line) <= max_chars:
        return line, False
    return line[:max_chars] + "... [truncated]", True


def save_full_output(text: str, prefix: str) -> str:
    """Write output that was cut to a temp file, so the notice can point the model at it."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
    return path


def tail_notice(t: Truncation, full_output_path: str, label: str = "Full output") -> str:
    """The notice appended to tail-truncated command output (bash, python); ``label`` names what
    the file holds."""
    start = t.total_lines - t.output_lines + 1
    end = t.total_lines
    if t.last_line_partial:
        return (
            f"[Showing last {format_size(t.output_bytes)} of line {end}. "
            f"{label}: {full_output_path}]"
        )
    if t.truncated_by == "lines":
        return f"[Showing lines {start}-{end} of {t.total_lines}. {label}: {full_output_path}]"
    return (
        f"[Showing lines {start}-{end} of {t.total_lines} ({format_size(DEFAULT_MAX_BYTES)} limit). "
        f"{label}: {full_output_path}]"
    )


ROLLING_HEAD_CHARS = 10 * 1024
ROLLING_TAIL_CHARS = 2 * DEFAULT_MAX_BYTES  # as much as bash keeps of a command's end


class RollingText(io.TextIOBase):
    """A text stream (``sys.stdout`` for a ``python`` call) that keeps the first ``head`` and the
    last ``tail`` characters written and only counts the rest, so a call that prints without end
    costs the kernel a fixed amount of memory. :meth:`getvalue` puts one line in place of what was
    left out, saying how much it was; :attr:`left_out_lines` is how many lines fewer it holds than
    were written."""

    def __init__(self, head: int = ROLLING_HEAD_CHARS, tail: int = ROLLING_TAIL_CHARS):
        super().__init__()
        self._head_room, self._tail_room = head, tail
        self._head: list[str] = []
        self._tail: list[str] = []
        self._tail_chars = 0
        self._trim_at = 2 * tail  # the tail is trimmed in batches: each write stays O(1)
        self._middle_chars = 0  # characters dropped between the head and the tail kept
        self._middle_newlines = 0
        self.left_out_lines = 0  # set by getvalue

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if self._head_room or not isinstance(s, str):  # the common case below stays short: print calls it twice a line
            return self._write_head(s)
        self._tail.append(s)
        self._tail_chars += len(s)
        if self._tail_chars > self._trim_at:
            self._trim()
        return len(s)

    def _write_head(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        part = s[:self._head_room]
        self._head.append(part)
        self._head_room -= len(part)
        rest = s[len(part):]
        if rest:
            self._tail.append(rest)
            self._tail_chars += len(rest)
        return len(s)

    def _trim(self) -> None:
        text = "".join(self._tail)
        cut = max(0, len(text) - self._tail_room)
        self._middle_chars += cut
        self._middle_newlines += text.count("\n", 0, cut)
        self._tail, self._tail_chars = [text[cut:]], len(text) - cut

    def getvalue(self) -> str:
        self._trim()
        head, tail = "".join(self._head), "".join(self._tail)
        if not self._middle_chars:
            self.left_out_lines = 0
            return head + tail
        # whole lines only: the head's unfinished last line and the tail's first go with the middle
        end = head.rfind("\n") + 1
        kept_head = head[:end] if end else head + "\n"  # a head of one unfinished line: all of it
        first = tail.find("\n")
        skip = first + 1 if 0 <= first < len(tail) - 1 else 0
        chars = self._middle_chars + (len(head) - end if end else 0) + skip
        newlines = self._middle_newlines + (1 if skip else 0)
        self.left_out_lines = max(0, newlines - 1)  # one line now stands for them
        what = f"{newlines:,} lines ({chars:,} characters)" if newlines > 1 else f"{chars:,} characters"
        return f"{kept_head}[... {what} left out here: not kept ...]\n{tail[skip:]}"


# ANSI escape sequences (CSI and OSC), then C0 controls other than tab and newline.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_output(text: str) -> str:
    """Strip colours and control characters so binary or terminal output can't garble a message."""
    return _CONTROL.sub("", _ANSI.sub("", text))
