"""The layouts of the session store in a notebook's metadata (``docs/protocol.md``).

Layout 1 (``metadata["ipyagent"]["version"] == 1``): every session's ``entries`` inside the one
value ``metadata["ipyagent"]``. A frontend rewrites that whole value for every new entry, and the
collaborative document stores each rewrite whole.

Layout 2 (``version == 2``): ``metadata["ipyagent"]`` is a small index (``active``; per session
``header``, ``leaf``, ``settings``), and the entries are in chunks, each under a key of its own,
``metadata["ipyagent/000000"]``, ``"ipyagent/000001"``, … = ``{"session": name, "entries": [...]}``.
A chunk is written once and never changed (at most :data:`CHUNK_ENTRIES` entries); new entries go
into new chunks, so what a turn writes grows with its new entries, not with the session. A chunk
may carry its session's ``leaf`` as of its writing; it counts when the chunk's number is at least
the index's ``next_chunk`` (written after the index), so a turn that only moves the leaf along
its new entries leaves the index alone.

Layout 3 (``version == 3``, what the labextension writes): layout 2 with each chunk's entries
as JSON text, ``{"session": name, "ids": [...], "entries": "[...]"}`` (the text ASCII, the ids
those of its entries, in order). A frontend's model, the collaborative document and the
server then copy, compare, sign and write one string per chunk instead of thousands of small
objects: a save costs what a plain notebook of the same size costs. ``ids`` lets a frontend
know what is stored without parsing the text; readers here take the entries from the text.

Layout 4 (``version == 4``, what the labextension and the command line write now): layout 3
with each new chunk under a key derived from the entries it holds, ``ipyagent/`` and 16 hex
digits, so two git branches never take the same key for different entries
(:mod:`ipyagent.store.keyed_chunks`: the keys, the reading order, the leaf of the latest chunk
written after the index). Numbered chunks of an earlier layout stay as they are and are read
first.

Everything else reads layout 1: :func:`assemble` turns any layout into its layout-1 value,
and :func:`store_value` writes a layout-1 value in the layout asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ipyagent.session import deep_json
from ipyagent.store.keyed_chunks import (
    CHUNK_ENTRIES,
    chunk_at,
    integral,
    is_keyed_key,
    keyed_order,
    latest_leaves,
    new_chunks,
    now_ms,
    reusable_chunks,
)

__all__ = ["CHUNK_ENTRIES", "CHUNK_LIMIT", "CHUNK_PREFIX", "LAYOUT_CHUNKED", "LAYOUT_KEYED", "LAYOUT_TEXT",
           "STRAY_REASON", "assemble",
           "chunk_entries", "chunk_key", "chunk_keys", "chunk_number", "layout_of", "store_value", "stray_keys",
           "texts_under"]

METADATA_KEY = "ipyagent"
LAYOUT_CHUNKED = 2
LAYOUT_TEXT = 3  # chunks whose entries are JSON text
LAYOUT_KEYED = 4  # chunks under keys derived from their entries (store/keyed_chunks.py)
CHUNK_PREFIX = METADATA_KEY + "/"
CHUNK_LIMIT = 10**9  # chunk numbers are below this, here and in the labextension
# The one key of each number below CHUNK_LIMIT: six digits, or seven to nine without a leading
# zero. ASCII digits only (``\d`` would take any script's digits, and ``int()`` with it), and the
# length is bounded before ``int()`` (which refuses over 4,300 digits).
_CHUNK = re.compile(r"ipyagent/([0-9]{6}|[1-9][0-9]{6,8})")
STRAY_REASON = ("not a chunk key (ipyagent/ and a number below 10^9 in six digits or more, no other "
                "leading zero, or ipyagent/ and 16 hex digits): not read, and no chunk is numbered after it")


def chunk_key(number: int) -> str:
    return f"{CHUNK_PREFIX}{number:06d}"


def chunk_number(key: object) -> int | None:
    """The chunk number of a chunk key, else ``None``."""
    m = _CHUNK.fullmatch(key) if isinstance(key, str) else None
    return int(m.group(1)) if m else None


def _numbered(metadata: Mapping[str, Any]) -> list[tuple[int, str]]:
    return sorted((n, k) for k in metadata if (n := chunk_number(k)) is not None)


def _keyed(metadata: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in metadata if is_keyed_key(k))


def chunk_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The chunk keys in ``metadata`` (a notebook's metadata): the numbered ones in number order,
    then the keyed ones (layout 4) by key."""
    return [k for _, k in _numbered(metadata)] + _keyed(metadata)


