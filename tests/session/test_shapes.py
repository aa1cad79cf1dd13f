"""The TypedDicts of ``ipyagent/shapes.py`` name every field Pi 1.6.0 itself writes.

A TypedDict is a dict at run time, so a field it leaves out still round-trips; but code reading it
would not type-check, and the shapes would no longer document the format. Pi's own
``SessionManager`` writes the sessions (``tests/oracle/pi_write.mjs``, every entry type 1.6 added).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ipyagent import shapes
from support.pi_oracle import pi_write

SHAPES = {"entry": shapes.Entry, "message": shapes.Message, "block": shapes.ContentBlock, "usage": shapes.Usage,
          "cost": shapes.UsageCost, "header": shapes.SessionHeader, "tool": shapes.ToolDeclaration}


@pytest.fixture(scope="module")
def pi_written(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return pi_write(tmp_path_factory.mktemp("pi_written_shapes"), 7, 12)


def _fields(lines: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Every key Pi wrote, by the shape that holds it."""
    seen: dict[str, set[str]] = defaultdict(set)

    def message(m: dict[str, Any]) -> None:
        seen["message"] |= set(m)
        for block in m.get("content") if isinstance(m.get("content"), list) else []:
            seen["block"] |= set(block)
        usage(m.get("usage"))
        for tool in m.get("toolsAdded") or []:
            seen["tool"] |= set(tool)

    def usage(u: Any) -> None:
        if isinstance(u, dict):
            seen["usage"] |= set(u)
            seen["cost"] |= set(u.get("cost") or {})

    for line in lines:
        if line["type"] == "session":
            seen["header"] |= set(line)
            continue
        seen["entry"] |= set(line)
        for held in (line.get("message"), line.get("systemMessage")):
            if isinstance(held, dict):
                message(held)
        usage(line.get("usage"))
    return seen


def test_the_shapes_name_every_field_pi_writes(pi_written):
    lines = [json.loads(text) for path in pi_written for text in path.read_text(encoding="utf-8").splitlines()]
    seen = _fields(lines)
    assert seen["entry"] and seen["message"] and seen["block"] and seen["usage"] and seen["header"]
    missing = {name: sorted(keys - set(SHAPES[name].__annotations__)) for name, keys in seen.items()}
    assert {name: keys for name, keys in missing.items() if keys} == {}
