"""Write the documentation's two diagrams as SVG (committed; tests/test_docs.py checks they are
what this script writes):

* ``budget-cut.svg``: one request's context against a window, with the reserve, the threshold at
  which compaction is due, and the cut between what is summarised and the kept recent tail; the
  budgets come from ipyagent's own rule (``scaled_budget``).
* ``cell-path.svg``: one ``%%agent`` cell's way through the layers, from the magic to the saved
  notebook (``docs/architecture.md``), each box naming its folder.
* ``entry-flow.svg``: where a session entry travels: kernel → bridge (or a journal output) →
  the notebook's metadata → the ``.ipynb`` file, and back into the kernel at its next start.

    python docs/images/make_figures.py
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "extension"))

from ipyagent.compaction.settings import scaled_budget  # noqa: E402

FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"'
WINDOW = 32_000
# what the context holds just before compaction (tokens): system prompt and tools, then the history
SYSTEM_TOOLS = 2_100
HISTORY = 22_600


def _text(x: float, y: float, text: str, *, size: int = 13, anchor: str = "start", weight: str = "normal",
          fill: str = "#222") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" {FONT} font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}">{escape(text)}</text>')


def _rect(x: float, y: float, w: float, h: float, fill: str, *, stroke: str = "none", rx: int = 3) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{rx}" fill="{fill}" stroke="{stroke}"/>'


def _svg(width: int, height: int, parts: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{escape(title)}">\n<title>{escape(title)}</title>\n'
            f'{_rect(0, 0, width, height, "#ffffff", rx=0)}\n' + "\n".join(parts) + "\n</svg>\n")


def budget_cut() -> str:
    reserve, keep = scaled_budget(WINDOW)
    threshold = WINDOW - reserve
    used = SYSTEM_TOOLS + HISTORY
    left, width, top, bar = 30.0, 820.0, 70.0, 46.0
    scale = width / WINDOW

    def x(tokens: float) -> float:
        return left + tokens * scale

    cut = used - keep
    parts = [
        _text(left, 28, f"A {WINDOW:,}-token window: reserve {reserve:,}, kept tail {keep:,} (scaled to the window)",
              size=15, weight="bold"),
        _rect(left, top, width, bar, "#f3f3f3", stroke="#bbbbbb"),
        _rect(x(threshold), top, reserve * scale, bar, "#f6d7d7"),
        _rect(x(0), top, SYSTEM_TOOLS * scale, bar, "#9e9e9e"),
        _rect(x(SYSTEM_TOOLS), top, (cut - SYSTEM_TOOLS) * scale, bar, "#8e6cc9"),
        _rect(x(cut), top, keep * scale, bar, "#3fb27f"),
        (f'<line x1="{x(threshold):.1f}" y1="{top - 14}" x2="{x(threshold):.1f}" y2="{top + bar + 14}" '
        'stroke="#c0392b" stroke-width="2" stroke-dasharray="5 3"/>'),
        (f'<line x1="{x(cut):.1f}" y1="{top - 14}" x2="{x(cut):.1f}" y2="{top + bar + 14}" stroke="#222" '
        'stroke-width="2"/>'),
        _text(x(cut), top - 20, "cut point", anchor="middle", weight="bold"),
        _text(x(threshold), top - 20, f"threshold {threshold:,}", anchor="middle", fill="#c0392b", weight="bold"),
        _text(x(SYSTEM_TOOLS / 2), top + bar / 2 + 5, "system", anchor="middle", fill="#fff", size=12),
        _text(x((SYSTEM_TOOLS + cut) / 2), top + bar / 2 + 5, "older history → summary", anchor="middle",
              fill="#fff"),
        _text(x(cut + keep / 2), top + bar / 2 + 5, "kept verbatim", anchor="middle", fill="#fff"),
        _text(x(used + (WINDOW - used) / 2), top + bar / 2 + 5, "reserve", anchor="middle", fill="#c0392b"),
        _text(x(used), top + bar + 30, f"context {used:,}: past the threshold, so compaction is due", anchor="middle",
              size=12),
    ]
    after = SYSTEM_TOOLS + 900 + keep  # system, a summary of ~900 tokens, the kept tail
    low = top + bar + 80
    parts += [
        _text(left, low - 12, "after the compaction", weight="bold"),
        _rect(left, low, width, bar, "#f3f3f3", stroke="#bbbbbb"),
        _rect(x(0), low, SYSTEM_TOOLS * scale, bar, "#9e9e9e"),
        _rect(x(SYSTEM_TOOLS), low, 900 * scale, bar, "#5b3d99"),
        _rect(x(SYSTEM_TOOLS + 900), low, keep * scale, bar, "#3fb27f"),
        _text(x(SYSTEM_TOOLS + 450), low + bar + 18, "summary", anchor="middle", size=12),
        _text(x(SYSTEM_TOOLS + 900 + keep / 2), low + bar / 2 + 5, "kept verbatim", anchor="middle", fill="#fff"),
        _text(x(after) + 10, low + bar / 2 + 5, f"{used:,} → about {after:,} tokens: room for the next turns"),
    ]
    return _svg(880, int(low + bar + 40), parts, "The budget and the cut")


def entry_flow() -> str:
    boxes = [("kernel", ["%%agent appends", "an entry"], "#4a90d9"),
             ("bridge", ["a comm: entry → ack", "(else a journal output)"], "#3fb27f"),
             ("metadata", ["the notebook's", 'metadata["ipyagent"]'], "#8e6cc9"),
             ("file", ["the .ipynb, saved", "by the frontend"], "#9e9e9e")]
    w, h, gap, top = 190.0, 84.0, 40.0, 50.0
    parts = [_text(20, 28, "Where a session entry travels", size=15, weight="bold"),
             ('<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
             '<path d="M0,0 L10,4 L0,8 z" fill="#444"/></marker></defs>')]
    for i, (name, note, colour) in enumerate(boxes):
        x = 20 + i * (w + gap)
        parts += [_rect(x, top, w, h, colour, rx=8),
                  _text(x + w / 2, top + 28, name, anchor="middle", fill="#fff", size=16, weight="bold")]
        parts += [_text(x + w / 2, top + 50 + 16 * k, line, anchor="middle", fill="#fff", size=12)
                  for k, line in enumerate(note)]
        if i:
            parts.append(f'<line x1="{x - gap + 2:.1f}" y1="{top + h / 2:.1f}" x2="{x - 4:.1f}" '
                         f'y2="{top + h / 2:.1f}" stroke="#444" stroke-width="2" marker-end="url(#arrow)"/>')
    first, last = 20 + w / 2, 20 + 3 * (w + gap) + w / 2
    bottom = top + h
    parts += [(f'<path d="M{last:.1f},{bottom + 2:.1f} V{bottom + 40:.1f} H{first:.1f} V{bottom + 8:.1f}" fill="none" '
              'stroke="#444" stroke-width="2" stroke-dasharray="6 4" marker-end="url(#arrow)"/>'),
              _text((first + last) / 2, bottom + 60, "at a kernel start or restart: the frontend pushes the stored "
                    "sessions back (or the kernel reads the file: hydration)", anchor="middle", size=12)]
    return _svg(int(20 + 4 * w + 3 * gap + 20), int(bottom + 80), parts, "Where a session entry travels")


# (layer, where, what it does with the cell), in the order docs/architecture.md follows them
CELL_PATH = [
    ("the magic", "kernel/", "%%agent: the session's slot, the settings as a RunConfig, a CellRun"),
    ("the agent loop", "agent/", "AgentLoop: the prompt, the model's turns, the tool calls"),
    ("budget and compaction", "agent/ compaction/ core.py", "RequestBudget, Compactor: plan, summarise, append"),
    ("providers", "providers/", "the request on the wire; the reply streamed back"),
    ("the session", "session/", "every message an entry of Pi's tree"),
    ("persistence and bridge", "kernel/ bridge/ store/", "each entry to the page (or a journal output)"),
    ("the labextension's store", "extension/frontend/src/", 'the entries in metadata["ipyagent"], acked'),
    ("the .ipynb", "the frontend's save", "the session saved with the notebook"),
]


def cell_path() -> str:
    left, top, w, h, gap = 20.0, 50.0, 720.0, 46.0, 16.0
    parts = [_text(left, 28, "One %%agent cell, from the magic to the saved notebook", size=15, weight="bold"),
             ('<defs><marker id="down" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
              '<path d="M0,0 L10,4 L0,8 z" fill="#444"/></marker></defs>')]
    shades = ["#4a90d9", "#3f7fc4", "#5b3d99", "#8e6cc9", "#3fb27f", "#2e9468", "#7a7a7a", "#9e9e9e"]
    for i, ((name, where, what), colour) in enumerate(zip(CELL_PATH, shades, strict=True)):
        y = top + i * (h + gap)
        parts += [_rect(left, y, w, h, colour, rx=8),
                  _text(left + 14, y + 20, name, fill="#fff", size=14, weight="bold"),
                  _text(left + w - 14, y + 20, where, anchor="end", fill="#fff", size=12),
                  _text(left + 14, y + 38, what, fill="#fff", size=12)]
        if i:
            parts.append(f'<line x1="{left + w / 2:.1f}" y1="{y - gap + 1:.1f}" x2="{left + w / 2:.1f}" '
                         f'y2="{y - 3:.1f}" stroke="#444" stroke-width="2" marker-end="url(#down)"/>')
    height = top + len(CELL_PATH) * (h + gap)
    return _svg(int(left * 2 + w), int(height), parts, "One %%agent cell through the layers")


FIGURES = {"budget-cut.svg": budget_cut, "cell-path.svg": cell_path, "entry-flow.svg": entry_flow}


def main() -> None:
    for name, draw in FIGURES.items():
        (HERE / name).write_text(draw(), encoding="utf-8")
        print(f"wrote docs/images/{name}")


if __name__ == "__main__":
    main()
