"""Persistence glue between the kernel's sessions and the notebook (``docs/protocol.md``).

On load, sessions come from (1) what a frontend pushed into this kernel
(the shell's push inbox, ``bridge/push.py``), (2) the notebook file on disk (hydration: metadata plus journal
outputs), (3) ``%agent load PATH``; they are merged by entry id. A session that came back this
way remembers which entries an earlier kernel wrote; before the next prompt a model answers on a
path holding such entries, one ``kernel_reset`` entry is appended there (:func:`add_reset_notice`),
so the model knows the kernel's namespace is new. A replayed cell that reproduces its recording
adds none: no model reads it, and the session stays as it was.

While a ``%%agent`` / ``%compact`` run goes on, each new entry goes through the bridge as it is
made (:meth:`Persister.stream`, batched by ``kernel/entry_stream.py``), so a kernel that dies
mid-run leaves what it made in the frontend's notebook. After every run, the entries the notebook
has not stored yet go through the bridge if a frontend acknowledged it; otherwise the run ends
with ONE journal output that carries them. The kernel never writes the notebook file.

What a loaded session's saved settings do in this kernel (what comes back, within bounds, what is
only named, the recorded model) is :class:`SettingsPolicy`.

The formats and the reading live in ``store/schema.py`` (metadata), ``store/validation.py``
(checking it), ``store/ipynb.py`` (notebook files), ``store/journal.py`` (the journal format; its
views are ``display/journal_view.py``) and ``store/hydration.py`` (finding and reading the notebook
on disk).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipyagent import host
from ipyagent.agent.budget import notebook_learned_window
from ipyagent.agent.loop import AgentLoop
from ipyagent.agent.prompt.pinned import active_pins, pins_note
from ipyagent.agent.run_config import (
    RunConfig,
    SavedSettings,
    held_back_settings,
    recorded_model,
    restorable_settings,
    restored_note,
    upgrade_saved_settings,
)
from ipyagent.bridge.comm import KernelBridge
from ipyagent.bridge.push import PushInbox
from ipyagent.core import Session
from ipyagent.display.journal_view import JournalOutput, journal_bundle
from ipyagent.kernel.configurable import SETTING_NAMES, AgentSettings
from ipyagent.providers.registry import ProviderRegistry
from ipyagent.session.intake import LoadReport, sanitize_entries
from ipyagent.shapes import Entry, SessionHeader
from ipyagent.store.hydration import (
    find_notebook_path,
    hydrate_from_disk,
    kernel_reset_entry,
    reset_notice_due,
)
from ipyagent.store.journal import JOURNAL_MIME
from ipyagent.store.schema import NotebookSessions

__all__ = ["JOURNAL_MIME", "SessionSlot", "LoadResult", "SettingsPolicy", "add_reset_notice", "collect_sessions",
           "merge_into", "journal_output", "Persister"]

@dataclass
class SessionSlot:
    """One named session in this kernel, and what the notebook already holds of it."""

    name: str
    session: Session
    settings: SavedSettings = field(default_factory=lambda: SavedSettings())
    persisted: set[str] = field(default_factory=set)
    persisted_leaf: str | None = None
    origin: str = "new"  # "new", "push", "disk", "load"
    agent: AgentLoop | None = None
    earlier: set[str] = field(default_factory=set)  # ids an earlier kernel wrote (loaded from the notebook)
    # False after a cell ran with --no-tools: the figures outside a run then count no tools either
    tools_offered: bool = True

    def unpersisted(self) -> list[Entry]:
        return [e for e in self.session.entries if e["id"] not in self.persisted]

    def mark_persisted(self, entries: list[Entry]) -> None:
        self.persisted.update(e["id"] for e in entries)
        self.persisted_leaf = self.session.leaf_id


@dataclass
class LoadResult:
    slots: dict[str, SessionSlot] = field(default_factory=dict)
    active: str | None = None
    notes: list[str] = field(default_factory=list)
    report: LoadReport = field(default_factory=LoadReport)
    path: str | None = None
    path_source: str | None = None
    pushed: bool = False  # a frontend handed this kernel its stored sessions (maybe none)


# ---- loading -----------------------------------------------------------------------------------


def _problems(report: Any) -> list[str]:
    return [report.summary()] if report is not None and getattr(report, "problems", None) else []


def collect_sessions(*, user_ns: Mapping[str, Any], inbox: PushInbox,
                     environ: Mapping[str, str] | None = None, explicit_path: str | None = None,
                     hydrate: bool = True, cell_id: str | None = None) -> LoadResult:
    """Sessions pushed by a frontend (taken from ``inbox``) and found on disk, merged by entry id;
    each slot remembers its loaded entries as ``earlier`` (see :func:`add_reset_notice`); a window
    their settings say an overflow revealed applies to that session only (:class:`SettingsPolicy`),
    never taught to the kernel's model table. ``cell_id``: the running cell's, which finds the
    notebook in JupyterLite's ``/drive``."""
    environ = os.environ if environ is None else environ
    result = LoadResult()
    merged = NotebookSessions(None, {})
    origin: dict[str, str] = {}
    pushed = inbox.take()
    if pushed is not None:
        result.pushed = True
        found, report = NotebookSessions.from_metadata(pushed, source="frontend push")
        merged.merge(found)
        origin.update((name, "push") for name in found.sessions)
        result.notes.extend(_problems(report))
    result.notes.extend(inbox.errors(clear=True))
    if hydrate:
        path, source = find_notebook_path(user_ns, environ, explicit_path, cell_id=cell_id)
        result.path, result.path_source = (str(path) if path else None), source
        if path is not None and path.is_file():
            found, report = hydrate_from_disk(path)
            merged.merge(found)
            for name in found.sessions:
                origin.setdefault(name, "disk")
            result.notes.extend(_problems(report))
    result.active = merged.active
    for name, stored in merged.sessions.items():
        session = merged.to_session(name)
        slot = SessionSlot(name, session, upgrade_saved_settings(stored.settings), origin=origin.get(name, "disk"))
        slot.persisted = {e["id"] for e in session.entries}
        slot.persisted_leaf = session.leaf_id
        slot.earlier = set(slot.persisted)
        result.slots[name] = slot
    return result


