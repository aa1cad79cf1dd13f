"""The two layouts of the session store in a notebook's metadata (``docs/protocol.md``).

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

Everything else reads layout 1: :func:`assemble` turns either layout into its layout-1 value,
and :func:`store_value` writes a layout-1 value in the layout asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["CHUNK_ENTRIES", "CHUNK_PREFIX", "LAYOUT_CHUNKED", "assemble", "chunk_key", "chunk_keys", "layout_of",
           "store_value"]

METADATA_KEY = "ipyagent"
LAYOUT_CHUNKED = 2
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
    """2 when ``metadata`` holds a chunked store, else 1 (also when it holds none)."""
    index = metadata.get(METADATA_KEY)
    version = index.get("version") if isinstance(index, Mapping) else None
    return LAYOUT_CHUNKED if isinstance(version, int) and version >= LAYOUT_CHUNKED else 1


def assemble(metadata: Mapping[str, Any]) -> Any:
    """``metadata["ipyagent"]`` as layout 1 reads it (``None`` when absent).

    For layout 2: the index with each session's entries gathered from its chunks, in chunk
    order; a chunk that is not ``{"session": str, "entries": list}`` is kept under ``set_aside``
    (with its key), never dropped. Entries are not checked here: that is the validation's job.
    """
    index = metadata.get(METADATA_KEY)
    if layout_of(metadata) != LAYOUT_CHUNKED or not isinstance(index, Mapping):
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
        name = chunk.get("session") if isinstance(chunk, Mapping) else None
        entries = chunk.get("entries") if isinstance(chunk, Mapping) else None
        if not isinstance(name, str) or not isinstance(entries, list):
            aside.append({"session": name if isinstance(name, str) else None, "where": key,
                          "reason": 'not a chunk ({"session": name, "entries": [...]})', "raw": chunk})
            continue
        sess = sessions.setdefault(name, {"leaf": None, "entries": []})
        if isinstance(sess, dict):
            sess["entries"].extend(entries)
            if number >= leaves_from and "leaf" in chunk:
                sess["leaf"] = chunk["leaf"]  # written after the index: newer than its leaf
    if aside:
        out["set_aside"] = aside
    out["sessions"] = sessions
    return out


def store_value(metadata: dict[str, Any], value: Mapping[str, Any], layout: int | None = None) -> None:
    """Write a layout-1 ``value`` into ``metadata`` (a notebook's metadata) in ``layout`` (default:
    the layout it holds now). Chunk keys of an earlier store are removed."""
    layout = layout_of(metadata) if layout is None else layout
    for key in chunk_keys(metadata):
        del metadata[key]
    if layout != LAYOUT_CHUNKED:
        metadata[METADATA_KEY] = dict(value)
        return
    index: dict[str, Any] = {k: v for k, v in value.items() if k not in ("version", "sessions")}
    index["version"] = LAYOUT_CHUNKED
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
            metadata[chunk_key(number)] = {"session": name, "entries": entries[start:start + CHUNK_ENTRIES]}
            number += 1
    index["sessions"] = sessions
    index["next_chunk"] = number
    metadata[METADATA_KEY] = index
