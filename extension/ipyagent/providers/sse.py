"""A minimal Server-Sent Events parser over raw bytes.

It works on ``bytes`` end to end (``json.loads`` takes bytes), which is what keeps the provider's
parse-and-dispatch close to the cost of plain line iteration. Yields ``(event_name, data)``; the
event name is None when the server sent none. ``id:`` and ``retry:`` fields are ignored, as are
comments (``: keep-alive``). llama.cpp's ``error: {...}`` lines come out as event ``"error"``.
"""

from __future__ import annotations

from typing import Iterable, Iterator

SSEEvent = tuple[str | None, bytes]


def iter_sse(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    pending = b""
    event: str | None = None
    data: list[bytes] = []
    for chunk in chunks:
        if pending:
            chunk = pending + chunk
        lines = chunk.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:
                if data:
                    yield event, data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                event = None
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:6] == b"event:":
                event = line[6:].strip().decode("utf-8", "replace")
            elif line[:6] == b"error:":
                event = "error"
                data.append(line[6:].strip())
    # A last event without its blank line (some servers end that way) still counts.
    if pending.rstrip(b"\r"):
        line = pending.rstrip(b"\r")
        if line[:5] == b"data:":
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line[:6] == b"error:":
            event = "error"
            data.append(line[6:].strip())
    if data:
        yield event, data[0] if len(data) == 1 else b"\n".join(data)
