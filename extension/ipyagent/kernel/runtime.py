"""The kernel-side state of ipyagent: one :class:`AgentRuntime` per shell.

It holds the named sessions (each a :class:`~ipyagent.kernel.persistence.SessionSlot` with its
agent), the ``Agent`` settings, the bridge to the frontend, the persister, replay and the notebook
activity recorder; it sets an agent up for a run (``agent_for``) and declares what the run takes
from the kernel (``ports_for``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from ipyagent.agent.budget import (
    LEARNED_WINDOW,
    TOKEN_FACTOR,
    RequestBudget,
    configured_provider,
    learned_window_setting,
    token_factor_setting,
    with_saved_token_factor,
)
from ipyagent.agent.loop import AgentLoop
from ipyagent.agent.ports import RunPorts
from ipyagent.agent.prompt.record import SystemPromptRecord
from ipyagent.agent.redaction import Redactor
from ipyagent.agent.run_config import RunConfig, SavedSettings
from ipyagent.agent.skills.discovery import find_skills
from ipyagent.agent.skills.skill_tool import SkillTool
from ipyagent.agent.tools import ApprovalCallback, Tool
from ipyagent.bridge.comm import KernelBridge
from ipyagent.bridge.push import inbox_of
from ipyagent.core import Session
from ipyagent.kernel.cell_context import KernelNotebookContext, cell_identity, notebook_path
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.kernel.idle import IdleCompactor
from ipyagent.kernel.mcp_servers import KernelMcp
from ipyagent.kernel.persistence import (
    LoadResult,
    Persister,
    SessionSlot,
    SettingsPolicy,
    collect_sessions,
    merge_into,
    pin_notes,
)
from ipyagent.kernel.ports.activity_recorder import ActivityRecorder
from ipyagent.kernel.ports.cell_runner import IPythonCellRunner
from ipyagent.kernel.ports.namespace import namespace_describer
from ipyagent.kernel.ports.notebook_access import KernelNotebook
from ipyagent.kernel.replay_control import ReplayController
from ipyagent.plugins import Plugins
from ipyagent.shapes import Entry
from ipyagent.store.hydration import FoundNotebook

__all__ = ["AgentRuntime"]


class AgentRuntime:
    def __init__(self, shell: Any, plugins: Plugins | None = None):
        self.shell = shell
        self.config = AgentSettings(parent=shell)
        # loaded once per kernel (load_plugins); its registries are the kernel's tools and providers
        # (with what is known of their models), passed to every run
        self.plugins = plugins or Plugins()
        self.providers = self.plugins.providers
        self.slots: dict[str, SessionSlot] = {}
        self.active = "default"
        self.inbox = inbox_of(shell)  # where the frontends' pushes wait (the shell's: they may come first)
        self.bridge: KernelBridge | None = None
        self.persister = Persister(None)
        self.load_result: LoadResult | None = None
        self.notes: list[str] = []
        self.running = False
        self.replay = ReplayController(self.providers)
        self.activity = ActivityRecorder(shell)  # notebook activity, for the next prompts
        self.mcp = KernelMcp(self.config, self.project_mcp_servers)  # servers start at the first prompt
        self.instruction_reads: dict[str, bool] = {}  # real path -> the user's answer (kernel/cell_context.py)
        self.settings_policy = SettingsPolicy(self.config, self.providers)  # what a session's saved settings do here
        # the notebook found by a cell's text (kernel/cell_context.py discover_notebook; False: none)
        self.discovered: FoundNotebook | Literal[False] | None = None
        self._cell_runner: IPythonCellRunner | None = None
        self._notebook_port: KernelNotebook | None = None
        self.idle = IdleCompactor(self)  # compaction in the kernel's idle time (kernel/idle.py)
        self.config.observe(lambda change: self.idle.cancel("the model changed"), names=["model", "summary_model"])

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self, *, open_bridge: bool | None = None, hydrate: bool = True) -> None:
        self.running = True
        self.activity.start()
        self.idle.listen(getattr(self.shell, "events", None))
        if open_bridge is None:
            open_bridge = getattr(self.shell, "kernel", None) is not None
        if open_bridge:
            try:
                self.bridge = KernelBridge(inbox=self.inbox).open()
            except Exception as exc:  # noqa: BLE001 - no comm machinery: the journal carries everything
                self.bridge = None
                self.notes.append(f"No frontend bridge ({exc}); each run saves its entries in its last output.")
        self.persister.bridge = self.bridge
        if hydrate:
            self.hydrate()

    def hydrate(self, path: str | None = None) -> LoadResult:
        """Load the sessions a frontend pushed and those of the notebook on disk (``path``, else
        the one hydration finds: ``store/hydration.py``)."""
        result = collect_sessions(user_ns=self.shell.user_ns, inbox=self.inbox,
                                  environ=os.environ, explicit_path=path or self.config.notebook_path,
                                  hydrate=self.config.hydrate, cell_id=cell_identity(self.shell)[0])
        self.load_result = result
        for name, slot in result.slots.items():
            if name in self.slots:
                merge_into(self.slots[name], slot.session)
            else:
                self.slots[name] = slot
        for name in result.slots:  # what was loaded is what replay answers from
            self.replay.capture(name, self.slots[name].session)
        if result.active and result.active in self.slots:
            self.active = result.active
        elif result.slots and self.active not in self.slots:
            self.active = next(iter(result.slots))
        # the model a session was recorded with is never adopted: named where the user's differs
        # (SettingsPolicy.load_notes), used by itself only where nothing is spent (run_config)
        self.notes.extend(result.notes)
        return result

    def absorb_push(self) -> None:
        """Take sessions a frontend pushed after the extension was loaded (loaded from
        ``ipython_config.py`` before the push, or a page reload into a running kernel)."""
        if self.inbox.peek() is None:
            return
        result = collect_sessions(user_ns=self.shell.user_ns, inbox=self.inbox,
                                  hydrate=False)
        for name, slot in result.slots.items():
            if name in self.slots:  # known here: only what the kernel lacks, no reset notice
                stored = [e for e in slot.session.entries if e["id"] in slot.persisted]
                mine = self.slots[name]
                before = len(mine.session)
                merge_into(mine, stored)
                mine.persisted.update(e["id"] for e in mine.session.entries[before:])
            else:
                self.slots[name] = slot
                self.replay.capture(name, slot.session)
                if len(self.slots) == 1 or result.active == name:
                    self.active = name
                # shown in the cell that took the push
                for line in pin_notes(self.slots, [name]) + self.settings_policy.load_notes(self.slots, [name]):
                    print(line)
        self.notes.extend(result.notes)

    def stop(self) -> None:
        self.running = False
        self.activity.stop()
        self.idle.cancel("the extension was unloaded")
        self.idle.stop_listening(getattr(self.shell, "events", None))
        if self.bridge is not None:
            try:
                self.bridge.close()
            except Exception:  # noqa: BLE001 - closing a comm the frontend already dropped
                pass
            self.bridge = None
            self.persister.bridge = None
        for slot in self.slots.values():
            if slot.agent is not None:
                slot.agent.cancel.set()
        self.mcp.close()  # every MCP server stopped: no process left behind

    def load_plugins(self, reserved_commands: Iterable[str]) -> None:
        """Load the plugins (once per kernel: a reloaded extension finds them loaded); a failing one
        is a note. ``Agent.disabled_plugins`` changed later turns plugins off or on at once."""
        self.notes.extend(self.plugins.load(disabled=self.config.disabled_plugins,
                                            reserved_commands=reserved_commands,
                                            timeout=self.config.plugin_load_timeout or None))
        self.plugins.reserved_commands.update(reserved_commands)
        self.plugins.set_disabled(self.config.disabled_plugins)  # loaded by an earlier runtime: as this one says
        self.config.observe(self._plugins_changed, "disabled_plugins")

    def _plugins_changed(self, change: Any) -> None:
        for line in self.plugins.set_disabled(change["new"]):
            print(line)

    # ---- sessions ----------------------------------------------------------------------------

    def slot(self, name: str | None = None, *, create: bool = True) -> SessionSlot:
        name = name or self.active
        slot = self.slots.get(name)
        if slot is None:
            if not create:
                raise KeyError(name)
            slot = self.slots[name] = SessionSlot(name, Session())
            slot.session.header.setdefault("cwd", os.getcwd())
        return slot

    def new_session(self, name: str) -> SessionSlot:
        if name in self.slots:
            raise ValueError(f"a session named {name!r} exists already; use %agent switch {name}")
        self.slot()  # the session being left stays listed, so one can switch back to it
        slot = self.slot(name)
        self.active = name
        return slot

    def next_session_name(self) -> str:
        n = len(self.slots) + 1
        while f"session-{n}" in self.slots:
            n += 1
        return f"session-{n}"

    # ---- agents ------------------------------------------------------------------------------

    def run_config(self, *, slot: SessionSlot | None = None, **overrides: Any) -> RunConfig:
        """The settings of a run of ``slot`` (default: the active session): the user's, ``overrides``
        (``model`` of ``%%agent --model``…), and what the session saved that comes back for it
        (:class:`~ipyagent.kernel.persistence.SettingsPolicy`)."""
        config = self.config.run_config(**overrides)
        slot = slot if slot is not None else self.slots.get(self.active)
        if slot is not None and slot.settings:
            self.settings_policy.apply(slot.settings, config, model_given=bool(overrides.get("model")))
        config.secrets = self.mcp.secrets()  # scrubbed from what the session stores, like keys
        return config

    def redactor(self) -> Redactor:
        """What every output of a command is scrubbed with: the environment's keys, those of
        ``Agent.provider_options`` and the user's MCP servers' ``env``, ``headers`` and URL credentials."""
        try:
            config = self.run_config()
        except Exception:  # noqa: BLE001 - settings that do not make a config (a bad model name…)
            return Redactor.configured(extra=self.mcp.secrets())
        return Redactor.configured(config.provider_options, extra=config.secrets)

    def agent_for(self, slot: SessionSlot, config: RunConfig, *, tools: Iterable[Tool] | None = None) -> AgentLoop:
        """The slot's agent (kept across runs for its failure tracker), set up for this run: its
        session, these settings and tools, the kernel's namespace, folder and ports."""
        tool_list = self.plugins.tools.tools() if tools is None else list(tools)
        config = with_saved_token_factor(config, slot.settings)
        if slot.agent is None:
            slot.agent = AgentLoop(slot.session, config=config, tools=tool_list, providers=self.providers)
        cell_runner, notebook_port = self.tool_ports()
        slot.agent.configure(session=slot.session, config=config, tools=tool_list,
                             notebook=KernelNotebookContext(self, slot.name), cwd=os.getcwd(),
                             namespace=self.shell.user_ns, root=self.notebook_folder(), cell_runner=cell_runner,
                             notebook_port=notebook_port)
        return slot.agent

    def wants_skill_tool(self) -> bool:
        """Whether a run offers the ``skill`` tool: skills are on and the notebook's folder or
        repository has one (or one that waits for approval)."""
        if not self.config.skills:
            return False
        search = find_skills(self.notebook_folder())
        return bool(search.skills or any(s.needs_approval for s in search.skipped))

    def offered_tools(self) -> list[Tool]:
        """The tools a run would offer now, without starting anything: the built-ins, the skill
        tool where it is due, and the tools of the MCP servers already running."""
        builtins = self.plugins.tools.tools()
        if self.wants_skill_tool() and all(t.name != "skill" for t in builtins):
            builtins.append(SkillTool())
        taken = {t.name for t in builtins}
        return [*builtins, *(t for t in self.mcp.ready_tools() if t.name not in taken)]

    def tools_for(self, slot: SessionSlot) -> list[Tool]:
        """The tools the slot's next run is counted with: :meth:`offered_tools`, or none when its
        last cell ran with ``--no-tools`` (a user who runs without tools sees the context without
        their definitions)."""
        return self.offered_tools() if slot.tools_offered else []

    def budget_for(self, slot: SessionSlot | None = None) -> RequestBudget:
        """The budget of the slot's next request, counted as its next run would count it (its
        settings, :meth:`tools_for`, the notebook's system prompt): every figure of the budget
        outside a run comes from it (``%agent status``, ``context``, ``mask``, the explorer, the
        teaching helpers); no agent is set up for it."""
        slot = slot or self.slot()
        config = with_saved_token_factor(self.run_config(slot=slot), slot.settings)
        tools = self.tools_for(slot)
        offered = {t.name for t in tools}
        record = SystemPromptRecord(config.system_prompt, KernelNotebookContext(self, slot.name))
        session = slot.session
        return RequestBudget(session, config, [t.spec() for t in tools], lambda: record.text(session, offered),
                             self.providers, configured_provider(config, self.providers))

    def ports_for(self, *, approve: ApprovalCallback | None = None) -> RunPorts:
        """What a run in this kernel takes from outside: ``approve`` for the calls that ask, and the
        kernel's namespace described for the artifact ledger (the provider and the summariser come
        from the settings; replay replaces them, ``kernel/replay_control.py``)."""
        return RunPorts(approve=approve, describe_namespace=namespace_describer(self.shell.user_ns),
                        late_tool=self.mcp.late_tool)

    def notebook_folder(self) -> str:
        """The folder read-only tools read without asking: the notebook's, found the way hydration
        finds the notebook (Agent.notebook_path, __session__, JPY_SESSION_NAME, __vsc_ipynb_file__),
        else the kernel's working directory."""
        path = notebook_path(self)
        return os.path.dirname(path) if path is not None else os.getcwd()

    def project_mcp_servers(self) -> tuple[list[Any], list[str]]:
        """The servers of the project's ``.mcp.json`` files (from the notebook's folder up to the
        repository root), and one line per problem; they start only once approved (kernel/mcp_servers.py)."""
        from ipyagent.agent.mcp.project import project_servers

        return project_servers(self.notebook_folder())

    def tool_ports(self) -> tuple[IPythonCellRunner, KernelNotebook]:
        """What the tools use in this kernel: IPython's cell machinery for ``python``, this
        notebook's cells for ``notebook`` (``kernel/ports/cell_runner.py``, ``kernel/ports/notebook_access.py``)."""
        if self._cell_runner is None or self._notebook_port is None:
            self._cell_runner = IPythonCellRunner(self.shell)
            self._notebook_port = KernelNotebook(self.shell, lambda: self.bridge, lambda: self.config.notebook_path)
        return self._cell_runner, self._notebook_port

    def settings_of(self, slot: SessionSlot, config: RunConfig | None = None) -> SavedSettings:
        settings = slot.settings.copy()
        config = config or self.run_config(slot=slot)
        settings.update(config.saved_settings())
        learned = learned_window_setting(self.providers.models, config.model, settings.get(LEARNED_WINDOW))
        if learned:  # survives a restart and a reopen (for this session), and `ipyagent inspect` reads it
            settings[LEARNED_WINDOW] = learned
        if with_saved_token_factor(config, settings) is config:  # none saved for this model yet
            measured = token_factor_setting(config, self.providers)
            if measured:  # measured once for this model and kept: a restart counts as before
                settings[TOKEN_FACTOR] = measured
        slot.settings = settings
        return settings

    def persist(self, slot: SessionSlot, config: RunConfig | None = None, *, force: bool = False,
                journal: Callable[[Mapping[str, object], Mapping[str, object]], bool] | None = None) -> str | None:
        config = config or self.run_config(slot=slot)
        return self.persister.persist(slot, self.settings_of(slot, config), active=slot.name == self.active,
                                      force=force, redact=Redactor.configured(config.provider_options).data,
                                      journal=journal)

    def stream(self, slot: SessionSlot, entries: list[Entry], config: RunConfig | None = None) -> None:
        """Send entries a running run just made (``kernel/entry_stream.py``), redacted like
        :meth:`persist`'s."""
        config = config or self.run_config(slot=slot)
        self.persister.stream(slot, entries, self.settings_of(slot, config), active=slot.name == self.active,
                              redact=Redactor.configured(config.provider_options).data)

    def bridge_state(self) -> str:
        if self.bridge is None:
            return "no bridge (plain IPython): entries are saved in journal outputs"
        if self.bridge.wait_for_frontend():  # right after %load_ext the handshake is on its way
            frontend = self.bridge.frontend or "frontend"
            unacked = sum(len(v) for v in self.bridge.unacked().values())
            return f"bridge connected ({frontend})" + (f", {unacked} entries awaiting ack" if unacked else "")
        return "no frontend acknowledged the bridge: each run ends with a journal output"