def pin_notes(slots: Mapping[str, SessionSlot], names: Iterable[str]) -> list[str]:
    """One line per session of ``names`` that holds pins: they are named, never applied unseen."""
    lines = []
    for name in names:
        slot = slots.get(name)
        pins = active_pins(slot.session.entries) if slot is not None else []
        if pins:
            lines.append(f"ipyagent: session {name!r} holds {pins_note(pins, ' from the notebook')}")
    return lines


def add_reset_notice(slot: SessionSlot) -> Entry | None:
    """Append the ``kernel_reset`` notice as a child of the leaf when the path holds entries an
    earlier kernel wrote and no notice follows them (called right before a prompt a model will
    answer); return the entry, or None when none is due."""
    if not reset_notice_due(slot.session.path(), slot.earlier):
        return None
    return slot.session.append(kernel_reset_entry())


def merge_into(slot: SessionSlot, other: Session | list[Entry]) -> int:
    """Add ``other``'s entries that ``slot`` lacks (by id); return how many were added."""
    have = {e["id"] for e in slot.session.entries}
    new = [e for e in (other.entries if isinstance(other, Session) else other) if e["id"] not in have]
    if not new:
        return 0
    report = LoadReport()
    entries = sanitize_entries(slot.session.entries + new, report)
    slot.session = Session(slot.session.header, entries, slot.session.leaf_id, estimator=slot.session.estimator,
                           hooks=slot.session.hooks, set_aside=slot.session.set_aside)
    return len(new)


