"""Pi session files (JSONL): import with migrations and a problem report, export without loss.

Reading is line by line, as Pi does: a line that cannot be used (not UTF-8, not JSON, nested too
deeply, a wrong shape, a duplicate id Pi would not use) is reported and *set aside* with its
text, its line number and its place among the entries (``after``: the id of the entry before it;
``before_header`` for a line above the header). Export writes every set-aside line back, byte for
byte, in that place, so import → export loses nothing: a file is rewritten as it was read.
"""

from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from ipyagent.session.entries import Entry, SessionHeader
from ipyagent.session.ids import iso_now, new_entry_id, new_session_id
from ipyagent.session.intake import LoadReport, SetAside, sanitize_entries
from ipyagent.session.tokens import js_json

__all__ = ["CURRENT_VERSION", "dump_pi_jsonl", "is_pi_line", "migrate", "parse_pi_jsonl", "pi_jsonl_bytes",
           "read_pi_jsonl", "write_pi_jsonl"]

CURRENT_VERSION = 3


def _new_header() -> SessionHeader:
    return {"type": "session", "version": CURRENT_VERSION, "id": new_session_id(), "timestamp": iso_now(), "cwd": ""}


def _lines(data: str | bytes) -> Iterator[tuple[int, str, bytes | None]]:
    """(number, text, the bytes when they are not UTF-8) of every line that is not blank.

    Only "\n" ends a line: JSON.stringify leaves U+2028/U+2029/U+0085 raw inside strings, and
    str.splitlines() would break a line at them.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")  # the usual case, at once
        except UnicodeDecodeError:
            pass
    if isinstance(data, str):
        for number, line in enumerate(data.split("\n"), start=1):
            if line.strip():
                yield number, line, None
        return
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8"), None
        except UnicodeDecodeError:
            yield number, raw.decode("utf-8", errors="replace"), raw


def parse_pi_jsonl(data: str | bytes, source: str = "") -> tuple[SessionHeader, list[Entry], LoadReport]:
    """Header, usable entries and the report for a Pi session file's text (or bytes).

    Every line set aside is in ``report.set_aside`` with ``line``, ``raw`` (its text; for a line
    that is not UTF-8 also ``raw_base64``, its bytes) and its place (``after`` / ``before_header``).
    """
    report = LoadReport(source=source)
    header: SessionHeader | None = None
    header_line: int | None = None
    raw: list[Any] = []
    lines: list[int] = []
    texts: list[str] = []
    for number, line, undecodable in _lines(data):
        where = f"line {number}"
        readable, value = _decoded(number, line, undecodable, report)
        if not readable:
            continue
        if isinstance(value, dict) and value.get("type") == "session":
            if header is None and not raw:
                header, header_line = cast(SessionHeader, value), number
            else:
                report.add(where, "a second session header; Pi reads only the first", kept=False, raw=line,
                           line=number)
            continue
        if header is None and not raw:
            report.add(where, "the file has no session header (Pi would not open it); a new header was made",
                       kept=True)
            header = _new_header()
        raw.append(value)
        lines.append(number)
        texts.append(line)
    if header is None:
        header = _new_header()
        if not raw:
            report.add("file", "no session header and no entries", kept=True)
    version = _checked_header(header, report)
    if version < CURRENT_VERSION:
        report.migrated_from = version
        raw = migrate(header, raw)
    first_aside = len(report.set_aside)
    entries = sanitize_entries(raw, report, where=lambda i: f"line {lines[i]}", sizes=[len(t) for t in texts],
                               aside=lambda i: {"raw": texts[i], "line": lines[i]})
    aside_lines = {item["line"] for item in report.set_aside[first_aside:]}
    kept_lines = [number for number in lines if number not in aside_lines]
    _place(report.set_aside, header_line, kept_lines, [e["id"] for e in entries])
    # in file order (lines that are not JSON were found before the checks of the rest)
    report.problems.sort(key=lambda p: _line_number(p.where))
    report.set_aside.sort(key=lambda item: item["line"])
    return header, entries, report


def _decoded(number: int, line: str, undecodable: bytes | None, report: LoadReport) -> tuple[bool, Any]:
    """(True, the line's JSON value), or (False, None) with the line set aside in ``report``."""
    where = f"line {number}"
    if undecodable is not None:
        bad = _first_bad_byte(undecodable)
        report.add(where, f"not valid UTF-8 (byte 0x{undecodable[bad]:02x} at column {bad + 1})", kept=False,
                   raw=line, line=number, raw_base64=base64.b64encode(undecodable).decode("ascii"))
        return False, None
    try:
        return True, json.loads(line)
    except json.JSONDecodeError as exc:
        report.add(where, f"not valid JSON ({exc.msg} at column {exc.colno})", kept=False, raw=line, line=number)
    except RecursionError:
        report.add(where, "nested too deeply to read (a JSON value inside thousands of levels of brackets)",
                   kept=False, raw=line, line=number)
    return False, None


def _checked_header(header: SessionHeader, report: LoadReport) -> int | float:
    """The header's version, its id and version made good (and said so in ``report``) where missing
    or not a number."""
    if not isinstance(header.get("id"), str):
        header["id"] = new_session_id()
        report.add("header", "the header has no id; a new one was made", kept=True)
    version = header.get("version") or 1
    if not isinstance(version, (int, float)) or isinstance(version, bool):
        report.add("header", f"the header's version {version!r} is not a number; read as version {CURRENT_VERSION}",
                   kept=True)
        version = header["version"] = CURRENT_VERSION
    return version


def _line_number(where: str) -> int:
    """12 for "line 12 (id …)"; 0 for "header" and "file"."""
    parts = where.split()
    return int(parts[1]) if len(parts) > 1 and parts[0] == "line" and parts[1].isdigit() else 0


def _first_bad_byte(line: bytes) -> int:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return 0


def _place(items: list[SetAside], header_line: int | None, kept_lines: list[int], kept_ids: list[str]) -> None:
    """Give every set-aside line its place among the entries: ``after`` the id of the kept entry
    above it (None: right after the header), or ``before_header``."""
    for item in items:
        number = item.get("line")
        if not isinstance(number, int):
            continue
        if header_line is not None and number < header_line:
            item["after"] = None
            item["before_header"] = True
            continue
        above = bisect.bisect_left(kept_lines, number)
        item["after"] = kept_ids[above - 1] if above else None


def migrate(header: SessionHeader, raw: list[Any]) -> list[Any]:
    """v1 → v2 (ids and a linear parent chain; compaction index → id) → v3 (hookMessage → custom)."""
    version = header.get("version") or 1
    if version < 2:
        ids: set[str] = set()
        previous: str | None = None
        for value in raw:
            if not isinstance(value, dict):
                continue
            if not isinstance(value.get("id"), str):
                value["id"] = new_entry_id(ids)
            ids.add(value["id"])
            value.setdefault("parentId", previous)
            previous = value["id"]
        for value in raw:
            if isinstance(value, dict) and value.get("type") == "compaction" and "firstKeptEntryIndex" in value:
                index = value.pop("firstKeptEntryIndex")
                # Pi indexes the file's entries with the header at 0, so entry i is raw[i - 1].
                if isinstance(index, int) and 1 <= index <= len(raw) and isinstance(raw[index - 1], dict):
                    value["firstKeptEntryId"] = raw[index - 1]["id"]
        header["version"] = 2
    if header["version"] < 3:
        for value in raw:
            message = value.get("message") if isinstance(value, dict) else None
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"
        header["version"] = 3
    return raw


def is_pi_line(item: Any) -> bool:
    """Whether a set-aside record is a line of a Pi session file (written back on export)."""
    return isinstance(item, dict) and isinstance(item.get("line"), int) and not isinstance(item.get("line"), bool) \
        and isinstance(item.get("raw"), str)


def _line_bytes(item: SetAside) -> bytes:
    if isinstance(item.get("raw_base64"), str):
        try:
            return base64.b64decode(item["raw_base64"], validate=True)
        except ValueError:
            pass
    raw: str = item["raw"]  # a Pi line's text (is_pi_line)
    return raw.encode("utf-8", errors="replace")


def _pieces(header: SessionHeader, entries: list[Entry], set_aside: Iterable[Any]) -> Iterator[str | bytes]:
    """The file's lines in order: set-aside lines (as bytes) in their places among the entries."""
    lines = sorted((item for item in set_aside if is_pi_line(item)), key=lambda item: item["line"])
    before = [item for item in lines if item.get("before_header")]
    after: dict[Any, list[SetAside]] = {}
    for item in lines:
        if not item.get("before_header"):
            after.setdefault(item.get("after"), []).append(item)
    for item in before:
        yield _line_bytes(item)
    yield js_json(header)
    for item in after.pop(None, []):
        yield _line_bytes(item)
    for entry in entries:
        yield js_json(entry)
        for item in after.pop(entry["id"], []):
            yield _line_bytes(item)
    for items in after.values():  # placed after an entry this session no longer holds: at the end
        for item in items:
            yield _line_bytes(item)


def pi_jsonl_bytes(header: SessionHeader, entries: list[Entry], set_aside: Iterable[Any] = ()) -> bytes:
    """The Pi session file: the header, the entries and the set-aside lines in their places."""
    return b"".join((p if isinstance(p, bytes) else p.encode("utf-8")) + b"\n"
                    for p in _pieces(header, entries, set_aside))


def dump_pi_jsonl(header: SessionHeader, entries: list[Entry], set_aside: Iterable[Any] = ()) -> str:
    """:func:`pi_jsonl_bytes` as text (a set-aside line that is not UTF-8 shows U+FFFD for its bad bytes)."""
    return "".join((p.decode("utf-8", errors="replace") if isinstance(p, bytes) else p) + "\n"
                   for p in _pieces(header, entries, set_aside))


def read_pi_jsonl(path: str | Path) -> tuple[SessionHeader, list[Entry], LoadReport]:
    path = Path(path)
    return parse_pi_jsonl(path.read_bytes(), source=str(path))


def write_pi_jsonl(path: str | Path, header: SessionHeader, entries: list[Entry],
                   set_aside: Iterable[Any] = ()) -> None:
    Path(path).write_bytes(pi_jsonl_bytes(header, entries, set_aside))
