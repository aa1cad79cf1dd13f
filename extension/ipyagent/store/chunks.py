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

Everything else reads layout 1: :func:`assemble` turns any layout into its layout-1 value,
and :func:`store_value` writes a layout-1 value in the layout asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ipyagent.session import deep_json

__all__ = ["CHUNK_ENTRIES", "CHUNK_PREFIX", "LAYOUT_CHUNKED", "LAYOUT_TEXT", "assemble", "chunk_entries", "chunk_key",
           "chunk_keys", "layout_of", "store_value", "texts_under"]

METADATA_KEY = "ipyagent"
LAYOUT_CHUNKED = 2
LAYOUT_TEXT = 3  # chunks whose entries are JSON text
CHUNK_PREFIX = METADATA_KEY + "/"
CHUNK_ENTRIES = 100
_CHUNK = re.compile(r"ipyagent/(\d{6,})")


def chunk_key(number: int) -> str:
    return f"{CHUNK_PREFIX}{number:06d}"


def _numbered(metadata: Mapping[str, Any]) -> list[tuple[int, str]]:
    return sorted((int(m.group(1)), k) for k in metadata if isinstance(k, str) and (m := _CHUNK.fullmatch(k)))


def chunk_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The chunk keys in ``metadata`` (a notebook's metadata), in chunk order."""
    return [k for _, k in _numbered(metadata)]


def layout_of(metadata: Mapping[str, Any]) -> int:
    """3 or 2 when ``metadata`` holds a chunked store (3 for any later version), else 1 (also
    when it holds none)."""
    index = metadata.get(METADATA_KEY)
    version = index.get("version") if isinstance(index, Mapping) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < LAYOUT_CHUNKED:
        return 1
    return min(version, LAYOUT_TEXT)


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
            entries = deep_json.loads(entries, fast=True)
        except (ValueError, RecursionError) as exc:
            return name, None, f"the chunk's entries are not valid JSON ({exc})"
        if not isinstance(entries, list):
            return name, None, f"the chunk's entries are a JSON {type(entries).__name__}, not a list"
    return name, entries, ""


def assemble(metadata: Mapping[str, Any]) -> Any:
    """``metadata["ipyagent"]`` as layout 1 reads it (``None`` when absent).

    For layouts 2 and 3: the index with each session's entries gathered from its chunks, in chunk
    order; a chunk that is not ``{"session": str, "entries": list or its JSON text}`` is kept
    under ``set_aside`` (with its key), never dropped. Entries are not checked here: that is the
    validation's job.
    """
    index = metadata.get(METADATA_KEY)
    if layout_of(metadata) == 1 or not isinstance(index, Mapping):
        return index
    out: dict[str, Any] = {k: v for k, v in index.items() if k not in ("version", "sessions", "next_chunk")}
    next_chunk = index.get("next_chunk")
    leaves_from = next_chunk if isinstance(next_chunk, int) else 0
    out["version"] = 1
    raw_sessions = index.get("sessions")
    sessions: dict[str, Any] = {}
    if isinstance(raw_sessions, Mapping):
        for name, sess in raw_sessions.items():
            sessions[name] = {**sess, "entries": []} if isinstance(sess, Mapping) else sess
    elif raw_sessions is not None:
        out["sessions"] = raw_sessions  # malformed: left for the validation to report
        return out
    aside = list(out.get("set_aside") or []) if isinstance(out.get("set_aside", []), list) else []
    for number, key in _numbered(metadata):
        chunk = metadata[key]
        name, entries, problem = chunk_entries(chunk)
        if entries is None:
            aside.append({"session": name, "where": key, "reason": problem, "raw": chunk})
            continue
        assert name is not None
        sess = sessions.setdefault(name, {"leaf": None, "entries": []})
        if isinstance(sess, dict):
            sess["entries"].extend(entries)
            if number >= leaves_from and "leaf" in chunk:
                sess["leaf"] = chunk["leaf"]  # written after the index: newer than its leaf
    if aside:
        out["set_aside"] = aside
    out["sessions"] = sessions
    return out


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
    the layout it holds now). Chunk keys of an earlier store are removed."""
    layout = layout_of(metadata) if layout is None else layout
    for key in chunk_keys(metadata):
        del metadata[key]
    if layout not in (LAYOUT_CHUNKED, LAYOUT_TEXT):
        metadata[METADATA_KEY] = dict(value)
        return
    index: dict[str, Any] = {k: v for k, v in value.items() if k not in ("version", "sessions")}
    index["version"] = layout
    sessions: dict[str, Any] = {}
    number = 0
    raw = value.get("sessions")
    for name, sess in (raw.items() if isinstance(raw, Mapping) else ()):
        if not isinstance(sess, Mapping):
            sessions[name] = sess
            continue
        sessions[name] = {k: v for k, v in sess.items() if k != "entries"}
        entries = sess.get("entries")
        entries = entries if isinstance(entries, list) else []
        for start in range(0, len(entries), CHUNK_ENTRIES):
            part = entries[start:start + CHUNK_ENTRIES]
            metadata[chunk_key(number)] = (
                {"session": name, "entries": part} if layout == LAYOUT_CHUNKED else
                {"session": name, "ids": [e.get("id") if isinstance(e, Mapping) else None for e in part],
                 "entries": json.dumps(part, separators=(",", ":"))})
            number += 1
    index["sessions"] = sessions
    index["next_chunk"] = number
    metadata[METADATA_KEY] = index
