"""The compaction explorer drawn as HTML and as plain text: the timeline, the numbers, the
summariser's input. The live widget shows these fragments; the static views (for viewers without
a kernel) are the same fragments put together.

Every piece of session text (labels, snippets, the summariser's input, the session name) is
untrusted and goes through :func:`ipyagent.display.untrusted.escape_html`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ipyagent.compaction.settings import unknown_window_note
from ipyagent.compaction.summarizer import SummaryRequest
from ipyagent.display.untrusted import escape_html
from ipyagent.explorer.plan import Box, Exploration, entry_label
from ipyagent.text import clip

__all__ = ["FATE_COLORS", "FATE_TEXT", "legend_html", "numbers_html", "numbers_text", "requests_html",
           "requests_title", "static_bundle", "static_html", "static_plain", "timeline_html", "timeline_text",
           "title_html"]

# The budget widget's colours: summarised history blue, the summary purple, the kept tail green.
FATE_COLORS = {"earlier": "#cfcfcf", "summary": "#8e6cc9", "summarised": "#4a90d9", "prefix": "#e08a00",
               "kept": "#3fb27f"}
FATE_TEXT = {"earlier": "already in an earlier summary", "summary": "the latest summary (this compaction updates it)",
             "summarised": "summarised", "prefix": "turn prefix (summarised on its own)", "kept": "kept verbatim"}
LEGEND = {"earlier": "in earlier summaries", "summary": "latest summary", "summarised": "summarised",
          "prefix": "turn prefix (split turn)", "kept": "kept verbatim"}

ROW_PX = 720
PX_BUDGET = 6 * ROW_PX  # the context part of the timeline: at most about six rows…
BOX_PX = 30  # … and about this many pixels a box (a short session fits one row)
EARLIER_PX = ROW_PX  # what is already in earlier summaries is drawn in at most one row
MIN_PX = 3
LABEL_PX = 46  # boxes at least this wide show their label
LIVE_INPUT_CHARS = 100_000  # the summariser's input shown per request in the live widget
STATIC_INPUT_CHARS = 20_000  # … and in the static view saved with the notebook


def _n(value: int) -> str:
    return f"{value:,}"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (plural or word + 's')}"


# ---- the timeline ------------------------------------------------------------------------------


def _box_text(x: Exploration, box: Box) -> tuple[str, str]:
    """(the label inside the box, its tooltip), plain text."""
    if box.entries == 1:
        label, snippet = entry_label(x.path[box.start])
        tip = f"#{box.start + 1} {label} · {_n(box.tokens)} tokens · {FATE_TEXT[box.fate]}"
        return label, tip + (f"\n{snippet}" if snippet else "")
    turns = _plural(box.turn_starts, "turn") if box.turn_starts else "part of a turn"
    label = turns
    tip = (f"#{box.start + 1}–#{box.end} · {_plural(box.entries, 'entry', 'entries')} · {turns} · "
           f"{_n(box.tokens)} tokens · {FATE_TEXT[box.fate]}")
    return label, tip


def _widths(x: Exploration) -> list[int]:
    earlier = sum(b.tokens for b in x.boxes if b.fate == "earlier")
    rest = sum(b.tokens for b in x.boxes if b.fate != "earlier")
    budget = min(PX_BUDGET, max(ROW_PX, BOX_PX * sum(1 for b in x.boxes if b.fate != "earlier")))
    scale = budget / max(1, rest)
    earlier_scale = min(scale, EARLIER_PX / max(1, earlier))
    return [min(ROW_PX, max(MIN_PX, round(b.tokens * (earlier_scale if b.fate == "earlier" else scale))))
            for b in x.boxes]


def timeline_html(x: Exploration) -> str:
    """The path as boxes (width ∝ tokens), coloured by fate, with the cut point marked."""
    parts = []
    for box, width in zip(x.boxes, _widths(x)):
        if x.cut_index is not None and box.start == x.cut_index:
            parts.append(f'<span class="ipyagent-explore-cutmark" title="cut point: entry #{x.cut_index + 1} is the '
                         'first one kept verbatim" style="display:inline-block;width:3px;height:32px;margin:0 3px;'
                         'vertical-align:top;background:#d9534f"></span>')
        label, tip = _box_text(x, box)
        border = "border-left:2px solid rgba(0,0,0,.5);" if box.turn_starts and box.entries == 1 else ""
        inside = ""
        if width >= LABEL_PX:
            chars = max(3, width // 6)
            inside = escape_html(label if len(label) <= chars else label[:chars - 1] + "…")
        color = "#333" if box.fate == "earlier" else "#fff"
        parts.append(f'<span title="{escape_html(tip)}" style="display:inline-block;box-sizing:border-box;'
                     f'width:{width}px;height:28px;margin:2px 1px;vertical-align:top;overflow:hidden;'
                     f'white-space:nowrap;background:{FATE_COLORS[box.fate]};color:{color};{border}'
                     f'font:10px/28px sans-serif;padding-left:2px;border-radius:2px">{inside}</span>')
    grouping = {"entry": "one box per entry"}.get(x.grouping, f"one box per {x.grouping}")
    scale_note = (f"{grouping}; width ∝ tokens" + ("; what is already in earlier summaries is drawn compressed"
                                                   if x.counts.get("earlier") else ""))
    return (f'<div class="ipyagent-explore-timeline" style="line-height:0;max-width:{ROW_PX + 40}px">'
            f'{"".join(parts)}</div><div style="font-size:80%;color:#666;margin-top:2px;line-height:1.3">'
            f'{escape_html(scale_note)}</div>')


def legend_html() -> str:
    items = "".join(f'<span style="margin-right:1em;white-space:nowrap"><span style="display:inline-block;width:.8em;'
                    f'height:.8em;background:{FATE_COLORS[f]};margin-right:.3em"></span>{LEGEND[f]}</span>'
                    for f in LEGEND)
    return (f'<div style="font-size:85%;margin-top:4px;line-height:1.4">{items}<span style="white-space:nowrap"><span '
            'style="display:inline-block;width:3px;height:.9em;background:#d9534f;margin-right:.3em;'
            'vertical-align:middle"></span>cut point</span> · a dark left edge starts a turn</div>')


def timeline_text(x: Exploration, width: int = 72) -> str:
    """One character per box (by fate), ``|`` at the cut."""
    marks = {"earlier": ".", "summary": "S", "summarised": "h", "prefix": "p", "kept": "k"}
    line = ""
    for box in x.boxes:
        if x.cut_index is not None and box.start == x.cut_index:
            line += "|"
        line += marks[box.fate]
    rows = [line[i:i + width] for i in range(0, len(line), width)] or [""]
    return "\n".join(rows) + "\n(. earlier summaries, S latest summary, h summarised, p turn prefix, k kept, | cut)"


# ---- the numbers -------------------------------------------------------------------------------


def _cut_line(x: Exploration) -> tuple[str, str]:
    """(text with the cut number as {cut}, the number)."""
    if x.plan is None or x.cut_index is None:
        return "No cut: " + x.reason, ""
    label, _ = entry_label(x.path[x.cut_index])
    text = f"Cut point: entry {{cut}} of {_n(x.path_length)} on the path ({label}, id {x.plan.first_kept_entry_id})"
    if x.turn_start_index is not None:
        prefix, _ = entry_label(x.path[x.turn_start_index])
        text += (f" — it splits the turn that starts at entry {x.turn_start_index + 1} ({prefix}): "
                 "the turn's prefix gets a summary of its own")
    return text, f"{x.cut_index + 1}"


def _lines(x: Exploration) -> list[str]:
    c, t = x.counts, x.tokens
    lines = []
    if x.plan is not None:
        part = f"Summarise {_plural(c['summarised'], 'entry', 'entries')} (≈{_n(t['summarised'])} tokens)"
        if c.get("prefix"):
            part += f" + a turn prefix of {_plural(c['prefix'], 'entry', 'entries')} (≈{_n(t['prefix'])} tokens)"
        if x.plan.previous_summary is not None:
            part += f", updating the previous summary (≈{_n(t.get('summary', 0))} tokens)"
        lines.append(part + f"; keep {_plural(c['kept'], 'entry', 'entries')} verbatim (≈{_n(t['kept'])} tokens).")
    if x.masked:
        lines.append(f"Masked: {_plural(x.masked, 'tool result', 'tool results')} hidden behind a placeholder "
                     "(%agent mask; recall returns them, %agent unmask puts them back); counted as their placeholders.")
    if c.get("earlier"):
        lines.append(f"Already inside earlier summaries: {_plural(c['earlier'], 'entry', 'entries')} "
                     f"(≈{_n(t['earlier'])} tokens).")
    if x.plan is not None:
        lines.append(f"Tokens (estimated): before {_n(x.estimated_before)} → after {_n(x.kept_tokens)} kept + the "
                     f"summary, at most {_n(x.after_max_tokens)} in all (the summary may take up to "
                     f"{_n(x.summary_max_tokens)}; one that would not shrink the context is rejected).")
    window = f"window {_n(x.settings.window)}" + ("" if x.window_known else ", assumed")
    verdict = "it would compact automatically now" if x.would_compact else "below that: no automatic compaction yet"
    counted = "" if x.tokens_before == x.estimated_before else " (the last reply's usage plus estimates after it)"
    lines.append(f"Trigger: compacts above {_n(x.threshold)} tokens ({window}, minus reserve "
                 f"{_n(x.settings.reserve_tokens)}); the context counts {_n(x.tokens_before)}{counted}: {verdict}.")
    if not x.window_known:
        note = unknown_window_note(x.settings.reserve_tokens, x.settings.keep_recent_tokens)
        lines.append(note[0].upper() + note[1:] + ".")
    lines.append(f"Path: {_plural(x.path_length, 'entry', 'entries')} of {_n(x.entries_total)} in session "
                 f"{x.session_name!r}; tokens estimated with {x.estimator_name}"
                 + (f"; from {x.source}" if x.source else "") + ".")
    return lines


def numbers_html(x: Exploration) -> str:
    text, number = _cut_line(x)
    cut = (f'<span class="ipyagent-explore-cut" data-cut-index="{x.cut_index}" '
           f'style="font-weight:bold;color:#d9534f">{number}</span>') if number else ""
    head = escape_html(text).replace("{cut}", cut)
    rows = "".join(f"<div>{escape_html(line)}</div>" for line in _lines(x))
    notes = "".join(f'<div style="color:#a15c00">{escape_html(n)}</div>' for n in x.notes)
    s = x.settings  # the settings drawn, as attributes (a test can wait for the view of a value)
    return (f'<div class="ipyagent-explore-numbers" data-window="{s.window}" data-reserve="{s.reserve_tokens}" '
            f'data-keep-recent="{s.keep_recent_tokens}" style="font-size:90%;line-height:1.45"><div>{head}</div>'
            f'<div style="color:#444">{rows}</div>{notes}</div>')


def numbers_text(x: Exploration) -> str:
    text, number = _cut_line(x)
    return "\n".join([text.replace("{cut}", number), *_lines(x), *x.notes])


# ---- the summariser's input --------------------------------------------------------------------

KIND_TEXT = {"history": "the history", "turn_prefix": "the turn prefix of the split turn"}


def _shown(text: str, limit: int) -> str:
    """``text`` as <pre> blocks; a text longer than ``limit`` shows its head and tail with a note."""
    pre = '<pre style="white-space:pre-wrap;font-size:80%;margin:2px 0">{}</pre>'
    head, tail, hidden = clip(text, limit)
    if not hidden:
        return pre.format(escape_html(text))
    return (pre.format(escape_html(head))
            + f'<div style="font-style:italic;color:#a15c00">[… {_n(hidden)} characters of this request are not '
              "shown here; the explorer's summarizer_requests() returns it whole …]</div>"
            + pre.format(escape_html(tail)))


def requests_title(requests: Sequence[tuple[SummaryRequest, int]] | None) -> str:
    if requests is None:
        return "What the summariser would receive"
    if not requests:
        return "What the summariser would receive: nothing (no compaction with these settings)"
    chars = sum(len(r.system_prompt) + len(r.prompt) for r, _ in requests)
    kinds = ", ".join(r.kind.replace("_", " ") for r, _ in requests)
    return (f"What the summariser would receive: {_plural(len(requests), 'request')} ({kinds}), "
            f"{_n(chars)} characters")


def requests_html(requests: Sequence[tuple[SummaryRequest, int]], limit: int = LIVE_INPUT_CHARS) -> str:
    if not requests:
        return "<div><i>Nothing: with these settings there is no compaction.</i></div>"
    out = [(f"<details><summary>System prompt ({_n(len(requests[0][0].system_prompt))} characters)</summary>"
            f"{_shown(requests[0][0].system_prompt, limit)}</details>")]
    for n, (request, omitted) in enumerate(requests, 1):
        dropped = (f" · its {_plural(omitted, 'oldest message')} dropped to fit the summary model's input budget"
                   if omitted else "")
        kind = escape_html(KIND_TEXT.get(request.kind, request.kind))
        limit_text = _n(request.max_tokens) if request.max_tokens is not None else "the model's output limit"
        out.append(f"<div style='margin-top:6px'><b>Request {n}: {kind}"
                   f"</b> · max_tokens {limit_text} · {_n(len(request.prompt))} characters{dropped}</div>"
                   + _shown(request.prompt, limit))
    return "".join(out)


# ---- the static views --------------------------------------------------------------------------


def settings_line(x: Exploration) -> str:
    s = x.settings
    return (f"window {_n(s.window)} · reserve {_n(s.reserve_tokens)} · keep-recent {_n(s.keep_recent_tokens)} · "
            f"estimator {x.estimator_name}" + (f" · focus: {s.focus}" if s.focus else ""))


def title_html(x: Exploration) -> str:
    return (f"<div><b>Compaction explorer</b> [{escape_html(x.session_name)}]</div>")


def static_html(x: Exploration, requests: Sequence[tuple[SummaryRequest, int]]) -> str:
    return (f'<div class="ipyagent-explore" style="font-family:var(--jp-ui-font-family,sans-serif);max-width:780px">'
            f"{title_html(x)}<div style='font-size:85%;color:#555'>{escape_html(settings_line(x))}</div>"
            f"{numbers_html(x)}{timeline_html(x)}{legend_html()}"
            f"<details><summary>{escape_html(requests_title(requests))}</summary>"
            f"{requests_html(requests, STATIC_INPUT_CHARS)}</details></div>")


def static_plain(x: Exploration) -> str:
    return (f"Compaction explorer [{x.session_name}] {settings_line(x)}\n{numbers_text(x)}\n{timeline_text(x)}")


def static_bundle(x: Exploration, requests: Sequence[tuple[SummaryRequest, int]]) -> dict[str, str]:
    return {"text/plain": static_plain(x), "text/html": static_html(x, requests)}
