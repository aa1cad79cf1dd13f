"""The compaction explorer: ``%agent explore`` in a notebook, ``ipyagent.explore(path_or_session)``
for any saved notebook or Pi session file, offline.

An ipywidgets panel: sliders for the window, the reserve and keep-recent, an estimator choice and
an optional focus; a timeline of the session's path as boxes sized by tokens (what would be
summarised, what kept, the turn prefix of a split turn, what is already inside earlier
summaries), the cut point, tokens before → after, and the exact text the summariser would
receive (collapsible; computed only while it is open). Each change re-plans with
``prepare_compaction`` — the code compaction runs — through :class:`ExplorerModel`.

"Compact now with these settings" is offered only where a provider is configured, asks first,
and then compacts the way ``%compact`` does (``AgentLoop.compact``) with the plan on screen.

Its output carries static ``text/html`` and ``text/plain`` views next to the widget, for viewers
without a kernel; "Keep this view in the notebook" replaces them with the view on screen.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ipyagent.agent.loop import AgentLoop
from ipyagent.agent.run_config import RunConfig, SavedSettings
from ipyagent.compaction.prepare import CompactionPlan
from ipyagent.compaction.settings import ASSUMED_WINDOW, CompactionSettings, fit_budget
from ipyagent.display.untrusted import escape_html
from ipyagent.explorer.html import (
    legend_html,
    numbers_html,
    requests_html,
    requests_title,
    static_bundle,
    static_plain,
    timeline_html,
    title_html,
)
from ipyagent.explorer.plan import ESTIMATOR_LABELS, Exploration, ExplorerModel, ExploreSettings
from ipyagent.shapes import Entry

if TYPE_CHECKING:
    from ipyagent.agent.budget import RequestBudget
    from ipyagent.agent.redaction import Redactor
    from ipyagent.core import Session

__all__ = ["CompactionExplorer", "explore", "explorer_for_slot"]

# Building the summariser's input slower than this (a huge history): an open input section is
# no longer rebuilt on every slider move, it offers a button instead.
SLOW_INPUT_MS = 150.0

# (settings on screen, their plan) -> a one-line report of the compaction; raises on failure
Compactor = Callable[[ExploreSettings, CompactionPlan], str]


def nice_step(span: float, steps: int = 200) -> int:
    """About ``span / steps``, rounded to 1, 2 or 5 × a power of ten (at least 1)."""
    raw = max(1.0, span / steps)
    power = 10 ** math.floor(math.log10(raw))
    return int(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def _ceil_to(value: float, step: int) -> int:
    return int(math.ceil(value / step) * step)


def grid(low: int, high: int, value: int, step: int) -> tuple[int, int]:
    """A slider's (min, max) for ``step`` whose steps pass through ``value``: the page snaps a
    slider's value to min + k × step and sends the snapped value back, so a grid through 0 moved
    a session's 4,096-token window to 4,100 and planned for that. min is the first point of the
    grid at or above ``low`` (never above ``value``), max the first at or above ``high``."""
    start = min(low + (value - low) % step, value)
    return start, start + _ceil_to(max(high, value) - start, step)


def _scrubbed_html(redact: Callable[[str], str]) -> Any:
    """An HTML widget class whose every value is scrubbed before it is kept and sent to the page
    (a widget's state is not an output: it reaches the notebook when the page saves widget state)."""
    import ipywidgets as w
    from traitlets import validate

    class ScrubbedHTML(w.HTML):  # type: ignore[misc]  # (ipywidgets is untyped)
        @validate("value")
        def _scrub(self, proposal: Any) -> str:
            return redact(proposal["value"])

    return ScrubbedHTML


class CompactionExplorer:
    """The panel. ``model`` holds the session and the settings; ``compactor`` (None: no button)
    runs a compaction with the settings and plan on screen; ``redact`` scrubs every text it shows
    (the session's entries are kept as they came: keys are scrubbed where they leave the kernel)."""

    def __init__(self, model: ExplorerModel, *, compactor: Compactor | None = None, compact_model: str = "",
                 redact: Callable[[str], str] | None = None):
        import ipywidgets as w

        self.redact = redact or (lambda text: text)
        html = self._html = _scrubbed_html(self.redact)  # the one HTML widget class of the panel
        self.model = model
        self.compactor = compactor
        self.compact_model = compact_model
        self._handle: Any = None
        self._updating = False
        self._confirmed_cut: str | None = None
        self._drawn_key: Any = None
        x = model.update()
        self._add_controls(x)
        self.title = html()
        self.numbers = html()
        self.timeline = html()
        self.legend = html(legend_html())
        self._add_input_view()
        self.status = html()
        buttons = self._add_buttons(compactor is not None)
        self.view = w.VBox([self.title, self.window, self.reserve, self.keep, w.HBox([self.estimator, self.focus]),
                            self.numbers, self.timeline, self.legend, self.accordion, w.HBox(buttons), self.confirm,
                            self.status], layout=w.Layout(max_width="800px"))
        self.view.add_class("ipyagent-explore-widget")
        for control in (self.window, self.reserve, self.keep, self.estimator, self.focus):
            control.observe(self._changed, names="value")
        self.accordion.observe(lambda _: self._render_input(), names="selected_index")
        self._render(x)

    def _add_controls(self, x: Exploration) -> None:
        """The sliders (window, reserve, keep-recent), the estimator and the focus, set as ``x``."""
        import ipywidgets as w

        s = self.model.settings
        style = {"description_width": "110px"}
        layout = w.Layout(width="560px")
        self.window = w.IntSlider(description="window", style=style, layout=layout)
        self.reserve = w.IntSlider(description="reserve", style=style, layout=layout)
        self.keep = w.IntSlider(description="keep-recent", style=style, layout=layout)
        self.window.add_class("ipyagent-explore-window")
        self.reserve.add_class("ipyagent-explore-reserve")
        self.keep.add_class("ipyagent-explore-keep")
        self._set_ranges(x)
        self.window.value, self.reserve.value, self.keep.value = s.window, s.reserve_tokens, s.keep_recent_tokens
        self.estimator = w.Dropdown(description="estimator", style=style, layout=w.Layout(width="320px"),
                                    options=[(ESTIMATOR_LABELS.get(k, k), k) for k in self.model.estimator_choices()],
                                    value=s.estimator)
        self.focus = w.Text(description="focus", style={"description_width": "50px"}, layout=w.Layout(width="460px"),
                            value=s.focus, continuous_update=False,
                            placeholder="optional: what the summary should keep (as in %compact FOCUS)")

    def _add_input_view(self) -> None:
        """The accordion that shows the summariser's input (drawn when opened)."""
        import ipywidgets as w

        self.input = self._html()
        self.input_note = self._html()
        self.input_button = w.Button(description="Show it for these settings", layout=w.Layout(width="auto"))
        self.input_button.on_click(lambda _: self._render_input(force=True))
        self.input_button.layout.display = "none"
        self._input_ms = 0.0
        self.accordion = w.Accordion(children=[w.VBox([self.input_note, self.input_button, self.input])])
        self.accordion.selected_index = None

    def _add_buttons(self, compacts: bool) -> list[Any]:
        """Refresh, keep the view, and (``compacts``) compact now with its confirmation."""
        import ipywidgets as w

        self.keep_view = w.Button(description="Keep this view in the notebook", layout=w.Layout(width="auto"),
                                  tooltip="Save the view on screen as the output's static HTML (for viewers "
                                          "without a kernel)")
        self.keep_view.on_click(lambda _: self.keep_static_view())
        self.refresh_button = w.Button(description="Refresh", tooltip="Read the session again (after new runs)",
                                       layout=w.Layout(width="auto"))
        self.refresh_button.on_click(lambda _: self.refresh())
        buttons: list[Any] = [self.refresh_button, self.keep_view]
        self.compact_button = self.confirm_yes = self.confirm_no = None
        self.confirm_text = self._html()
        self.confirm = w.HBox([])
        if compacts:
            self.compact_button = w.Button(description="Compact now with these settings…", button_style="warning",
                                           layout=w.Layout(width="auto"))
            self.confirm_yes = w.Button(description="Yes, compact", button_style="danger")
            self.confirm_no = w.Button(description="Cancel")
            self.compact_button.on_click(lambda _: self.ask_to_compact())
            self.confirm_yes.on_click(lambda _: self.compact_now())
            self.confirm_no.on_click(lambda _: self._hide_confirm("Cancelled: the session is unchanged."))
            self.confirm.children = [self.confirm_text, self.confirm_yes, self.confirm_no]
            buttons.insert(0, self.compact_button)
        self.confirm.layout.display = "none"
        return buttons

    # ---- ranges --------------------------------------------------------------------------------

    def _set_ranges(self, x: Exploration) -> None:
        s = x.settings
        tokens = self.model.path_tokens()
        self._drawn_key = tokens.key
        window_max = max(2 * s.window, 2 * x.tokens_before, 8192)
        window_step = nice_step(window_max)
        recent = tokens.span(tokens.start, len(tokens.path))
        keep_max = max(2 * s.keep_recent_tokens, int(1.1 * recent), 1000)
        keep_step = nice_step(keep_max)
        self._updating = True
        try:
            for slider, low, high, step, value in ((self.window, window_step, window_max, window_step, s.window),
                                                   (self.reserve, 0, window_max, window_step, s.reserve_tokens),
                                                   (self.keep, 0, keep_max, keep_step, s.keep_recent_tokens)):
                start, end = grid(low, high, value, step)  # the session's values are on the sliders' steps
                slider.max = max(slider.max, end)  # widen first, so the old value stays inside while min moves
                slider.min, slider.step = start, step
                slider.max = end
        finally:
            self._updating = False

    def _off_grid(self) -> bool:
        """Whether a slider's value is off its steps (set from Python): the page would move it."""
        return any((slider.value - slider.min) % slider.step for slider in (self.window, self.reserve, self.keep))

    # ---- updates ---------------------------------------------------------------------------------

    def _changed(self, change: Any = None) -> None:
        if self._updating:
            return
        self.update()

    def update(self) -> Exploration:
        """Re-plan with the values on screen and redraw (one slider move)."""
        counting = not self.model.has_counted(self.estimator.value)
        if counting:  # every entry is counted once with a new estimator: seconds on a long session
            self.status.value = f"<i>Counting every entry with {escape_html(self.estimator.value)} (once)…</i>"
        x = self.model.update(window=self.window.value, reserve_tokens=self.reserve.value,
                              keep_recent_tokens=self.keep.value, estimator=self.estimator.value,
                              focus=self.focus.value.strip())
        if counting:
            self.status.value = ""
        if self._drawn_key != self.model.path_tokens().key or self._off_grid():  # the session grew, or a
            self._set_ranges(x)  # value set from Python: the sliders' ranges too
        self._render(x)
        return x

    def set(self, **values: Any) -> Exploration:
        """Set controls from Python (``window``, ``reserve``, ``keep_recent``, ``estimator``,
        ``focus``) and redraw once."""
        controls = {"window": self.window, "reserve": self.reserve, "keep_recent": self.keep,
                    "estimator": self.estimator, "focus": self.focus}
        unknown = set(values) - set(controls)
        if unknown:
            raise TypeError(f"unknown setting(s) {', '.join(sorted(unknown))}; choose from {', '.join(controls)}")
        self._updating = True
        try:
            for name, value in values.items():
                control = controls[name]
                if name in ("window", "reserve", "keep_recent"):  # widened to the value (not clamped)
                    control.max, control.min = max(control.max, value), min(control.min, value)
                control.value = value
        finally:
            self._updating = False
        return self.update()

    def _render(self, x: Exploration) -> None:
        self.title.value = title_html(x)
        self.numbers.value = numbers_html(x)
        self.timeline.value = timeline_html(x)
        self.accordion.set_title(0, requests_title(None))
        if self.accordion.selected_index == 0:
            self._render_input()

    def _render_input(self, force: bool = False) -> None:
        if self.accordion.selected_index != 0:
            return
        if not force and self._input_ms > SLOW_INPUT_MS and not self.model.requests_ready():
            self.input_note.value = ("<i>The input shown is for earlier settings: building it takes "
                                     f"{self._input_ms / 1000:.1f} s on this session.</i>")
            self.input_button.layout.display = ""
            return
        ready = self.model.requests_ready()
        started = time.perf_counter()
        requests = self.model.requests()
        if not ready:
            self._input_ms = (time.perf_counter() - started) * 1000
        self.input_note.value = ""
        self.input_button.layout.display = "none"
        self.accordion.set_title(0, requests_title(requests))
        self.input.value = requests_html(requests)

    def refresh(self) -> Exploration:
        """Redraw after the session changed (a new run, a compaction)."""
        x = self.model.update()
        self._set_ranges(x)
        self._render(x)
        return x

    @property
    def exploration(self) -> Exploration:
        return self.model.current or self.model.update()

    def summarizer_requests(self) -> list[Any]:
        """The summariser requests for the settings on screen, whole (``SummaryRequest`` objects)."""
        return [request for request, _ in self.model.requests()]

    # ---- compact now -------------------------------------------------------------------------

    def ask_to_compact(self) -> None:
        x = self.update()
        if x.plan is None:
            self._hide_confirm(f"Nothing to compact with these settings. {x.reason}")
            return
        self._confirmed_cut = x.plan.first_kept_entry_id
        prefix = f" and a turn prefix of {x.counts['prefix']:,}" if x.counts.get("prefix") else ""
        self.confirm_text.value = (
            f"<b>Compact session {escape_html(x.session_name)} now?</b> It summarises {x.counts['summarised']:,} "
            f"entries{prefix} (≈{x.tokens['summarised'] + x.tokens.get('prefix', 0):,} tokens), keeps "
            f"{x.counts['kept']:,} (≈{x.tokens['kept']:,}), calls {escape_html(self.compact_model or 'the model')} "
            "and adds a compaction entry to the session.&nbsp;")
        self.confirm.layout.display = ""
        self.status.value = ""

    def _hide_confirm(self, message: str = "") -> None:
        self.confirm.layout.display = "none"
        self._confirmed_cut = None
        self.status.value = f"<i>{escape_html(message)}</i>" if message else ""

    def compact_now(self) -> None:
        """Compact with the settings on screen (after :meth:`ask_to_compact`)."""
        if self.compactor is None:
            return
        x = self.update()
        if x.plan is None or x.plan.first_kept_entry_id != self._confirmed_cut:
            self.ask_to_compact()
            self.status.value = "<i>The plan changed since you asked: check it and confirm again.</i>"
            return
        self.confirm.layout.display = "none"
        self._confirmed_cut = None
        buttons = [b for b in (self.compact_button, self.confirm_yes) if b is not None]
        for button in buttons:
            button.disabled = True
        self.status.value = "<i>Compacting… (calling the summary model)</i>"
        try:
            report = self.compactor(x.settings, x.plan)
        except Exception as exc:  # noqa: BLE001 - shown, never lost: the session is unchanged on every failure
            message = (f'<div style="color:#b52a1d"><b>Compaction failed:</b> '
                       f"{escape_html(f'{type(exc).__name__}: {exc}')}</div>")
        else:
            message = f"<b>{escape_html(report)}</b>"
        finally:
            for button in buttons:
                button.disabled = False
        self.refresh()  # the view of the session as it is now, then the report under it
        self.status.value = message

    # ---- display -----------------------------------------------------------------------------

    def static_bundle(self) -> dict[str, str]:
        x = self.exploration
        return static_bundle(x, self.model.requests(x))

    def bundle(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.static_bundle())
        data.update(self.view._repr_mimebundle_() or {})
        data["text/plain"] = static_plain(self.exploration)
        return {mime: self.redact(value) if isinstance(value, str) else value for mime, value in data.items()}

    def _ipython_display_(self) -> None:
        from IPython.display import display

        self._handle = display(self.bundle(), raw=True, display_id=True)

    def keep_static_view(self) -> None:
        """Make the view on screen the output's static views (saved with the notebook)."""
        if self._handle is None:
            return
        self._handle.update(self.bundle(), raw=True)
        self.status.value = "<i>The static view saved with the notebook now shows these settings.</i>"


# ---- building one ------------------------------------------------------------------------------


def _settings_from(saved: SavedSettings, model_window: int | None, *, window: int | None, reserve: int | None,
                   keep: int | None, estimator: str | None, focus: str, session: Session,
                   notes: list[str] | None = None) -> tuple[ExploreSettings, bool]:
    """The controls' starting values. Stored settings come from the notebook: a value that is not
    a whole number of tokens (``"abc"``, ``[1]``, ``"1e9"``) is left out, with a note."""
    notes = [] if notes is None else notes
    stored = saved.get("compaction")
    compaction = stored if isinstance(stored, dict) else {}
    known = window or _stored_tokens(saved, "context_window", notes) or model_window
    size = int(known or ASSUMED_WINDOW)
    stored_reserve = _stored_tokens(compaction, "reserve_tokens", notes, low=0)
    stored_keep = _stored_tokens(compaction, "keep_recent_tokens", notes, low=0)
    # what the session set, else what the agent derives from the window (compaction/settings.py)
    derived = fit_budget(CompactionSettings(stored_reserve, stored_keep), size)
    settings = ExploreSettings(
        window=size,
        reserve_tokens=int(reserve if reserve is not None else derived.reserve_tokens),
        keep_recent_tokens=int(keep if keep is not None else derived.keep_recent_tokens),
        estimator=estimator or session.estimator.name,
        focus=focus,
    )
    return settings, bool(known)


MAX_STORED_TOKENS = 100_000_000


def _stored_tokens(stored: Mapping[str, Any], key: str, notes: list[str], *, low: int = 1) -> int | None:
    value = stored.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_STORED_TOKENS:
        return value
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
    notes.append(f"The stored {key} {shown} is not a number of tokens ({low:,}–{MAX_STORED_TOKENS:,}): "
                 "left out, the default used.")
    return None


def _model_window(model: str) -> int | None:
    if not model:
        return None
    from ipyagent.providers.registry import default_registry

    try:
        info = default_registry().info(model)
    except ValueError:
        return None
    return info.context_window if info and info.context_window else None


def explore(path_or_session: Any, *, session: str | None = None, window: int | None = None,
            reserve: int | None = None, keep_recent: int | None = None, estimator: str | None = None,
            focus: str = "") -> CompactionExplorer:
    """The compaction explorer for a saved notebook (``.ipynb``), a Pi session file (``.jsonl``)
    or a ``Session``, offline: nothing is called and nothing is written.

    ``session`` picks one session of a notebook; the other arguments set the controls' starting
    values (default: the settings saved with the session, else ipyagent's defaults).
    """
    from ipyagent.core import Session

    saved: SavedSettings = {}
    source = ""
    name = session or "default"
    if isinstance(path_or_session, Session):
        target = path_or_session
        name = session or "session"
    elif isinstance(path_or_session, (str, os.PathLike)):
        path = Path(path_or_session)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        source = str(path)
        if path.suffix == ".ipynb":
            from ipyagent.store.hydration import load_path

            found, _ = load_path(path)
            if not found.sessions:
                raise ValueError(f"{path} holds no ipyagent session")
            name = session or found.active or next(iter(found.sessions))
            if name not in found.sessions:
                raise ValueError(f"{path} has no session {name!r}; it has {', '.join(found.sessions)}")
            saved = (found.sessions[name].settings or SavedSettings()).copy()
            target = found.to_session(name)
        else:
            target = Session.from_file(path)
            name = session or path.stem
    else:
        raise TypeError(f"explore() takes a notebook or Pi session file path, or a Session, "
                        f"not {type(path_or_session).__name__}")
    model_name = str(saved["model"]) if isinstance(saved.get("model"), str) else ""
    summary_model = str(saved["summary_model"]) if isinstance(saved.get("summary_model"), str) else None
    notes: list[str] = []
    settings, known = _settings_from(saved, _model_window(model_name), window=window, reserve=reserve,
                                     keep=keep_recent, estimator=estimator, focus=focus, session=target, notes=notes)
    model = ExplorerModel(target, settings, name=name, source=source, model=model_name,
                          summary_model=summary_model or None, window_known=known)
    model.notes.extend(notes)
    return CompactionExplorer(model)


class _Slot(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def session(self) -> Session: ...


class _Bridge(Protocol):
    @property
    def connected(self) -> bool: ...


class _IdleCompaction(Protocol):
    def join(self, *, show: bool = True) -> Entry | None: ...


SlotT = TypeVar("SlotT", bound=_Slot)


class ExplorerRuntime(Protocol[SlotT]):
    """What the explorer of a kernel's session uses of the kernel's runtime (``kernel/runtime.py``,
    a later layer): its sessions, the agent set up for one, and the bridge that saves it."""

    @property
    def bridge(self) -> _Bridge | None: ...
    @property
    def idle(self) -> _IdleCompaction: ...
    def slot(self, name: str | None = None) -> SlotT: ...
    def run_config(self) -> RunConfig: ...
    def agent_for(self, slot: SlotT, config: RunConfig) -> AgentLoop: ...
    def budget_for(self, slot: SlotT) -> RequestBudget: ...
    def absorb_push(self) -> None: ...
    def persist(self, slot: SlotT, config: RunConfig) -> str | None: ...
    def redactor(self) -> Redactor: ...


def explorer_for_slot(runtime: ExplorerRuntime[SlotT], name: str | None = None, *, window: int | None = None,
                      reserve: int | None = None, keep_recent: int | None = None, estimator: str | None = None,
                      focus: str = "") -> CompactionExplorer:
    """The explorer of one of this kernel's sessions (``%agent explore``), with its settings;
    "compact now" where a provider is configured for the summary model."""
    slot = runtime.slot(name)
    slot_name = slot.name
    config = runtime.run_config()
    request_budget = runtime.budget_for(slot)
    try:
        model_window = request_budget.window()
    except ValueError:
        model_window = None
    budget = request_budget.fitted()  # per-model overrides, scaled to the window
    saved: SavedSettings = {"context_window": model_window,
                            "compaction": {"reserve_tokens": budget.reserve_tokens,
                                           "keep_recent_tokens": budget.keep_recent_tokens}}
    settings, known = _settings_from(saved, None, window=window, reserve=reserve, keep=keep_recent,
                                     estimator=estimator, focus=focus, session=slot.session)
    model = ExplorerModel(lambda: runtime.slot(slot_name).session, settings, name=slot_name, model=config.model,
                          summary_model=config.summary_model, window_known=known, providers=request_budget.providers)
    summary_model = config.summary_model or config.model
    live = bool(summary_model) and request_budget.providers.configured(summary_model, config.provider_options)
    compactor = _runtime_compactor(runtime, slot_name) if live else None
    return CompactionExplorer(model, compactor=compactor, compact_model=summary_model, redact=runtime.redactor().text)


def _runtime_compactor(runtime: ExplorerRuntime[SlotT], slot_name: str) -> Compactor:
    """Compacts like ``%compact`` (``AgentLoop.compact``), with the explorer's settings and plan."""

    def compact(settings: ExploreSettings, plan: CompactionPlan) -> str:
        from dataclasses import replace

        if runtime.idle.join(show=False) is not None:  # the plan was made before it: look again
            return "The kernel compacted this session in its idle time meanwhile; move a slider to plan again."
        runtime.absorb_push()
        slot = runtime.slot(slot_name)
        config = runtime.run_config()
        config.compaction = replace(config.compaction, reserve_tokens=settings.reserve_tokens,
                                    keep_recent_tokens=settings.keep_recent_tokens)
        config.context_window = settings.window
        agent = runtime.agent_for(slot, config)
        before = agent.budget.request_tokens()  # the budget's count, as %compact and the widget show it
        entry = agent.compact(settings.focus or None, plan=plan) or {}  # (a manual compaction raises rather than None)
        after = agent.budget.request_tokens()
        report = (f"Compacted: {before:,} → {after:,} tokens (first kept entry {entry.get('firstKeptEntryId')}).")
        bridge = runtime.bridge
        if bridge is not None and bridge.connected:
            runtime.persist(slot, config)
            return report
        # Without a bridge the entry goes into the journal output of the next %%agent or %compact
        # run: an output made from a button's callback belongs to no cell and would not be saved.
        return report + " It is saved with the next %%agent or %compact run's output (no bridge here)."

    return compact
