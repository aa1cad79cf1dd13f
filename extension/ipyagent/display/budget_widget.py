"""The context-budget widget, and the same facts as static HTML / Markdown / text.

A stacked bar of the context window — system prompt and tools, the compaction summary, older
history, the recent tail a compaction would keep — with the compaction threshold
(window − reserve) and the reserve marked; tokens and percent, the model, how many compactions,
the last request's prompt-cache reads and writes, and the latest summary (collapsible).

``BudgetWidget`` is live (ipywidgets) while a run streams or compacts; its display bundle always
carries ``text/html``, ``text/markdown`` and ``text/plain`` views of the same facts next to the
widget view, so a notebook viewer without a kernel (GitHub, nbviewer, VS Code without widgets)
still shows them.

The session name, the model, the status line and the summary come from the session's metadata
or a model: every view takes them through :mod:`ipyagent.display.untrusted` (the summary's
Markdown is rendered to safe HTML; the Markdown view gets it as :func:`safe_markdown` source).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipyagent import host
from ipyagent.agent import budget as agent_budget
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.settings import Budget, fit_budget
from ipyagent.display.summary_view import readable_summary
from ipyagent.display.untrusted import code_span, escape_html, escape_markdown, markdown_html, safe_markdown
from ipyagent.session.entries import last_compaction_note
from ipyagent.session.messages import Message

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = ["BudgetFacts", "BudgetWidget", "budget_facts", "static_html", "static_markdown", "static_plain",
           "static_bundle"]

COLORS = {"system": "#9e9e9e", "summary": "#8e6cc9", "history": "#4a90d9", "tail": "#3fb27f"}
LABELS = {"system": "system + tools", "summary": "summary", "history": "history", "tail": "recent tail (kept)"}


@dataclass
class BudgetFacts:
    session_name: str = "default"
    model: str = ""
    window: int | None = None
    reserve: int = 0
    keep_recent: int = 0
    total: int = 0
    parts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in COLORS})
    compactions: int = 0
    cache_read: int = 0
    cache_write: int = 0
    latest_summary: str | None = None
    entries: int = 0
    auto_compact: bool = True
    status: str = ""
    costs: Any = None  # ipyagent.session.costs.CostTotals, when the session has any usage
    window_source: str = ""  # where the window came from: "window from server (GET /v1/models …)"
    budget: Budget | None = None  # where the reserve and the kept tail came from (scaled to the window…)
    last_compaction: str = ""  # "last compaction: idle, 2026-12-02 12:51:03 UTC"

    @property
    def threshold(self) -> int | None:
        return max(0, self.window - self.reserve) if self.window else None

    @property
    def percent(self) -> float | None:
        return 100.0 * self.total / self.window if self.window else None


def system_tools_tokens(config: RunConfig, tool_specs: Iterable[Any]) -> int:
    return agent_budget.system_tools_tokens(config.system_prompt, tool_specs)


def last_usage(messages: Iterable[Message]) -> dict[str, Any]:
    for message in reversed(list(messages)):
        if message.get("role") == "assistant" and isinstance(message.get("usage"), dict):
            usage: dict[str, Any] = message["usage"]
            return usage
    return {}


def budget_facts(session: Session, config: RunConfig, *, window: int | None, tool_specs: Iterable[Any] = (),
                 session_name: str = "default", status: str = "", window_source: str = "",
                 token_factor: float = 1.0, budget: Budget | None = None) -> BudgetFacts:
    """The facts the widget shows, computed from the session's cached context state (cheap).
    The total is the agent's own count (``ipyagent.agent.budget.request_tokens``), so the widget
    and the compaction trigger agree; ``budget`` is the agent's (``RequestBudget.fitted()``: per-model
    overrides, scaled to the window), by default the settings' own for ``window``."""
    budget = budget or fit_budget(config.compaction, window)
    tool_specs = list(tool_specs)
    state = session.context_state()
    estimates = list(state.estimates)
    messages = list(state.agent_messages)
    system = system_tools_tokens(config, tool_specs)
    summary = 0
    start = 0
    if messages and messages[0].get("role") == "compactionSummary":
        summary, start = estimates[0], 1
    keep = budget.keep_recent_tokens
    tail = 0
    cut = len(estimates)
    while cut > start and tail + estimates[cut - 1] <= keep:
        cut -= 1
        tail += estimates[cut]
    history = sum(estimates[start:cut])
    # With usage (taken only when it is newer than the latest compaction) the provider's count
    # covers everything; without it the system prompt and tools are estimated too.
    total = agent_budget.request_tokens(session, config.system_prompt, tool_specs, token_factor)
    usage = last_usage(messages)
    # The fixed part is counted one way everywhere (RequestBudget.fixed_tokens, the trigger's own count):
    # chars/4 of the system prompt and tools, times the server's token factor. Where the total is a
    # provider's count, the difference from the estimates is the messages', so only they are scaled
    # to it (scaling the fixed part too made it drift from turn to turn with the usage).
    # (never clamped to the total: a server that counts less than the system prompt and tools has
    # dropped some of them, and the figure says what was sent)
    system = math.ceil(system * token_factor)
    estimated = summary + history + tail
    rest = total - system
    if estimated and total > 0 and rest != estimated:  # scale the message parts to the rest of the total
        scale = max(0, rest) / estimated
        summary, history, tail = (round(x * scale) for x in (summary, history, tail))
    compactions = session.compactions()
    return BudgetFacts(
        session_name=session_name, model=config.model, window=window,
        reserve=budget.reserve_tokens, keep_recent=keep, total=total, budget=budget,
        parts={"system": system, "summary": summary, "history": history, "tail": tail},
        compactions=len(compactions), cache_read=int(usage.get("cacheRead") or 0),
        cache_write=int(usage.get("cacheWrite") or 0),
        latest_summary=compactions[-1].get("summary") if compactions else None,
        entries=len(session), auto_compact=config.compaction.enabled, status=status, window_source=window_source,
        costs=session.costs() if hasattr(session, "costs") else None,
        last_compaction=last_compaction_note(compactions),
    )


