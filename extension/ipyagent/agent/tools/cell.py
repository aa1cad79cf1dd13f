"""Running code like a notebook cell: the port the ``python`` tool uses inside a kernel, and what a
cell's outputs become for the model.

The notebook layer implements :class:`CellRunner` with IPython's own machinery (magics, ``!cmd``,
the display hook, ``display()``); the agent layer only sees plain data: a :class:`CellRun`.
:func:`cell_tool_output` turns it into the tool's result — text for the model (stdout, stderr,
each output's ``text/plain``, the traceback), images as Pi image blocks (checked and capped, see
``images.py``), and the outputs' HTML in ``details`` for the tool block only (never sent to the
model; sanitised by the renderer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ipyagent.agent.tools.images import IMAGE_MIME_TYPES, ImageCollector
from ipyagent.agent.tools.truncate import clean_output
from ipyagent.shapes import ContentBlock

MAX_HTML_CHARS = 200_000  # HTML of one result kept for the tool block; larger outputs show as text only


@dataclass
class CellOutput:
    """One rich output: a MIME bundle from ``display()`` or the last expression's value."""

    data: dict[str, object]  # a MIME bundle: text as a string (or lines), images base64, JSON as itself
    metadata: dict[str, object] = field(default_factory=dict)
    is_result: bool = False  # the value of the last expression (``execute_result``)


@dataclass
class CellRun:
    stdout: str = ""
    stderr: str = ""
    outputs: list[CellOutput] = field(default_factory=list)
    error: str | None = None  # the traceback as text, when the code raised
    left_out_lines: int = 0  # lines of stdout/stderr not kept (one line in their place says so)


class CellRunner(Protocol):
    """Runs code in the user's namespace as a notebook cell would. Raises KeyboardInterrupt when
    the user interrupts; every other failure is a :class:`CellRun` with ``error``."""

    def run(self, code: str) -> CellRun: ...


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


def cell_tool_output(run: CellRun) -> tuple[str, bool, dict[str, Any], list[ContentBlock]]:
    """(text, is_error, details, image blocks) of a cell run, before truncation."""
    images = ImageCollector()
    html: list[str] = []
    html_chars = 0
    shown: list[str] = []
    value_text = ""
    for n, output in enumerate(run.outputs, 1):
        data = output.data
        plain = _text(data["text/plain"]) if "text/plain" in data else ""
        for mime in IMAGE_MIME_TYPES:
            if mime in data:
                images.add(mime, data[mime], label=f"output {n}")
                break
        if "text/html" in data:
            fragment = _text(data["text/html"])
            if html_chars + len(fragment) <= MAX_HTML_CHARS:
                html.append(fragment)
                html_chars += len(fragment)
        if output.is_result:
            value_text = plain
        elif plain:
            shown.append(plain)
        elif not any(m in data for m in IMAGE_MIME_TYPES):
            shown.append(f"[{', '.join(sorted(data)) or 'empty'} output]")
    parts = [run.stdout.removesuffix("\n")]
    if err := run.stderr.removesuffix("\n"):
        parts.append("[stderr]\n" + err)
    parts += shown
    if run.error:
        parts.append(run.error.removesuffix("\n"))
    parts.append(value_text)
    parts += images.notices
    text = "\n".join(p for p in (clean_output(p) for p in parts) if p)
    details: dict[str, Any] = {"has_value": bool(value_text)}
    if run.left_out_lines:
        details["left_out_lines"] = run.left_out_lines
    if html:
        details["html"] = html
    return text, run.error is not None, details, images.blocks