class SettingsPolicy:
    """What a session's saved settings do in this kernel (a notebook is a shared file): those that
    shape its budget or narrow a run come back for that session, within bounds, unless
    the user set them (``agent/run_config.py``); a window learned in the notebook applies to that
    session only (``agent/budget.py``); the model it was recorded with is named where the user's
    differs, and used by itself only where no provider is configured for it (a replay: nothing is
    spent). ``user``: the ``Agent`` settings (``kernel/configurable.py``); ``providers``: the
    kernel's (its model table, what is configured)."""

    def __init__(self, user: AgentSettings, providers: ProviderRegistry):
        self.user = user
        self.providers = providers
        self._models_named: set[str] = set()  # sessions whose recorded model was named (model_note)

    def _mine(self) -> dict[str, Any]:
        """The user's settings, by name (what a notebook's saved values are compared with)."""
        return {name: getattr(self.user, name) for name in SETTING_NAMES}

    def _table_window(self, model: str) -> int | None:
        """The window the model table (or the user's override) gives ``model``; None: unknown."""
        if ":" not in model:
            return None
        return self.providers.models.known_window(*model.split(":", 1))[0]

    def _restored(self, saved: Mapping[str, Any], model: str) -> tuple[dict[str, int], tuple[int, str] | None]:
        """What of ``saved`` comes back (agent/run_config.py's bounds), and the window learned in
        this notebook for ``model`` (window, where from), unless the user set the window."""
        table = self._table_window(model)
        restored = restorable_settings(saved, mine=self._mine(), user_set=self.user.user_set, table_window=table)
        # an overflow in this kernel said the window itself: that wins, named as such (budget.py)
        known = self.providers.models.learned_window(*model.split(":", 1)) if ":" in model else None
        learned = None if "context_window" in self.user.user_set or known \
            else notebook_learned_window(saved, model, table)
        return restored, learned

    def apply(self, saved: Mapping[str, Any], config: RunConfig, *, model_given: bool) -> None:
        """The session's saved settings that come back for it, within bounds; the window learned in
        this notebook (for this session only); the recorded model where the user's settings name
        none, and only where no provider is configured for it (a replay: nothing is spent)."""
        recorded = recorded_model(saved)
        if not config.model and not model_given and recorded \
                and not self.providers.configured(recorded, config.provider_options):
            config.model = recorded
        restored, learned = self._restored(saved, config.model)
        for name, value in restored.items():
            if name == "reserve_tokens":
                config.compaction = dataclasses.replace(config.compaction, reserve_tokens=value)
            elif name == "keep_recent_tokens":
                config.compaction = dataclasses.replace(config.compaction, keep_recent_tokens=value)
            else:
                setattr(config, name, value)
        if "context_window" in restored:
            config.window_note = "restored from this notebook"
        if learned is not None and (not config.context_window or learned[0] < config.context_window):
            config.context_window, config.window_note = learned

    def load_notes(self, slots: Mapping[str, SessionSlot], names: Iterable[str]) -> list[str]:
        """Lines for the sessions ``names`` of ``slots`` just loaded: what of their saved settings came
        back (and what did not), and the model each was recorded with where the user's differs
        (said once a session)."""
        lines = []
        for name in names:
            slot = slots.get(name)
            if slot is None or not slot.settings:
                continue
            saved = slot.settings
            restored, learned = self._restored(saved, self.user.model or recorded_model(saved))
            shown: dict[str, Any] = dict(restored)
            if learned is not None:
                shown["learned window"] = f"{learned[0]:,} ({learned[1]})"
            line = restored_note(name, shown, held_back_settings(saved, mine=self._mine()))
            lines += [line] if line else []
            lines += [line for line in [self.model_note(slot)] if line]
        return lines

    def model_note(self, slot: SessionSlot) -> str:
        """The model ``slot`` was recorded with, named before its first request where the user's
        settings differ (once: "" after that, or when nothing differs)."""
        recorded = recorded_model(slot.settings)
        mine = self.user.model
        if not recorded or recorded == mine or slot.name in self._models_named:
            return ""
        if not mine and not self.providers.configured(recorded, self.user.run_config().provider_options):
            return ""  # it replays the recording: no provider for it, nothing is spent
        self._models_named.add(slot.name)
        if mine:
            return (f"ipyagent: this notebook was recorded with {recorded}; using {mine} from your settings — "
                    "`%agent use-recorded-model` to switch")
        return (f"ipyagent: this notebook was recorded with {recorded}; your settings name no model, and a "
                "notebook does not choose what you pay for — `%agent use-recorded-model` to use it, or "
                '%config Agent.model = "provider:model"')


# ---- saving ------------------------------------------------------------------------------------


def journal_output(session_name: str, header: SessionHeader, leaf: str | None, settings: SavedSettings,
                   entries: list[Entry]) -> JournalOutput:
    """(data, metadata) of the journal output for ``entries``."""
    return journal_bundle(session_name, header.copy(), leaf, settings.copy(), list(entries))


# how long a run's end waits for the acks of earlier runs' entries from a frontend that answers
# while cells run, before it writes them into a journal too
ACK_WAIT = 3.0


