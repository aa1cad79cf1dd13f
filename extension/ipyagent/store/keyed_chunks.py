"""Layout 4 of the session store: chunks under keys derived from the entries they hold.

Layouts 2 and 3 number their chunks (``ipyagent/000013``): two git branches that each add a turn
both take the next number, for different entries, and a merge has to drop one of them. Layout 4
keys a chunk by its session and its entries' ids (``ipyagent/`` and 16 hex digits, FNV-1a 64 of
``session\\nid\\nid…``), so two branches' new chunks never share a key, and the same entries
chunked alike on both sides make the same key and the same value. Nothing in a key orders the
chunks, so a reader orders a session's keyed chunks by their entries: a chunk comes after the
chunks that hold its entries' parents (ties: the writer's clock ``at``, then the key).

The leaf: a chunk written with a turn carries its session's ``leaf`` and the writer's clock
``at`` (milliseconds, increasing per writer); the index carries the ``at`` of its own writing.
Of the chunks written after the index (a larger ``at``), the latest one's leaf is the session's
leaf, so the usual turn writes one new key and leaves the index alone, and a reader can always
rebuild the index's leaves from the chunks. Chunks that only move entries (a layout-1 store moved
into chunks, the command line's rewrite) carry neither, so two writers make them byte for byte
alike.

:mod:`ipyagent.store.chunks` reads and writes every layout with these helpers; the labextension's
store (``extension/frontend/src``) derives the same keys and reads in the same order
(``tests/store/vectors``).
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["KEYED_PREFIX", "CHUNK_CHARS", "fnv1a64", "integral", "keyed_key", "is_keyed_key", "keyed_order",
           "latest_leaves", "new_chunks", "now_ms", "reusable_chunks"]

KEYED_PREFIX = "ipyagent/"
CHUNK_ENTRIES = 100
CHUNK_CHARS = 1 << 20  # a chunk's text is about this many characters at most (more only for one entry)
_KEYED = re.compile(r"ipyagent/[0-9a-f]{16}")
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits (the labextension computes the same with BigInt)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def keyed_key(session: str, ids: Sequence[Any], salt: int = 0) -> str:
    """The key of a chunk of ``session`` holding entries with ``ids`` (in order); ``salt`` > 0
    only when that key already holds another chunk (a hostile notebook's, or a collision)."""
    text = "\n".join([session, *(i if isinstance(i, str) else "" for i in ids)])
    if salt:
        text += f"\n#{salt}"
    return f"{KEYED_PREFIX}{fnv1a64(text.encode('utf-8', 'surrogatepass')):016x}"


def is_keyed_key(key: object) -> bool:
    return isinstance(key, str) and _KEYED.fullmatch(key) is not None


def integral(value: Any) -> int | None:
    """``value`` as an integer when it is a JSON number with an integer value (``2.0`` is ``2``,
    as a browser reads it), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def chunk_at(chunk: Any) -> int:
    """The writer's clock of a chunk or an index (0 when it has none)."""
    at = integral(chunk.get("at")) if isinstance(chunk, Mapping) else None
    return at if at is not None else 0


def keyed_order(chunks: Sequence[tuple[str, Mapping[str, Any], list[Any]]]) -> list[int]:
    """The reading order of one session's keyed chunks ``(key, chunk, entries)``: a chunk after the
    chunks holding its entries' parents; among chunks free to come next, the smallest ``at``, then
    key (chunks in a parent loop, which only a hostile notebook holds, come last in that order)."""
    owner: dict[str, int] = {}
    for i, (_, _, entries) in enumerate(chunks):
        for entry in entries:
            if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
                owner.setdefault(entry["id"], i)
    waits = [0] * len(chunks)
    after: list[list[int]] = [[] for _ in chunks]
    for i, (_, _, entries) in enumerate(chunks):
        parents = {e.get("parentId") for e in entries if isinstance(e, Mapping)}
        before = {owner[p] for p in parents if isinstance(p, str) and p in owner} - {i}
        for j in before:
            after[j].append(i)
        waits[i] = len(before)
    rank = [(chunk_at(chunk), key) for key, chunk, _ in chunks]
    ready = [(rank[i], i) for i in range(len(chunks)) if waits[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in after[i]:
            waits[j] -= 1
            if waits[j] == 0:
                heapq.heappush(ready, (rank[j], j))
    if len(order) < len(chunks):
        placed = set(order)
        order.extend(sorted((i for i in range(len(chunks)) if i not in placed), key=rank.__getitem__))
    return order


def latest_leaves(chunks: Iterable[tuple[str, Mapping[str, Any]]], index_at: int) -> dict[str, Any]:
    """Per session, the leaf of its latest keyed chunk written after the index (``at`` above
    ``index_at``; ties: the larger key); ``(key, chunk)`` pairs of valid chunks."""
    best: dict[str, tuple[int, str, Any]] = {}
    for key, chunk in chunks:
        at = chunk_at(chunk)
        name = chunk.get("session")
        if "leaf" not in chunk or at <= index_at or not isinstance(name, str):
            continue
        if name not in best or (at, key) > best[name][:2]:
            best[name] = (at, key, chunk["leaf"])
    return {name: leaf for name, (_, _, leaf) in best.items()}


def now_ms() -> int:
    return int(time.time() * 1000)


def entry_text(entry: Any) -> str:
    """An entry as a chunk's text holds it: compact, ASCII JSON."""
    return json.dumps(entry, separators=(",", ":"))


def new_chunks(name: str, entries: Sequence[Any], taken: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``entries`` in new keyed chunks of session ``name``: at most :data:`CHUNK_ENTRIES` entries
    and about :data:`CHUNK_CHARS` characters each, no leaf, no clock; a key ``taken`` already
    (another chunk's) is salted."""
    out: list[tuple[str, dict[str, Any]]] = []
    texts: list[str] = []
    ids: list[Any] = []
    size = 0

    def flush() -> None:
        nonlocal texts, ids, size
        if not texts:
            return
        value = {"session": name, "ids": ids, "entries": "[" + ",".join(texts) + "]"}
        salt = 0
        key = keyed_key(name, ids)
        while (key in taken and taken[key] != value) or any(k == key for k, _ in out):
            salt += 1
            key = keyed_key(name, ids, salt)
        out.append((key, value))
        texts, ids, size = [], [], 0

    for entry in entries:
        text = entry_text(entry)
        if len(texts) >= CHUNK_ENTRIES or (texts and size + len(text) > CHUNK_CHARS):
            flush()
        texts.append(text)
        ids.append(entry.get("id") if isinstance(entry, Mapping) else None)
        size += len(text)
    flush()
    return out


def reusable_chunks(name: str, entries: Sequence[Any],
                    chunks: Iterable[tuple[str, Mapping[str, Any], list[Any]]]) -> tuple[list[str], list[Any]]:
    """Which of a session's stored chunks (``(key, chunk, its entries)``, in reading order) a
    rewrite keeps as they are — those whose every entry is still among ``entries``, unchanged and
    in no chunk kept before — and the entries left for new chunks, in their order."""
    by_id = {e["id"]: e for e in entries if isinstance(e, Mapping) and isinstance(e.get("id"), str)}
    covered: set[str] = set()
    kept: list[str] = []
    for key, chunk, held in chunks:
        if chunk.get("session") != name or not held:
            continue
        ids = [e.get("id") if isinstance(e, Mapping) else None for e in held]
        if all(isinstance(i, str) and i not in covered and by_id.get(i) == e for i, e in zip(ids, held)) \
                and len(set(ids)) == len(ids):
            kept.append(key)
            covered.update(i for i in ids if isinstance(i, str))
    rest = [e for e in entries if not (isinstance(e, Mapping) and e.get("id") in covered)]
    return kept, rest