# ---- static views ------------------------------------------------------------------------------


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _headline(f: BudgetFacts) -> str:
    if f.window:
        return f"{_n(f.total)} / {_n(f.window)} tokens ({f.percent:.1f} %)"
    return f"{_n(f.total)} tokens (context window unknown: automatic compaction off)"


def _dollars(amount: float) -> str:
    # no "$": a pair of them turns the text between into LaTeX in Jupyter's Markdown and HTML views
    return f"{amount:,.2f} USD" if amount >= 10 else f"{amount:.4f} USD"


def cost_text(costs: Any) -> str:
    """The session's cost in words: the total, the summariser's share, what could not be priced."""
    if costs is None or not (costs.priced or costs.unpriced):
        return ""
    if not costs.known:
        return f"cost unknown ({costs.unpriced} unpriced call{'s' if costs.unpriced != 1 else ''})"
    if not costs.total:  # priced at nothing: a local server (or a free provider)
        return "cost: free"
    text = f"cost {_dollars(costs.total)}"
    if costs.summaries:
        text += f" (summaries {_dollars(costs.summaries)})"
    if costs.unpriced:
        text += f" + {costs.unpriced} unpriced call{'s' if costs.unpriced != 1 else ''}"
    return text


def _details_line(f: BudgetFacts, quote: Callable[[str], str] = str) -> str:
    """The details under the bar; ``quote`` shows the model name and where the window came from
    (they come from metadata and configuration)."""
    bits = [f"model {quote(f.model) if f.model else '(none)'}"]
    if f.window_source:
        bits.append(quote(f.window_source))
    bits += [f"{f.compactions} compaction{'s' if f.compactions != 1 else ''}"
             + (f" ({f.last_compaction})" if f.last_compaction else ""),
             f"cache read {_n(f.cache_read)} / write {_n(f.cache_write)}"]
    if cost_text(f.costs):
        bits.append(cost_text(f.costs))
    if f.threshold is not None:
        b = f.budget
        if b is None or b.reserve_from in ("set", "default"):
            said = f"compacts above {_n(f.threshold)} (reserve {_n(f.reserve)})"
        else:
            said = f"compacts above {_n(f.threshold)} · {b.reserve_text()}"
        if b is not None and b.keep_from in ("scaled", "replaced"):
            said += f" · {b.keep_text()}"
        bits.append(said + ("" if f.auto_compact else ", automatic compaction off"))
    return " · ".join(bits)


