"""A window of a file's lines, read in chunks with bounded memory and a byte budget.

``read`` needs a few lines of a file and the number of lines in it. Reading the whole file into
memory would let a huge (or sparse) file take the kernel down, so :func:`scan_lines` reads at
most ``budget`` bytes, keeps at most ``keep`` bytes of the requested window, and only counts the
newlines everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

from ipyagent.agent.tools.paths import SNIFF_BYTES

CHUNK_BYTES = 1 << 16


@dataclass
class LineScan:
    head: bytes  # the file's first bytes, for binary sniffing
    window: bytes  # the window's bytes from the start of its first line, at most ``keep``
    complete: bool  # the whole file was read: the counts below are exact
    newlines: int  # newlines in the part read
    ends_with_newline: bool  # the part read ends with a newline (or is empty)
    bytes_read: int
    window_start: int | None  # byte offset of the window's first line; None if the part read has fewer lines
    window_end: int | None  # byte offset where the window ends (after its last line's newline); None: unknown
    first_line_bytes: int | None  # length of the window's first line without its newline; None: unknown

    @property
    def total_lines(self) -> int:
        """Lines in the part read, counted like Pi: a final newline does not start another line."""
        return self.newlines + (0 if self.ends_with_newline else 1)


def _nth_newline(chunk: bytes, n: int) -> int:
    """The index of the ``n``-th newline (1-based) in ``chunk``, which has at least ``n``."""
    pos = -1
    for _ in range(n):
        pos = chunk.index(b"\n", pos + 1)
    return pos


def scan_lines(f: BinaryIO, start: int, stop: int | None, *, keep: int, budget: int) -> LineScan:
    """Lines ``start`` (0-based) up to ``stop`` (exclusive, None: to the end) of ``f``.

    Reads at most ``budget`` bytes; the window's bytes beyond ``keep`` are counted, not kept.
    """
    head = bytearray()
    window = bytearray()
    newlines = 0
    offset = 0  # of the current chunk in the file
    window_start: int | None = 0 if start == 0 else None
    window_end: int | None = None
    first_end: int | None = None  # offset of the newline that ends the window's first line
    last = b"\n"
    complete = False
    while offset < budget:
        chunk = f.read(min(CHUNK_BYTES, budget - offset))
        if not chunk:
            complete = True
            break
        if len(head) < SNIFF_BYTES:
            head += chunk[: SNIFF_BYTES - len(head)]
        count = chunk.count(b"\n")
        # The newlines that mark the window: the `start`-th (its first line begins after it), the
        # next one (the first line ends there) and the `stop`-th (the window ends after it).
        if window_start is None and newlines < start <= newlines + count:
            window_start = offset + _nth_newline(chunk, start - newlines) + 1
        if first_end is None and newlines < start + 1 <= newlines + count:
            first_end = offset + _nth_newline(chunk, start + 1 - newlines)
        if stop is not None and window_end is None and newlines < stop <= newlines + count:
            window_end = offset + _nth_newline(chunk, stop - newlines) + 1
        if window_start is not None and len(window) < keep:
            lo = max(window_start, offset) - offset
            hi = min(window_start + keep, window_end if window_end is not None else offset + len(chunk))
            if hi - offset > lo:
                window += chunk[lo: hi - offset]
        newlines += count
        offset += len(chunk)
        last = chunk[-1:]
    if complete and window_start is not None and window_end is None:
        window_end = offset
    if first_end is None and complete and window_start is not None:
        first_end = offset
    return LineScan(
        head=bytes(head),
        window=bytes(window),
        complete=complete,
        newlines=newlines,
        ends_with_newline=last == b"\n",
        bytes_read=offset,
        window_start=window_start,
        window_end=window_end,
        first_line_bytes=None if first_end is None or window_start is None else first_end - window_start,
    )