def stray_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The keys under ``ipyagent/`` that are no chunk key (a hostile or damaged notebook's, such as
    ``ipyagent/`` and 5,000 digits, or the ``ipyagent/01e+22`` of an older labextension)."""
    return sorted(k for k in metadata if isinstance(k, str) and k.startswith(CHUNK_PREFIX)
                  and chunk_number(k) is None and not is_keyed_key(k))


def layout_of(metadata: Mapping[str, Any]) -> int:
    """4, 3 or 2 when ``metadata`` holds a chunked store (4 for any later version), else 1 (also
    when it holds none)."""
    index = metadata.get(METADATA_KEY)
    version = integral(index.get("version")) if isinstance(index, Mapping) else None
    if version is None or version < LAYOUT_CHUNKED:
        return 1
    return min(version, LAYOUT_KEYED)


def _json_type(value: Any) -> str:
    """JSON's name of ``value``'s type (as the labextension names it in the same reason)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "null"


def chunk_entries(chunk: Any) -> tuple[str | None, list[Any] | None, str]:
    """``(session, entries, problem)`` of one chunk value of layout 2 or 3: the entries as a list
    (parsed from the text in layout 3), or ``None`` with the reason it is not a chunk."""
    name = chunk.get("session") if isinstance(chunk, Mapping) else None
    entries = chunk.get("entries") if isinstance(chunk, Mapping) else None
    if not isinstance(name, str) or not isinstance(entries, (list, str)):
        return (name if isinstance(name, str) else None, None,
                'not a chunk ({"session": name, "entries": [...] or its JSON text})')
    if isinstance(entries, str):
        try:
            entries = deep_json.loads(entries, fast=True, strict=True)
        except (ValueError, RecursionError) as exc:
            return name, None, f"the chunk's entries are not valid JSON ({exc})"
        if not isinstance(entries, list):
            return name, None, f"the chunk's entries are a JSON {_json_type(entries)}, not a list"
    return name, entries, ""


SESSION_REASON = "a session of the index must be a JSON object; its chunks' entries are read without it"
SESSIONS_REASON = "the index's sessions must be a JSON object mapping names to sessions; the chunks are read without it"


def assemble(metadata: Mapping[str, Any]) -> Any:
    """``metadata["ipyagent"]`` as layout 1 reads it (``None`` when absent).

    For layouts 2 to 4: the index with each session's entries gathered from its chunks, the
    numbered ones in number order, then the keyed ones in their reading order
    (:func:`~ipyagent.store.keyed_chunks.keyed_order`). Under ``set_aside`` (with its key, its
    reason and its value), never dropped: a chunk that is not ``{"session": str, "entries": list
    or its JSON text}``, a stray key (:func:`stray_keys`), and a part of the index that is not the
    object it must be. Entries are not checked here: that is the validation's job.
    ``tests/store/vectors`` holds what this reads, and the labextension's reader
    (``ChunkedStore.assemble``) reads them alike.
    """
    index = metadata.get(METADATA_KEY)
    if layout_of(metadata) == 1 or not isinstance(index, Mapping):
        return index
    out: dict[str, Any] = {k: v for k, v in index.items() if k not in ("version", "sessions", "next_chunk", "at")}
    out["version"] = 1
    kept = out.get("set_aside", [])
    aside = list(kept) if isinstance(kept, list) else [
        {"session": None, "where": f"{METADATA_KEY}.set_aside", "reason": "not a list", "raw": kept}]
    sessions = _index_sessions(index, aside)
    _read_numbered(metadata, sessions, aside, integral(index.get("next_chunk")) or 0)
    _read_keyed(metadata, sessions, aside, chunk_at(index))
    for key in stray_keys(metadata):
        raw = metadata[key]
        name = raw.get("session") if isinstance(raw, Mapping) else None
        aside.append({"session": name if isinstance(name, str) else None, "where": key, "reason": STRAY_REASON,
                      "raw": raw})
    if aside or "set_aside" in out:
        out["set_aside"] = aside
    out["sessions"] = sessions
    return out


