"""Small drawing helpers for the teaching notebooks (no matplotlib: HTML with a plain-text twin).

    from ipyagent.kernel.teaching import current_session, timeline, usage_table, CompactionSpy

(``ipyagent.kernel.teaching`` adds what needs the running kernel, ``current_session()`` and the
budget's figures, and re-exports these drawings.)

They ship in the package (not beside the notebooks), so a notebook that uses them runs wherever it
is written, for example the tour's output at the repository's root.

* ``timeline(session)`` — every entry on the current path as a box, with, for a compaction,
  what it summarised, its cut point, what it kept verbatim and the summary it produced.
* ``usage_table(session)`` — the provider-reported usage of every model reply (input, cache
  read, cache write, output) with the compactions in between: what compaction does to the
  prompt cache.
* ``CompactionSpy`` — a ``session_before_compact`` hook that only watches: it records what each
  compaction was about to do (reason, how much it summarises, split turn, previous summary).

Every helper returns an object that renders as HTML in Jupyter and as text elsewhere.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipyagent.hooks import SessionBeforeCompactCall
from ipyagent.shapes import Entry
from ipyagent.text import one_line

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = ["CompactionSpy", "Drawing", "context_preview", "timeline", "usage_table"]

COLORS = {"user": "#4a90d9", "assistant": "#3fb27f", "toolResult": "#9e9e9e", "compaction": "#8e6cc9",
          "other": "#cccccc"}


@dataclass
class Drawing:
    html: str
    text: str

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


# ---- entries -----------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "toolCall":
            parts.append(f"{block.get('name')}(…)")
    return " ".join(parts)


def _kind(entry: Entry) -> str:
    if entry.get("type") == "compaction":
        return "compaction"
    if entry.get("type") == "message":
        role = entry["message"].get("role")
        return role if role in COLORS else "other"
    return "other"


def _label(entry: Entry) -> str:
    kind = _kind(entry)
    if kind == "compaction":
        return "summary"
    if kind == "user":
        count = entry["message"].get("executionCount")
        return f"prompt [{count}]" if count is not None else "prompt"
    if kind == "assistant":
        calls = [str(b.get("name")) for b in entry["message"].get("content") or []
                 if isinstance(b, dict) and b.get("type") == "toolCall"]
        return "reply → " + ", ".join(calls) if calls else "reply"
    if kind == "toolResult":
        return f"{entry['message'].get('toolName', 'tool')} result"
    return str(entry.get("type"))


def _tokens(session: Session, entry: Entry) -> int:
    if entry.get("type") == "compaction":
        return (len(entry.get("summary", "")) + 3) // 4
    from ipyagent.session.context import context_message

    message = context_message(entry)
    return session.estimate_entry(entry, message) if message is not None else 0


def _fates(path: list[Entry], compaction_index: int) -> dict[str, str]:
    """What compaction ``path[compaction_index]`` did to each earlier entry: "earlier" (already in a
    previous summary), "summarised", "prefix" (turn prefix of a split turn) or "kept"."""
    compaction = path[compaction_index]
    ids = [e["id"] for e in path]
    kept_id = compaction.get("firstKeptEntryId")
    first_kept = ids.index(kept_id) if kept_id in ids else compaction_index
    start = 0
    for i in range(compaction_index - 1, -1, -1):  # the previous compaction's first kept entry
        if path[i].get("type") == "compaction":
            prev = path[i].get("firstKeptEntryId")
            start = ids.index(prev) if prev in ids else i + 1
            break
    turn_start = first_kept
    first = path[first_kept] if first_kept < compaction_index else None
    if first is not None and _kind(first) != "user":
        for i in range(first_kept - 1, start - 1, -1):
            if _kind(path[i]) == "user":
                turn_start = i
                break
    fates = {}
    for i, entry in enumerate(path[:compaction_index]):
        if entry.get("type") == "compaction":
            fates[entry["id"]] = "earlier"
        elif i < start:
            fates[entry["id"]] = "earlier"
        elif i < turn_start:
            fates[entry["id"]] = "summarised"
        elif i < first_kept:
            fates[entry["id"]] = "prefix"
        else:
            fates[entry["id"]] = "kept"
    return fates


FATE_TEXT = {"earlier": "in an earlier summary", "summarised": "summarised", "prefix": "summarised (turn prefix)",
             "kept": "kept verbatim", "": ""}
FATE_STYLE = {"earlier": "opacity:.35", "summarised": "opacity:.55;outline:2px dashed #8e6cc9",
              "prefix": "opacity:.55;outline:2px dashed #e08a00", "kept": "outline:2px solid #2e7d32", "": ""}


def timeline(session: Session, compaction: int = -1) -> Drawing:
    """The current path as boxes (width ∝ estimated tokens). ``compaction`` picks which
    compaction's view to draw (default: the latest; entries after it are drawn plainly)."""
    path = session.path()
    indexes = [i for i, e in enumerate(path) if e.get("type") == "compaction"]
    chosen = indexes[compaction] if indexes else None
    fates = _fates(path, chosen) if chosen is not None else {}
    cut_id = path[chosen].get("firstKeptEntryId") if chosen is not None else None
    boxes, lines = [], []
    number = {e["id"]: n for n, e in enumerate((p for p in path if p.get("type") == "compaction"), 1)}
    lines.append(f"{'':2}{'#':>3}  {'entry':8}  {'what':28} {'tokens':>6}  fate")
    for i, entry in enumerate(path):
        kind, tokens = _kind(entry), _tokens(session, entry)
        fate = fates.get(entry["id"], "")
        label = _label(entry)
        if entry.get("type") == "compaction":
            label = f"compaction #{number[entry['id']]}"
            fate = fate or ("this compaction" if i == chosen else "")
        if entry["id"] == cut_id:
            lines.append(f"{'':2}{'':>3}  ✂ ---- cut point: everything below is kept verbatim ----")
            boxes.append('<div title="cut point" style="display:inline-block;width:3px;height:46px;'
                         'background:#d9534f;margin:0 3px;vertical-align:top"></div>')
        lines.append(f"{'':2}{i:>3}  {entry['id']:8}  {one_line(label, 28):28} {tokens:>6}  "
                     f"{FATE_TEXT.get(fate, fate)}")
        message = entry.get("message") or {}
        snippet = entry.get("summary", "") if kind == "compaction" else _text(message.get("content"))
        width = max(26, min(150, tokens // 3 + 22))
        style = FATE_STYLE.get(fate, "")
        if entry.get("type") == "compaction" and i == chosen:
            style = "outline:3px solid #8e6cc9"
        boxes.append(
            f'<div title="{html.escape(entry["id"])} — {html.escape(one_line(snippet, 300))}" '
            f'style="display:inline-block;vertical-align:top;width:{width}px;height:40px;margin:3px 2px;'
            f'padding:2px 3px;box-sizing:border-box;border-radius:4px;background:{COLORS[kind]};color:white;'
            f'font:10px/1.25 sans-serif;overflow:hidden;{style}">'
            f'<b>{html.escape(label)}</b><br>{tokens:,} tok</div>')
    legend = ("<div style='font:11px sans-serif;margin-top:6px'>"
              + "".join(f"<span style='margin-right:1em'><span style='display:inline-block;width:.8em;height:.8em;"
                        f"background:{c};margin-right:.3em'></span>{k if k != 'toolResult' else 'tool result'}</span>"
                        for k, c in COLORS.items() if k != "other")
              + "<br>dashed purple: summarised by this compaction · dashed orange: turn prefix (split turn) · "
                "green outline: kept verbatim · faded: in an earlier summary · red bar: the cut point</div>")
    title = (f"compaction #{indexes.index(chosen) + 1} of {len(indexes)}" if chosen is not None
             else "no compaction yet")
    head = f"<div style='font:bold 12px sans-serif'>Session path: {len(path)} entries — {title}</div>"
    counts = {f: sum(1 for v in fates.values() if v == f) for f in ("summarised", "prefix", "kept")}
    footer = ""
    if chosen is not None:
        entry = path[chosen]
        footer = (f"summarised {counts['summarised']} entries"
                  + (f" + a turn prefix of {counts['prefix']}" if counts["prefix"] else "")
                  + f", kept {counts['kept']} verbatim; tokens before: {entry.get('tokensBefore', 0):,}; "
                  f"summary: {_tokens(session, entry):,} tokens")
    text = "\n".join([f"Session path: {len(path)} entries — {title}", *lines] + ([footer] if footer else []))
    body = (f"<div style='max-width:100%'>{head}<div style='line-height:0'>{''.join(boxes)}</div>{legend}"
            + (f"<div style='font:12px sans-serif;margin-top:4px'>{html.escape(footer)}</div>" if footer else "")
            + "</div>")
    return Drawing(body, text)


# ---- usage and the prompt cache ----------------------------------------------------------------


def usage_table(session: Session) -> Drawing:
    """Each model reply on the path with its usage; compactions as separator rows."""
    rows: list[tuple[str, ...]] = []
    prompt = "?"
    for entry in session.path():
        kind = _kind(entry)
        if kind == "user":
            count = entry["message"].get("executionCount")
            prompt = f"[{count}]" if count is not None else "?"
        elif kind == "compaction":
            rows.append(("—", f"compaction ({entry.get('tokensBefore', 0):,} tokens before)", "", "", "", ""))
        elif kind == "assistant":
            usage = entry["message"].get("usage") or {}
            prompt_tokens = int(usage.get("input") or 0) + int(usage.get("cacheRead") or 0) \
                + int(usage.get("cacheWrite") or 0)
            read = int(usage.get("cacheRead") or 0)
            share = f"{100 * read / prompt_tokens:.0f} %" if prompt_tokens else "–"
            rows.append((prompt, one_line(_label(entry), 30), f"{prompt_tokens:,}", f"{read:,}", share,
                         f"{int(usage.get('output') or 0):,}"))
    head = ("cell", "reply", "prompt tokens", "cache read", "cached", "output")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    text = "\n".join("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [head, *rows])
    cells = []
    for r in rows:
        if r[0] == "—":
            cells.append(f"<tr style='background:#efe8fa'><td></td><td colspan=5><i>{html.escape(r[1])}</i></td></tr>")
        else:
            cells.append("<tr>" + "".join(f"<td style='text-align:{'left' if i < 2 else 'right'}'>{html.escape(c)}</td>"
                                          for i, c in enumerate(r)) + "</tr>")
    table = ("<table style='font-size:12px'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
             + "".join(cells) + "</table>")
    return Drawing(table, text)


def context_preview(session: Session, limit: int = 400) -> Drawing:
    """The messages the next request would send (the system prompt and tools left out), each cut
    to ``limit`` characters: the summary, wrapped as a user message, comes first."""
    lines, rows = [], []
    for n, message in enumerate(session.build_context(), 1):
        text = _text(message.get("content"))
        if message.get("role") == "toolResult":
            text = f"[{message.get('toolName')} result] {text}"
        short = text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit:,} more characters]"
        lines.append(f"{n:>2}. {message.get('role')}: {short}")
        rows.append(f"<tr><td style='vertical-align:top'>{n}</td><td style='vertical-align:top'><b>"
                    f"{html.escape(str(message.get('role')))}</b></td><td style='text-align:left'>"
                    f"<pre style='white-space:pre-wrap;margin:0'>{html.escape(short)}</pre></td></tr>")
    return Drawing(f"<table style='font-size:12px'>{''.join(rows)}</table>", "\n".join(lines))


# ---- watching compactions ----------------------------------------------------------------------


@dataclass
class CompactionSpy:
    """``spy = CompactionSpy().install()`` — records each compaction's plan; ``spy.report()``."""

    seen: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, call: SessionBeforeCompactCall) -> None:
        plan = call.preparation
        self.seen.append({
            "reason": call.reason,
            "focus": call.custom_instructions,
            "tokens_before": plan.tokens_before,
            "summarised_messages": len(plan.messages_to_summarize),
            "turn_prefix_messages": len(plan.turn_prefix_messages),
            "split_turn": plan.is_split_turn,
            "previous_summary": plan.previous_summary is not None,
            "first_kept": plan.first_kept_entry_id,
        })
        return None  # only watching: the compaction goes ahead unchanged

    def install(self) -> CompactionSpy:
        from ipyagent.hooks import hooks

        for handler in list(hooks.handlers["session_before_compact"]):
            if isinstance(handler, CompactionSpy):
                hooks.off("session_before_compact", handler)
        hooks.on("session_before_compact", self)
        return self

    def report(self) -> Drawing:
        if not self.seen:
            return Drawing("<i>no compaction seen yet</i>", "no compaction seen yet")
        head = list(self.seen[0])
        text = "\n".join(f"#{n}: " + ", ".join(f"{k}={v!r}" for k, v in s.items()) for n, s in enumerate(self.seen, 1))
        rows = "".join("<tr>" + f"<td>#{n}</td>" + "".join(f"<td>{html.escape(repr(s[k]))}</td>" for k in head)
                       + "</tr>" for n, s in enumerate(self.seen, 1))
        table = ("<table style='font-size:12px'><tr><th></th>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
                 + rows + "</table>")
        return Drawing(table, text)
