"""Pi session files (JSONL): import with migrations and a problem report, export without loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ipyagent.session.entries import Entry
from ipyagent.session.ids import iso_now, new_entry_id, new_session_id
from ipyagent.session.loading import LoadReport, sanitize_entries
from ipyagent.session.tokens import js_json

CURRENT_VERSION = 3


def parse_pi_jsonl(text: str, source: str = "") -> tuple[dict[str, Any], list[Entry], LoadReport]:
    """Header, usable entries and the report for the text of a Pi session file."""
    report = LoadReport(source=source)
    header: dict[str, Any] | None = None
    raw: list[Any] = []
    lines: list[int] = []
    sizes: list[int] = []
    # Only "\n" ends a line: JSON.stringify leaves U+2028/U+2029/U+0085 raw inside strings,
    # and str.splitlines() would break a line at them.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            report.add(f"line {number}", f"not valid JSON ({exc.msg} at column {exc.colno})", kept=False, raw=line)
            continue
        if header is None and not raw:
            if isinstance(value, dict) and value.get("type") == "session":
                header = value
                continue
            report.add(f"line {number}", "the first line is not a session header; a new header was made",
                       kept=True)
            header = {"type": "session", "version": CURRENT_VERSION, "id": new_session_id(),
                      "timestamp": iso_now(), "cwd": ""}
        raw.append(value)
        lines.append(number)
        sizes.append(len(line))
    if header is None:
        header = {"type": "session", "version": CURRENT_VERSION, "id": new_session_id(),
                  "timestamp": iso_now(), "cwd": ""}
        if not raw:
            report.add("file", "no session header and no entries", kept=True)
    if not isinstance(header.get("id"), str):
        header["id"] = new_session_id()
        report.add("header", "the header has no id; a new one was made", kept=True)
    version = header.get("version") or 1
    if not isinstance(version, (int, float)) or isinstance(version, bool):
        report.add("header", f"the header's version {version!r} is not a number; read as version {CURRENT_VERSION}",
                   kept=True)
        version = header["version"] = CURRENT_VERSION
    if version < CURRENT_VERSION:
        report.migrated_from = version
        raw = migrate(header, raw)
    entries = sanitize_entries(raw, report, where=lambda i: f"line {lines[i]}", sizes=sizes)
    return header, entries, report


def migrate(header: dict[str, Any], raw: list[Any]) -> list[Any]:
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


def dump_pi_jsonl(header: dict[str, Any], entries: list[Entry]) -> str:
    return "".join(js_json(value) + "\n" for value in [header, *entries])


def read_pi_jsonl(path: str | Path) -> tuple[dict[str, Any], list[Entry], LoadReport]:
    path = Path(path)
    return parse_pi_jsonl(path.read_text(encoding="utf-8"), source=str(path))


def write_pi_jsonl(path: str | Path, header: dict[str, Any], entries: list[Entry]) -> None:
    Path(path).write_text(dump_pi_jsonl(header, entries), encoding="utf-8")