def bar_html(f: BudgetFacts) -> str:
    scale = f.window or max(1, sum(f.parts.values()))
    segments = []
    for key, tokens in f.parts.items():
        if tokens <= 0:
            continue
        width = min(100.0, 100.0 * tokens / scale)
        segments.append(
            f'<div title="{LABELS[key]}: {tokens:,} tokens" style="width:{width:.2f}%;background:{COLORS[key]};'
            f'height:100%;display:inline-block;vertical-align:top"></div>')
    marks = ""
    if f.window and f.threshold is not None and f.threshold > 0:
        left = 100.0 * f.threshold / f.window
        marks = (f'<div title="reserve: {f.reserve:,} tokens" style="position:absolute;top:0;bottom:0;left:{left:.2f}%;'
                 f'right:0;background:repeating-linear-gradient(45deg,rgba(217,83,79,.18) 0 4px,transparent 4px 8px);'
                 f'border-left:2px dashed #d9534f"></div>')
    return ('<div style="position:relative;height:14px;border:1px solid #bbb;border-radius:3px;overflow:hidden;'
            f'background:#f4f4f4;white-space:nowrap;font-size:0">{"".join(segments)}{marks}</div>')


def legend_html(f: BudgetFacts) -> str:
    items = []
    for key, tokens in f.parts.items():
        items.append(f'<span style="margin-right:1em"><span style="display:inline-block;width:.8em;height:.8em;'
                     f'background:{COLORS[key]};margin-right:.3em"></span>{LABELS[key]} {tokens:,}</span>')
    if f.threshold is not None:
        items.append('<span><span style="display:inline-block;width:.8em;height:.8em;border-left:2px dashed #d9534f;'
                     f'margin-right:.3em"></span>reserve {f.reserve:,}</span>')
    return f'<div style="font-size:85%;margin-top:2px">{"".join(items)}</div>'


def summary_html(f: BudgetFacts) -> str:
    if not f.latest_summary:
        return ""
    return ("<details><summary>Latest summary</summary>"
            f'<div style="font-size:85%">{markdown_html(readable_summary(f.latest_summary))}</div></details>')


def static_html(f: BudgetFacts) -> str:
    status = f'<div style="font-style:italic">{escape_html(f.status)}</div>' if f.status else ""
    return (f'<div class="ipyagent-budget" style="font-family:var(--jp-ui-font-family,sans-serif);max-width:720px">'
            f'<div><b>Context</b> [{escape_html(f.session_name)}] {escape_html(_headline(f))}</div>'
            f'{bar_html(f)}{legend_html(f)}'
            f'<div style="font-size:85%;color:#555">{escape_html(_details_line(f))}</div>'
            f'{status}{summary_html(f)}</div>')


def static_markdown(f: BudgetFacts) -> str:
    lines = [f"**Context** {code_span(f.session_name)} {_headline(f)}", "",
             "| part | tokens |", "|---|---:|"]
    lines += [f"| {LABELS[k]} | {v:,} |" for k, v in f.parts.items()]
    lines += ["", _details_line(f, escape_markdown)]
    if f.status:
        lines += ["", f"*{escape_markdown(f.status)}*"]
    if f.latest_summary:
        lines += ["", "**Latest summary**", "", safe_markdown(readable_summary(f.latest_summary))]
    return "\n".join(lines)


