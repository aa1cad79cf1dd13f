"""The shared test vectors of the metadata layouts (tests/store/vectors/*.json): what a notebook's
metadata holds, and what a reader of layouts 1–3 must make of it. The Python store
(tests/store/test_layout_vectors.py) and the labextension's store (jest:
extension/frontend/src/__tests__/layoutVectors.spec.ts) read each one and are held to the same expectation.

A vector: ``{"description", "metadata", "expect": {"layout", "active", "sessions": {name: {"ids",
"leaf", "loaded"?}}, "set_aside": [{"where", "session", "reason"}], "next_key"?}}``. ``ids`` are the
session's entries as the layout reading gathers them (chunk order, duplicates kept); ``loaded``
(default: ``ids`` without repeats, the first kept) what the full Python reader loads;
``reason`` is the start of the reason given; ``next_key`` the key the labextension writes its
next chunk under (``null``: it writes none; absent for layout 1, which it converts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parents[1] / "store" / "vectors"


def vectors() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(VECTORS.glob("*.json"))}


def reading(assembled: Any) -> dict[str, Any]:
    """What a reader made of the metadata (its layout-1 value), in the vectors' terms."""
    sessions = assembled.get("sessions") if isinstance(assembled, dict) else None
    aside = assembled.get("set_aside") if isinstance(assembled, dict) else None
    return {
        "active": assembled.get("active") if isinstance(assembled, dict) else None,
        "sessions": {name: {"ids": [e.get("id") if isinstance(e, dict) else None for e in s.get("entries") or []],
                            "leaf": s.get("leaf")}
                     for name, s in (sessions or {}).items() if isinstance(s, dict)},
        "set_aside": sorted(({"where": i.get("where"), "session": i.get("session"), "reason": i.get("reason")}
                             for i in aside or [] if isinstance(i, dict)), key=lambda i: str(i["where"])),
    }


def check(vector: dict[str, Any], got: dict[str, Any]) -> None:
    want = vector["expect"]
    assert got["active"] == want["active"]
    assert {n: {"ids": s["ids"], "leaf": s["leaf"]} for n, s in want["sessions"].items()} == got["sessions"]
    expected = sorted(want["set_aside"], key=lambda i: i["where"])
    assert [(i["where"], i["session"]) for i in got["set_aside"]] == [(i["where"], i["session"]) for i in expected]
    for item, wanted in zip(got["set_aside"], expected):
        assert isinstance(item["reason"], str) and item["reason"].startswith(wanted["reason"]), (item, wanted)


def loaded(vector: dict[str, Any], name: str) -> list[str]:
    session = vector["expect"]["sessions"][name]
    return session.get("loaded", list(dict.fromkeys(session["ids"])))
