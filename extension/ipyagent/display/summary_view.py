"""A compaction summary as people read it.

A summary's appendix holds tagged blocks for the model (``<read-files>``, ``<modified-files>``,
``<kernel-variables>``, ``<shell-commands>``, ``<tool-errors>``, ``<notebook-cells>``), one item a
line. Rendered as Markdown those lines run together into one paragraph; here each block becomes a
heading and a list, and a cell's 36-character id is shortened. The model still gets the summary as
it was written: this is a view only, and its result is untrusted Markdown source like its input
(it goes through :func:`~ipyagent.display.untrusted.markdown_html` or ``safe_markdown``).
"""

from __future__ import annotations

import re

__all__ = ["readable_summary"]

_OPEN = re.compile(r"^<([a-z][a-z-]{0,40})>$")
_CELL_ID = re.compile(r"\(id ([^)\s]{12,})\)")
ID_CHARS = 8


def _title(tag: str) -> str:
    return tag.replace("-", " ").capitalize()


def _item(tag: str, line: str) -> str:
    if tag == "notebook-cells":
        line = _CELL_ID.sub(lambda m: f"(id {m.group(1)[:ID_CHARS]}…)", line)
    return f"- {line}"


def readable_summary(summary: str) -> str:
    """``summary`` with each tagged block of its appendix as a bold title and a list."""
    lines = summary.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i].strip())
        end = None
        if opened:
            closing = f"</{opened.group(1)}>"
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == closing), None)
        if opened is None or end is None:
            out.append(lines[i])
            i += 1
            continue
        tag = opened.group(1)
        items = [line for line in lines[i + 1:end] if line.strip()]
        out += [f"**{_title(tag)}**", "", *(_item(tag, line.strip()) for line in items), ""]
        i = end + 1
    return "\n".join(out)
