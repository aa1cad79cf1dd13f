"""JSON from outside that may be nested too deeply for Python's recursive code.

``json.loads``, ``copy.deepcopy``, ``==`` on dicts and the indenting JSON encoder recurse once per
level of nesting, so one value nested a thousand levels deep raises ``RecursionError`` (Pi's
``JSON.parse`` reads a line of 100,000 nested lists without complaint, so such a line can sit in
a Pi session file). Everything read from outside goes through these helpers:

- :func:`nesting` measures a value without recursion; an entry nested deeper than
  :data:`MAX_NESTING` is set aside, never loaded;
- :func:`loads` reads a whole document (a notebook, a frontend's push) even when part of it is
  nested too deeply for ``json.loads``: each too-deep part becomes a *marker*,
  ``{"$ipyagent.too_deep": "<its original text>"}``, so the rest loads and the part is kept;
- :func:`dumps` writes a value as compact JSON without recursion, and writes each marker back as
  the original text it holds (:func:`restore_markers` does the same on JSON text);
- :func:`paused_gc` holds the cyclic garbage collector off while a large document becomes
  hundreds of thousands of small containers.

``loads(..., fast=True)`` parses with orjson when it is installed (about twice as fast as
``json.loads`` on a 30 MB notebook; anything orjson refuses — nesting beyond its limit, NaN,
lone surrogates, invalid UTF-8 — goes the ``json`` way, so the result is the same). One
difference is accepted, so it is only used for what came through a browser: an integer beyond
64 bits becomes a float (JupyterLab's ``JSON.parse`` already holds every number as a double).
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_orjson: ModuleType | None
try:
    import orjson as _orjson
except ImportError:  # optional speed-up: everything works without it
    _orjson = None

__all__ = ["MAX_NESTING", "TOO_DEEP", "dumps", "loads", "measure", "nesting", "paused_gc", "restore_markers"]

MAX_NESTING = 200  # an entry nested deeper than this is set aside (Pi's own entries nest about 10 deep)
TOO_DEEP = "$ipyagent.too_deep"
# How deep :func:`loads` lets a document nest before it turns the rest into markers: deep enough
# that an entry holding a marker (at most 9 levels down a notebook) is still over MAX_NESTING.
DOCUMENT_NESTING = MAX_NESTING + 50

_CONTAINERS = (dict, list)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector held off for the block (and restored after it, on an error
    too). Reading a 30 MB notebook makes ~10^6 new containers, none of them garbage; each
    collection that their allocation sets off walks every live object, the kernel's namespace
    included, so the same work is done again and again (a third of a hydration's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def nesting(value: Any, limit: int = MAX_NESTING) -> int:
    """How deeply ``value`` nests (a scalar 0, ``[]`` 1, ``[{}]`` 2); counting stops above ``limit``."""
    depth = 0
    level = [value] if type(value) in _CONTAINERS else []
    while level:  # one level at a time, so no recursion and no per-node bookkeeping
        depth += 1
        if depth > limit:
            return depth
        below: list[Any] = []
        append = below.append
        for item in level:
            for child in (item.values() if type(item) is dict else item):
                kind = type(child)
                if kind is dict or kind is list:
                    append(child)
        level = below
    return depth


def measure(value: Any, limit: int = MAX_NESTING) -> tuple[int, int]:
    """``(size, depth)`` in one walk: about the length of ``value`` as compact JSON (escapes not
    counted, a number or literal as 5), and how deeply it nests as :func:`nesting` counts it.
    Above ``limit`` levels the walk stops (the size is then a lower bound)."""
    size = 0
    depth = 0
    level = [value]
    while level:
        below: list[Any] = []
        extend = below.extend
        containers = False
        for item in level:
            kind = type(item)
            if kind is str:
                size += len(item) + 2
            elif kind is dict:
                containers = True
                # braces, then per key its quotes, colon and comma, and the key itself
                size += 1 + len(item) * 4 + sum(map(len, item))
                extend(item.values())
            elif kind is list:
                containers = True
                size += 1 + len(item)
                extend(item)
            else:
                size += 5
        if containers:
            depth += 1
            if depth > limit:
                return size, depth
        level = below
    return size, depth


# A JSON string (unrolled, so long strings cost no backtracking) or one bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes, max_nesting: int = DOCUMENT_NESTING, *, fast: bool = False,
          strict: bool = False) -> Any:
    """``json.loads``, except that containers nested deeper than ``max_nesting`` become markers
    holding their original text (only when ``json.loads`` itself gives up with a RecursionError).

    Raises ``ValueError`` (``json.JSONDecodeError``) for text that is not JSON, as ``json.loads``.
    ``fast``: orjson first (see the module's docstring). ``strict``: ``NaN`` and ``Infinity``,
    which ``json.loads`` takes and a browser's ``JSON.parse`` refuses, are refused too.
    """
    if fast and _orjson is not None:
        try:
            return _orjson.loads(text)
        except _orjson.JSONDecodeError:
            pass  # the json way decides (and says what is wrong)
    constant = _refuse_constant if strict else None
    try:
        return json.loads(text, parse_constant=constant)
    except RecursionError:
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    pieces: list[str] = []
    depth, start, last = 0, -1, 0
    for match in _TOKEN.finditer(text):
        char = text[match.start()]
        if char == '"':
            continue
        if char in "[{":
            depth += 1
            if depth == max_nesting + 1:
                start = match.start()
        else:
            if depth == max_nesting + 1 and start >= 0:
                pieces += [text[last:start], _marker_text(text[start:match.end()])]
                last, start = match.end(), -1
            depth -= 1
    pieces.append(text[last:])
    return json.loads("".join(pieces), parse_constant=constant)


def _marker_text(raw: str) -> str:
    return '{"' + TOO_DEEP + '":' + json.dumps(raw, ensure_ascii=False) + "}"


def is_marker(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and type(value.get(TOO_DEEP)) is str


class _Text(str):
    """JSON text to write as it is (a plain ``str`` on the stack is a value to encode)."""


def dumps(value: Any) -> str:
    """Compact JSON for ``value`` (non-ASCII kept), however deeply it nests; markers are written
    as the original text they hold."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is _Text:
            out.append(item)
        elif kind is dict:
            if is_marker(item):
                out.append(item[TOO_DEEP])
                continue
            tasks: list[Any] = [_Text("{")]
            for key, child in item.items():
                tasks += [_Text(("," if len(tasks) > 1 else "") + json.dumps(str(key), ensure_ascii=False) + ":"),
                          child]
            tasks.append(_Text("}"))
            stack.extend(reversed(tasks))
        elif kind is list:
            tasks = [_Text("[")]
            for child in item:
                if len(tasks) > 1:
                    tasks.append(_Text(","))
                tasks.append(child)
            tasks.append(_Text("]"))
            stack.extend(reversed(tasks))
        else:
            out.append(json.dumps(item, ensure_ascii=False))
    return "".join(out)


_MARKER_JSON = re.compile(r'\{\s*"' + re.escape(TOO_DEEP) + r'"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")\s*\}')


def restore_markers(text: str) -> str:
    """JSON text with every marker replaced by the original text it holds (a no-op without one)."""
    if TOO_DEEP not in text:
        return text
    return _MARKER_JSON.sub(lambda m: json.loads(m.group(1)), text)