def static_plain(f: BudgetFacts) -> str:
    width = 40
    scale = f.window or max(1, sum(f.parts.values()))
    chars = {"system": "s", "summary": "S", "history": "h", "tail": "t"}
    bar = "".join(chars[k] * round(width * v / scale) for k, v in f.parts.items())[:width]
    bar = bar.ljust(width, ".")
    if f.threshold is not None and f.window:
        mark = min(width - 1, round(width * f.threshold / f.window))
        bar = bar[:mark] + "|" + bar[mark + 1:]
    text = f"Context [{f.session_name}] {_headline(f)}\n[{bar}]\n{_details_line(f)}"
    if f.status:
        text += f"\n{f.status}"
    return text


def static_bundle(f: BudgetFacts) -> dict[str, str]:
    return {"text/plain": static_plain(f), "text/html": static_html(f), "text/markdown": static_markdown(f)}


# ---- the live widget ---------------------------------------------------------------------------


class BudgetWidget:
    """ipywidgets view of :class:`BudgetFacts`, updated in place; ``bundle()`` adds the static views."""

    def __init__(self, facts: BudgetFacts | None = None):
        import ipywidgets as w

        self.facts = facts or BudgetFacts()
        self._head = w.HTML()
        self._status = w.HTML()
        self._summary = w.HTML()
        self._accordion = w.Accordion(children=[self._summary])
        self._accordion.set_title(0, "Latest summary")
        self._accordion.selected_index = None
        self.view = w.VBox([self._head, self._status, self._accordion],
                           layout=w.Layout(max_width="740px"))
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._ticking = threading.Event()
        self._ticking.set()  # no ticker yet
        self.update(self.facts)

    def update(self, facts: BudgetFacts) -> None:
        with self._lock:
            self.facts = facts
            self._head.value = (f'<div><b>Context</b> [{escape_html(facts.session_name)}] '
                                f'{escape_html(_headline(facts))}</div>{bar_html(facts)}{legend_html(facts)}'
                                f'<div style="font-size:85%;color:#555">{escape_html(_details_line(facts))}</div>')
            self._status.value = f"<i>{escape_html(facts.status)}</i>" if facts.status else ""
            text = readable_summary(facts.latest_summary or "")
            self._summary.value = f'<div style="font-size:85%">{markdown_html(text)}</div>' if text else ""
            self._accordion.layout.display = "" if text else "none"

    def set_status(self, status: str) -> None:
        with self._lock:
            self.facts.status = status
            self._status.value = f"<i>{escape_html(status)}</i>" if status else ""

    def start_ticker(self, label: str | Callable[[], str], interval: float = 0.25) -> None:
        """Show ``label`` with the seconds elapsed, updated from a thread until :meth:`stop_ticker`;
        a callable ``label`` gives the whole line each time (it counts its own seconds). Where no
        thread can start (a browser page's kernel), the label alone."""
        self.stop_ticker()
        self._ticking = stop = threading.Event()  # set: no ticker (stop_ticker says whether one ran)
        if not host.can_start_threads():
            self.set_status(label() if callable(label) else label)
            return
        started = time.monotonic()

        def line() -> str:
            return label() if callable(label) else f"{label} {time.monotonic() - started:.1f} s"

        def tick() -> None:
            while not stop.wait(interval):
                self.set_status(line())

        self.set_status(line())
        self._ticker = threading.Thread(target=tick, name="ipyagent-widget-ticker", daemon=True)
        self._ticker.start()

    def stop_ticker(self) -> bool:
        """Stop the ticker; whether one was running."""
        running = not self._ticking.is_set()
        self._ticking.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1)
            self._ticker = None
        return running

    def bundle(self) -> dict[str, Any]:
        data = dict(static_bundle(self.facts))
        data.update(self.view._repr_mimebundle_() or {})
        data["text/plain"] = static_plain(self.facts)
        return data

    def close(self) -> None:
        """Stop the ticker and close the widget models (their views in the frontend go too)."""
        self.stop_ticker()
        for part in (self.view, self._accordion, self._head, self._status, self._summary):
            for model in (getattr(part, "layout", None), getattr(part, "style", None), part):
                if model is not None:
                    model.close()