def _index_sessions(index: Mapping[str, Any], aside: list[Any]) -> dict[str, Any]:
    """The index's sessions, each with no entries yet (a part that is not an object set aside)."""
    raw_sessions = index.get("sessions", {})
    sessions: dict[str, Any] = {}
    if not isinstance(raw_sessions, Mapping):
        aside.append({"session": None, "where": METADATA_KEY, "reason": SESSIONS_REASON, "raw": raw_sessions})
        raw_sessions = {}
    for name, sess in raw_sessions.items():
        if not isinstance(sess, Mapping):
            aside.append({"session": name, "where": METADATA_KEY, "reason": SESSION_REASON, "raw": sess})
            sess = {"leaf": None}
        sessions[name] = {**sess, "entries": []}
    return sessions


def _readable(metadata: Mapping[str, Any], keys: Iterable[str],
              aside: list[Any]) -> Iterator[tuple[str, Mapping[str, Any], str, list[Any]]]:
    """``(key, chunk, session, entries)`` of each readable chunk under ``keys``, in their order;
    one that is not a chunk goes under ``aside`` (its key, the reason and its value) instead."""
    for key in keys:
        chunk = metadata[key]
        name, entries, problem = chunk_entries(chunk)
        if entries is None:
            aside.append({"session": name, "where": key, "reason": problem, "raw": chunk})
            continue
        assert name is not None
        yield key, chunk, name, entries


def _read_numbered(metadata: Mapping[str, Any], sessions: dict[str, Any], aside: list[Any], leaves_from: int) -> None:
    """The numbered chunks (layouts 2, 3) into ``sessions``, in number order; the leaf of a chunk
    numbered from the index's ``next_chunk`` on wins over the index's."""
    numbers = {key: number for number, key in _numbered(metadata)}
    for key, chunk, name, entries in _readable(metadata, numbers, aside):
        sess = sessions.setdefault(name, {"leaf": None, "entries": []})
        sess["entries"].extend(entries)
        if numbers[key] >= leaves_from and "leaf" in chunk:
            sess["leaf"] = chunk["leaf"]  # written after the index: newer than its leaf


def _read_keyed(metadata: Mapping[str, Any], sessions: dict[str, Any], aside: list[Any], index_at: int) -> None:
    """The keyed chunks (layout 4) into ``sessions``, after the numbered ones, in their reading
    order; the latest chunk leaf written after the index wins over every other."""
    by_session: dict[str, list[tuple[str, Mapping[str, Any], list[Any]]]] = {}
    for key, chunk, name, entries in _readable(metadata, _keyed(metadata), aside):
        by_session.setdefault(name, []).append((key, chunk, entries))
    for name, chunks in by_session.items():
        sess = sessions.setdefault(name, {"leaf": None, "entries": []})
        for i in keyed_order(chunks):
            sess["entries"].extend(chunks[i][2])
    for name, leaf in latest_leaves(((k, c) for chunks in by_session.values() for k, c, _ in chunks),
                                    index_at).items():
        sessions[name]["leaf"] = leaf


def texts_under(metadata: Mapping[str, Any], limit: int) -> bool:
    """Whether every entry of a chunked store is in a chunk whose JSON text is at most ``limit``
    characters (so no entry is larger than that: its size need not be walked)."""
    if layout_of(metadata) == 1:
        return False
    for key in chunk_keys(metadata):
        chunk = metadata[key]
        text = chunk.get("entries") if isinstance(chunk, Mapping) else None
        if not isinstance(text, str) or len(text) > limit:
            return False
    return True


