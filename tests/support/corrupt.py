"""Corrupted Pi session files, the way real ones get damaged.

``corrupt_pi_file(seed)`` returns the bytes of a generated Pi v3 session file (``sessiongen``)
with a few kinds of damage, each chosen by the seed:

- ``deep``: a line of 100,000 nested lists (Pi's ``JSON.parse`` reads it; Python's recursion
  does not), and an entry with a field nested 300 levels deep;
- ``bad_bytes``: a byte that is not UTF-8 inside a line (a crash mid-write, a bad copy);
- ``duplicate``: an entry written twice with one id (Pi keeps the last), the copy edited;
- ``missing_parent``: a parent id that names no entry, or a parent line cut in half (so its
  children lose it), as PII masking or a crash leaves them;
- ``no_header``: the header line is gone (Pi rejects the file);
- ``garbage``: lines that are not JSON (masked text, half a line), also before the header;
- ``shapes``: entries with a wrong shape, a cycle, an entry without an id, a second header;
- ``pi_accepts``: shapes Pi reads (assistant content as a string, a toolResult without
  ``toolCallId``, a ``model_change`` without ``modelId``) and an entry type of a Pi fork;
- ``crlf`` / ``blank``: Windows line ends on some lines, blank lines.

Same seed, same bytes.
"""

from __future__ import annotations

import json
import random

from ipyagent.session.tokens import js_json
from support.sessiongen import generate_session

__all__ = ["KINDS", "corrupt_pi_file"]

KINDS = ("deep", "bad_bytes", "duplicate", "missing_parent", "no_header", "garbage", "shapes", "pi_accepts",
         "crlf", "blank")


def _js(value) -> bytes:
    """A line as Pi writes it (``JSON.stringify``)."""
    return js_json(value).encode("utf-8")


def corrupt_pi_file(seed: int, n_entries: int = 40, kinds: tuple[str, ...] | None = None) -> tuple[bytes, list[str]]:
    """The bytes of a damaged Pi file and the kinds of damage in it."""
    rng = random.Random(seed)
    header, entries = generate_session(seed, n_entries, p_branch=0.2, p_compaction=0.1, p_settings=0.3,
                                       p_unicode=0.3, p_custom_message=0.1)
    if kinds is None:
        kinds = tuple(k for k in KINDS if rng.random() < 0.5) or (rng.choice(KINDS),)
    lines: list[bytes] = [_js(header)] + [_js(e) for e in entries]

    def spot(lo: int = 1) -> int:
        return rng.randint(lo, len(lines))

    def some_entry() -> dict:
        return json.loads(json.dumps(rng.choice(entries)))

    if "deep" in kinds:
        lines.insert(spot(), b"[" * 100_000 + b"]" * 100_000)
        deep = some_entry()
        nested: object = "bottom"
        for _ in range(300):
            nested = [nested]
        deep["details"] = {"nested": nested}
        deep["id"] = "deep%04x" % rng.randrange(65536)
        lines.insert(spot(), _js(deep))
    if "duplicate" in kinds:
        for _ in range(rng.randint(1, 3)):
            copy = some_entry()
            copy["timestamp"] = "2026-06-06T06:06:06.066Z"
            copy["edited"] = rng.random()
            lines.insert(spot(), _js(copy))
    if "missing_parent" in kinds:
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(1, len(lines))
            try:
                value = json.loads(lines[k])
            except (ValueError, RecursionError):  # garbage, or the deep line
                continue
            if not isinstance(value, dict):
                continue
            if rng.random() < 0.5:
                value["parentId"] = "gone%04x" % rng.randrange(65536)
                lines[k] = _js(value)
            else:  # cut in half: every child of this entry loses its parent
                lines[k] = lines[k][: max(1, len(lines[k]) // 2)]
    if "garbage" in kinds:
        for text in (b"[REDACTED BY PII FILTER] ****", b'{"type":"message","id":"', b"\x00\x00", b"null",
                     b'"just a string"', b"42"):
            if rng.random() < 0.5:
                lines.insert(spot(0), text)
    if "shapes" in kinds:
        a, b = "cyc%05x" % rng.randrange(2**20), "cyc%05x" % rng.randrange(2**20)
        bad = [
            {"type": "message", "id": "shape001", "parentId": None, "timestamp": "t", "message": "not an object"},
            {"id": "shape002", "parentId": None, "timestamp": "t"},  # no type
            {"type": "compaction", "id": "shape003", "parentId": None, "timestamp": "t", "summary": "s"},
            {"type": "message", "id": a, "parentId": b, "timestamp": "t",
             "message": {"role": "user", "content": "in a cycle", "timestamp": 1}},
            {"type": "message", "id": b, "parentId": a, "timestamp": "t",
             "message": {"role": "user", "content": "in a cycle too", "timestamp": 1}},
            {"type": "custom", "parentId": None, "timestamp": "t", "customType": "no-id"},  # gets an id
            {"type": "session", "version": 3, "id": "second-header", "timestamp": "t", "cwd": "/"},
            {"type": "message", "id": "shape004", "parentId": None, "timestamp": "t",
             "message": {"role": "assistant", "content": [1, 2]}},
        ]
        for value in rng.sample(bad, rng.randint(2, len(bad))):
            lines.insert(spot(), _js(value))
    if "pi_accepts" in kinds:
        parent = rng.choice(entries)["id"]
        accepted = [
            {"type": "message", "id": "piacc001", "parentId": parent, "timestamp": "2026-06-01T00:00:00.000Z",
             "message": {"role": "assistant", "content": "an answer as a plain string", "stopReason": "stop",
                         "timestamp": 1}},
            {"type": "message", "id": "piacc002", "parentId": "piacc001", "timestamp": "2026-06-01T00:00:01.000Z",
             "message": {"role": "toolResult", "toolName": "read", "content": [{"type": "text", "text": "x"}],
                         "isError": False, "timestamp": 2}},
            {"type": "model_change", "id": "piacc003", "parentId": "piacc002",
             "timestamp": "2026-06-01T00:00:02.000Z", "provider": "openai"},
            {"type": "fork_checkpoint", "id": "piacc004", "parentId": "piacc003",
             "timestamp": "2026-06-01T00:00:03.000Z", "snapshot": {"files": ["a.py"]}},
        ]
        at = spot()
        lines[at:at] = [_js(v) for v in accepted]
    if "bad_bytes" in kinds:
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(lines))
            line = lines[k]
            if len(line) < 4:
                continue
            at = rng.randrange(1, len(line) - 1)
            bad = rng.choice([b"\xff", b"\xc3", b"\xe9", b"\xed\xa0\x80", b"\xc0\xaf"])
            lines[k] = line[:at] + bad + line[at + 1:]
    if "no_header" in kinds:
        lines = [line for line in lines if line != _js(header)]
    if "crlf" in kinds:
        lines = [line + b"\r" if rng.random() < 0.3 else line for line in lines]
    if "blank" in kinds:
        for _ in range(rng.randint(1, 3)):
            lines.insert(spot(0), rng.choice([b"", b"   ", b"\t"]))
    return b"\n".join(lines) + b"\n", list(kinds)
