"""A live progress line for a long wait in a cell (a summary, MCP servers starting, window
discovery, a background compaction being joined): an ipywidgets progress bar with a label while it
lasts, then one static line in the saved output (the widget's models closed, so a reopened
notebook shows no dead widget).

    line = ProgressLine("Summarising")            # shown at once in the current cell
    line.update("812 / 4,096 tokens, 3.2 s", 812, 4096)
    line.close("Summary: 1,020 tokens in 9.8 s")   # the static text that stays

Without ipywidgets the line is plain text, updated in place by display id. The label and the final
text may hold a model's or a server's name: they are shown as text (``text/plain`` and escaped
HTML), never as raw HTML.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from IPython.display import display

from ipyagent.display.untrusted import escape_html

__all__ = ["ProgressLine"]

CLASS = "ipyagent-progress"


def static_line(text: str) -> dict[str, str]:
    """The saved form of a finished wait: a small grey line."""
    return {"text/plain": text,
            "text/html": f"<div class='{CLASS}-done' style='color:#666;font-size:90%'>{escape_html(text)}</div>"}


class ProgressLine:
    """One wait's live line in the current cell; see the module's docstring. Thread-safe: a worker
    thread may update it while the cell's thread waits."""

    def __init__(self, label: str, *, display_func: Callable[..., Any] = display, live: bool = True):
        self.label = label
        self._lock = threading.Lock()
        self._bar: Any = None
        self._text: Any = None
        self._box: Any = None
        self._closed = False
        data: dict[str, Any] = static_line(label + "…")
        if live:
            try:
                import ipywidgets as w

                self._bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, bar_style="info",
                                            layout=w.Layout(width="240px"))
                self._text = w.Label(value=label + "…")
                self._box = w.HBox([self._bar, self._text])
                self._box.add_class(CLASS)
                # the widget's view, and the line itself as the text a frontend without widgets shows
                data = {**(self._box._repr_mimebundle_() or {}), **data}
            except Exception:  # noqa: BLE001 - no ipywidgets: the plain line, updated by display id
                self._bar = self._text = self._box = None
        self.handle = display_func(data, raw=True, display_id=True)

    def update(self, detail: str, done: float | None = None, total: float | None = None) -> None:
        """``label: detail``, the bar at ``done / total`` (unknown total: the bar pulses full)."""
        with self._lock:
            if self._closed:
                return
            text = f"{self.label}: {detail}" if detail else self.label + "…"
            if self._box is not None:
                self._text.value = text
                self._bar.value = min(1.0, done / total) if done is not None and total else 1.0
                self._bar.bar_style = "info" if total else ""
            elif self.handle is not None:
                self.handle.update(static_line(text), raw=True)

    def close(self, final: str | None = None) -> None:
        """End the wait: the line becomes ``final`` (None: it goes away)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.handle is not None:
                self.handle.update(static_line(final) if final else {"text/plain": ""}, raw=True)
            for widget in (self._box, self._bar, self._text):
                if widget is not None:
                    for model in (getattr(widget, "layout", None), getattr(widget, "style", None), widget):
                        if model is not None:
                            model.close()
