"""A cell's outputs (nbformat dicts, as a kernel, nbclient or a JupyterLab page gives them) as text,
for assertions: stream text, each display's ``text/plain`` and ``text/markdown``, and an error as
``ERROR ename: evalue``; one part a line.
"""

from __future__ import annotations

from typing import Any


def _joined(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value)


def outputs_text(cell_outputs: list[dict[str, Any]]) -> str:
    parts = []
    for o in cell_outputs:
        if "text" in o:
            parts.append(_joined(o["text"]))
        data = o.get("data") or {}
        for mime in ("text/plain", "text/markdown"):
            if data.get(mime):
                parts.append(_joined(data[mime]))
        if o.get("output_type") == "error":
            parts.append(f"ERROR {o.get('ename')}: {o.get('evalue')}")
    return "\n".join(parts)


def output_line(cell_outputs: list[dict[str, Any]], tag: str) -> str:
    """The rest of the first line that starts with ``tag`` and a space (a test cell prints
    ``STATE {...}``)."""
    text = outputs_text(cell_outputs)
    for line in text.splitlines():
        if line.startswith(tag + " "):
            return line[len(tag) + 1:]
    raise AssertionError(f"no {tag!r} line in {text!r}")