class Persister:
    """Sends what the notebook lacks after each run: the bridge if acknowledged, else a journal."""

    def __init__(self, bridge: KernelBridge | None = None, display_func: Callable[..., Any] | None = None):
        self.bridge = bridge
        self._display = display_func
        self.journals = 0
        self.sent = 0
        self._sent_before: dict[str, set[str]] = {}

    def _show(self, data: Mapping[str, object], metadata: Mapping[str, object]) -> None:
        if self._display is not None:
            self._display(data, raw=True, metadata=metadata)
            return
        from IPython.display import display

        display(data, raw=True, metadata=metadata)

    def stream(self, slot: SessionSlot, entries: list[Entry], settings: SavedSettings, *,
               active: bool = True, redact: Callable[[Any], Any] | None = None) -> int | None:
        """Send ``entries`` (just made by a running run) through the bridge, when a comm is open —
        also before its ``hello_ack``: a frontend stores entries on any comm of its target.
        Nothing is marked persisted: the run's end (:meth:`persist`) still decides between the
        bridge and a journal. ``redact`` as for :meth:`persist` (the bridge keeps what it sent, so
        the entries must leave redacted the first time). Returns the message's seq (None: nothing
        sent)."""
        bridge = self.bridge
        if bridge is None or not entries or not bridge.is_open:
            return None
        if redact is not None:
            entries = [redact(e) for e in entries]
        try:
            seq: int | None = bridge.send_entries(slot.name, entries, leaf=slot.session.leaf_id,
                                                  header=slot.session.header, settings=dict(settings),
                                                  active=active, resend=False, skip_empty=True)
        except Exception:  # noqa: BLE001 - the run's end sends them again (or writes a journal)
            return None
        return seq

    def persist(self, slot: SessionSlot, settings: SavedSettings, *, active: bool = True,
                force: bool = False, redact: Callable[[Any], Any] | None = None,
                journal: Callable[[Mapping[str, object], Mapping[str, object]], bool] | None = None) -> str | None:
        """Persist ``slot``'s new entries; return "bridge", "journal", "kept", "none" (only the leaf
        moved and no bridge holds the notebook: a journal without entries would carry nothing a
        lifter takes) or None (nothing to do).

        Entries sent through the bridge in an earlier run and still not acknowledged (the
        frontend went away, or never stores) go into this run's journal output too. ``redact``
        (an entry -> the entry without the configured keys) is applied to every entry that
        leaves: the agent scrubs what it appends, this catches what else was appended.
        ``journal(data, metadata)`` writes the journal output instead of a new output of the cell
        running now (the idle job: into the run that armed it); when it cannot (False), the
        entries stay unpersisted ("kept"): the next run's journal carries them.
        """
        unpersisted = slot.unpersisted()
        new = [redact(e) for e in unpersisted] if redact is not None else unpersisted
        if not new and slot.session.leaf_id == slot.persisted_leaf and not force:
            return None
        header = slot.session.header
        bridge = self.bridge
        stale: list[Entry] = []
        if bridge is not None and host.can_start_threads():  # in a Run All the handshake may be on its way
            # (in a browser page nothing reaches the kernel while a cell runs: no wait)
            bridge.wait_for_frontend()
        if bridge is not None and bridge.connected:
            earlier = self._sent_before.get(slot.name, set())
            unacked = set(bridge.unacked(slot.name).get(slot.name, ())) & earlier
            if unacked and bridge.answers_during_cells:  # their acks are on the way (a Run All's fast cells)
                bridge.wait_acked(ACK_WAIT)
                unacked = set(bridge.unacked(slot.name).get(slot.name, ())) & earlier
            stale = [redact(e) if redact is not None else e for e in slot.session.entries if e["id"] in unacked]
        if bridge is not None:
            try:
                # what this run streamed already is not sent again, unless earlier entries are
                # still unacknowledged (then everything unacknowledged goes once more)
                bridge.send_entries(slot.name, new, leaf=slot.session.leaf_id, header=header,
                                    settings=dict(settings), active=active, resend=bool(stale))
                self._sent_before.setdefault(slot.name, set()).update(e["id"] for e in new)
            except Exception:  # noqa: BLE001 - the journal below still carries the entries
                bridge = None
        how = "bridge"
        if (bridge is None or not bridge.connected or stale) and not (stale or new):
            how = "none"  # a journal without entries: a lifter takes nothing from it (not even its leaf)
        elif bridge is None or not bridge.connected or stale:
            data, metadata = journal_output(slot.name, header, slot.session.leaf_id, settings, stale + new)
            if journal is not None and not journal(data, metadata):
                return "kept"
            if journal is None:
                self._show(data, metadata)
            self.journals += 1
            how = "journal"
        elif how == "bridge":
            self.sent += 1
        slot.mark_persisted(unpersisted)
        return how
