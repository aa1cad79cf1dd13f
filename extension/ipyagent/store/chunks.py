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

__all__ = ["CHUNK_ENTRIES", "CHUNK_LIMIT", "CHUNK_PREFIX", "LAYOUT_CHUNKED", "LAYOUT_TEXT", "STRAY_REASON", "assemble",
           "chunk_entries", "chunk_key", "chunk_keys", "chunk_number", "layout_of", "store_value", "stray_keys",
           "texts_under"]

METADATA_KEY = "ipyagent"
LAYOUT_CHUNKED = 2
LAYOUT_TEXT = 3  # chunks whose entries are JSON text
CHUNK_PREFIX = METADATA_KEY + "/"
CHUNK_ENTRIES = 100
CHUNK_LIMIT = 10**9  # chunk numbers are below this, here and in the labextension
# The one key of each number below CHUNK_LIMIT: six digits, or seven to nine without a leading
# zero. ASCII digits only (``\d`` would take any script's digits, and ``int()`` with it), and the
# length is bounded before ``int()`` (which refuses over 4,300 digits).
_CHUNK = re.compile(r"ipyagent/([0-9]{6}|[1-9][0-9]{6,8})")
STRAY_REASON = ("not a chunk key (ipyagent/ and a number below 10^9 in six digits or more, no other "
                "leading zero): not read, and no chunk is numbered after it")


def chunk_key(number: int) -> str:
    return f"{CHUNK_PREFIX}{number:06d}"


def chunk_number(key: object) -> int | None:
    """The chunk number of a chunk key, else ``None``."""
    m = _CHUNK.fullmatch(key) if isinstance(key, str) else None
    return int(m.group(1)) if m else None


def _numbered(metadata: Mapping[str, Any]) -> list[tuple[int, str]]:
    return sorted((n, k) for k in metadata if (n := chunk_number(k)) is not None)


def chunk_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The chunk keys in ``metadata`` (a notebook's metadata), in chunk order."""
    return [k for _, k in _numbered(metadata)]


def stray_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The keys under ``ipyagent/`` that are no chunk key (a hostile or damaged notebook's, such as
    ``ipyagent/`` and 5,000 digits, or the ``ipyagent/01e+22`` of an older labextension)."""
    return sorted(k for k in metadata
                  if isinstance(k, str) and k.startswith(CHUNK_PREFIX) and chunk_number(k) is None)


def _integral(value: Any) -> int | None:
    """``value`` as an integer when it is a JSON number with an integer value (``2.0`` is ``2``,
    as a browser reads it), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def layout_of(metadata: Mapping[str, Any]) -> int:
    """3 or 2 when ``metadata`` holds a chunked store (3 for any later version), else 1 (also
    when it holds none)."""
    index = metadata.get(METADATA_KEY)
    version = _integral(index.get("version")) if isinstance(index, Mapping) else None
    if version is None or version < LAYOUT_CHUNKED:
        return 1
    return min(version, LAYOUT_TEXT)


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

    For layouts 2 and 3: the index with each session's entries gathered from its chunks, in chunk
    order. Under ``set_aside`` (with its key, its reason and its value), never dropped: a chunk
    that is not ``{"session": str, "entries": list or its JSON text}``, a stray key
    (:func:`stray_keys`), and a part of the index that is not the object it must be. Entries are
    not checked here: that is the validation's job. ``tests/store/vectors`` holds what this reads,
    and the labextension's reader (``ChunkedStore.assemble``) reads them alike.
    """
    index = metadata.get(METADATA_KEY)
    if layout_of(metadata) == 1 or not isinstance(index, Mapping):
        return index
    out: dict[str, Any] = {k: v for k, v in index.items() if k not in ("version", "sessions", "next_chunk")}
    leaves_from = _integral(index.get("next_chunk")) or 0
    out["version"] = 1
    kept = out.get("set_aside", [])
    aside = list(kept) if isinstance(kept, list) else [
        {"session": None, "where": f"{METADATA_KEY}.set_aside", "reason": "not a list", "raw": kept}]
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
    for number, key in _numbered(metadata):
        chunk = metadata[key]
        name, entries, problem = chunk_entries(chunk)
        if entries is None:
            aside.append({"session": name, "where": key, "reason": problem, "raw": chunk})
            continue
        assert name is not None
        sess = sessions.setdefault(name, {"leaf": None, "entries": []})
        sess["entries"].extend(entries)
        if number >= leaves_from and "leaf" in chunk:
            sess["leaf"] = chunk["leaf"]  # written after the index: newer than its leaf
    for key in stray_keys(metadata):
        raw = metadata[key]
        name = raw.get("session") if isinstance(raw, Mapping) else None
        aside.append({"session": name if isinstance(name, str) else None, "where": key, "reason": STRAY_REASON,
                      "raw": raw})
    if aside or "set_aside" in out:
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
    the layout it holds now). Chunk keys of an earlier store are removed, and so are stray keys
    that ``value`` keeps under ``set_aside`` (:func:`assemble` put them there)."""
    layout = layout_of(metadata) if layout is None else layout
    for key in chunk_keys(metadata):
        del metadata[key]
    kept = value.get("set_aside")
    kept_at = {item.get("where") for item in kept if isinstance(item, Mapping)} if isinstance(kept, list) else set()
    for key in stray_keys(metadata):
        if key in kept_at:
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