def store_value(metadata: dict[str, Any], value: Mapping[str, Any], layout: int | None = None) -> None:
    """Write a layout-1 ``value`` into ``metadata`` (a notebook's metadata) in ``layout`` (default:
    layout 1 for a layout-1 notebook, else layout 4). Layouts 2 and 3 renumber every chunk;
    layout 4 keeps each stored chunk whose entries are all still in ``value`` unchanged (so a
    rewrite's diff is its new entries) and puts the rest into new keyed chunks. Chunk keys no
    longer used are removed, and so are stray keys that ``value`` keeps under ``set_aside``
    (:func:`assemble` put them there)."""
    if layout is None:
        layout = 1 if layout_of(metadata) == 1 else LAYOUT_KEYED
    kept = value.get("set_aside")
    kept_at = {item.get("where") for item in kept if isinstance(item, Mapping)} if isinstance(kept, list) else set()
    for key in stray_keys(metadata):
        if key in kept_at:
            del metadata[key]
    if layout == LAYOUT_KEYED:
        readable = _store_keyed(metadata, value)
        for key in set(chunk_keys(metadata)) - readable:
            if key in kept_at:  # an unreadable chunk: its value is under set_aside now
                del metadata[key]
        return
    for key in chunk_keys(metadata):
        del metadata[key]
    if layout not in (LAYOUT_CHUNKED, LAYOUT_TEXT):
        metadata[METADATA_KEY] = dict(value)
        return
    index, parts = _split_value(value, layout)
    number = 0
    for name, entries in parts:
        for start in range(0, len(entries), CHUNK_ENTRIES):
            part = entries[start:start + CHUNK_ENTRIES]
            metadata[chunk_key(number)] = (
                {"session": name, "entries": part} if layout == LAYOUT_CHUNKED else
                {"session": name, "ids": [e.get("id") if isinstance(e, Mapping) else None for e in part],
                 "entries": json.dumps(part, separators=(",", ":"))})
            number += 1
    index["next_chunk"] = number
    metadata[METADATA_KEY] = index


def _split_value(value: Mapping[str, Any], layout: int) -> tuple[dict[str, Any], list[tuple[str, list[Any]]]]:
    """A layout-1 ``value`` split for a chunked ``layout``: its index (each session without its
    entries; a session that is not an object kept as it is) and, in order, ``(name, entries)`` of
    each session that is one (entries that are not a list count as none)."""
    index: dict[str, Any] = {k: v for k, v in value.items() if k not in ("version", "sessions")}
    index["version"] = layout
    sessions: dict[str, Any] = {}
    parts: list[tuple[str, list[Any]]] = []
    raw = value.get("sessions")
    for name, sess in (raw.items() if isinstance(raw, Mapping) else ()):
        if not isinstance(sess, Mapping):
            sessions[name] = sess
            continue
        sessions[name] = {k: v for k, v in sess.items() if k != "entries"}
        entries = sess.get("entries")
        parts.append((name, entries if isinstance(entries, list) else []))
    index["sessions"] = sessions
    return index, parts


def _stored_chunks(metadata: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], list[Any]]]:
    """Every readable chunk ``(key, chunk, entries)``: numbered in number order, then keyed."""
    out = []
    for key in chunk_keys(metadata):
        chunk = metadata[key]
        _, entries, _ = chunk_entries(chunk)
        if entries is not None:
            out.append((key, chunk, entries))
    return out


def _store_keyed(metadata: dict[str, Any], value: Mapping[str, Any]) -> set[str]:
    """``value`` in layout 4 (:func:`store_value`); returns the keys of the readable chunks now
    stored."""
    old_index = metadata.get(METADATA_KEY)
    stored = _stored_chunks(metadata)
    index, parts = _split_value(value, LAYOUT_KEYED)
    keep: set[str] = set()
    fresh: list[tuple[str, dict[str, Any]]] = []
    for name, entries in parts:
        kept, rest = reusable_chunks(name, entries, stored)
        keep.update(kept)
        taken = {k: metadata[k] for k in keep} | dict(fresh)
        fresh.extend(new_chunks(name, rest, taken))
    for key, _, _ in stored:
        if key not in keep:
            del metadata[key]
    for key, chunk in fresh:
        metadata[key] = chunk
    numbers = [n for n, k in _numbered(metadata)]
    if numbers:  # numbered chunks kept: their leaves are the index's past
        index["next_chunk"] = max(numbers) + 1
    index["at"] = _index_clock(metadata, index, old_index)
    metadata[METADATA_KEY] = index
    return keep | {key for key, _ in fresh}


def _index_clock(metadata: Mapping[str, Any], index: dict[str, Any], old: Any) -> int:
    """The index's ``at``: the stored one while it still makes every session's leaf the index's
    (a rewrite that changes nothing writes the same bytes), else later than every chunk's."""
    keyed = [(k, metadata[k]) for k in _keyed(metadata) if isinstance(metadata[k], Mapping)]
    previous = chunk_at(old) if isinstance(old, Mapping) and integral(old.get("at")) is not None else None
    if previous is not None and not latest_leaves(keyed, previous):
        return previous
    return max([now_ms(), *(chunk_at(c) + 1 for _, c in keyed)])
