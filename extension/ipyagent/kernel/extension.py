"""``%load_ext ipyagent``: the kernel-side state (sessions, settings, bridge) and the magics.

One :class:`AgentRuntime` per shell holds the named sessions, the ``Agent`` configurable, the
bridge to the frontend and the persister. Loading twice (``%reload_ext``) keeps the sessions.
"""

from __future__ import annotations

import os
from typing import Any

from ipyagent.agent.config import AgentConfig
from ipyagent.core import Session
from ipyagent.bridge import comm as bridge_mod
from ipyagent.kernel.activity import ActivityRecorder
from ipyagent.kernel.settings import Agent as AgentConfigurable
from ipyagent.store.hydration import find_notebook_path
from ipyagent.store.persistence import LoadResult, Persister, SessionSlot, collect_sessions
from ipyagent.kernel.replay_control import ReplayController

__all__ = ["AgentRuntime", "load", "unload", "get_runtime"]

_RUNTIME_ATTR = "_ipyagent_runtime"


class AgentRuntime:
    def __init__(self, shell: Any):
        self.shell = shell
        self.config = AgentConfigurable(parent=shell)
        self.slots: dict[str, SessionSlot] = {}
        self.active = "default"
        self.bridge: Any = None
        self.persister = Persister(None)
        self.load_result: LoadResult | None = None
        self.notes: list[str] = []
        self.running = False
        self.replay = ReplayController()
        self.activity = ActivityRecorder(shell)  # notebook activity, for the next prompts
        self._cell_runner: Any = None
        self._notebook_port: Any = None

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self, *, open_bridge: bool | None = None, hydrate: bool = True) -> None:
        self.running = True
        self.activity.start()
        if open_bridge is None:
            open_bridge = getattr(self.shell, "kernel", None) is not None
        if open_bridge:
            try:
                self.bridge = bridge_mod.KernelBridge().open()
            except Exception as exc:  # no comm machinery: the journal carries everything
                self.bridge = None
                self.notes.append(f"No frontend bridge ({exc}); each run saves its entries in its last output.")
        self.persister.bridge = self.bridge
        if hydrate:
            self.hydrate()

    def hydrate(self) -> LoadResult:
        result = collect_sessions(user_ns=self.shell.user_ns, environ=os.environ,
                                  explicit_path=self.config.notebook_path, hydrate=self.config.hydrate)
        self.load_result = result
        for name, slot in result.slots.items():
            if name in self.slots:
                from ipyagent.store.persistence import merge_into

                merge_into(self.slots[name], slot.session)
            else:
                self.slots[name] = slot
        for name in result.slots:  # what was loaded is what replay answers from
            self.replay.capture(name, self.slots[name].session)
        if result.active and result.active in self.slots:
            self.active = result.active
        elif result.slots and self.active not in self.slots:
            self.active = next(iter(result.slots))
        if not self.config.model:
            saved = (self.slots.get(self.active).settings if self.active in self.slots else {}).get("model")
            if isinstance(saved, str) and saved:
                self.config.model = saved
        self.notes.extend(result.notes)
        return result

    def absorb_push(self) -> None:
        """Take sessions a frontend pushed after the extension was loaded (loaded from
        ``ipython_config.py`` before the push, or a page reload into a running kernel)."""
        if bridge_mod.peek_push() is None:
            return
        from ipyagent.store.persistence import merge_into

        result = collect_sessions(user_ns=self.shell.user_ns, hydrate=False)
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
        self.notes.extend(result.notes)

    def stop(self) -> None:
        self.running = False
        self.activity.stop()
        if self.bridge is not None:
            try:
                self.bridge.close()
            except Exception:
                pass
            self.bridge = None
            self.persister.bridge = None
        for slot in self.slots.values():
            if slot.agent is not None:
                slot.agent.cancel.set()

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

    def agent_config(self, **overrides: Any) -> AgentConfig:
        return self.config.agent_config(**overrides)

    def agent_for(self, slot: SessionSlot, config: AgentConfig, *, tools: Any = None, approve: Any = None) -> Any:
        """The slot's agent (kept across runs for its failure tracker), set up for this run."""
        from ipyagent.agent.loop import Agent
        from ipyagent.agent.tools import default_tools
        from ipyagent.kernel.context import KernelNotebookContext

        tool_list = default_tools() if tools is None else list(tools)
        agent = slot.agent
        if agent is None:
            agent = slot.agent = Agent(slot.session, config=config, tools=tool_list,
                                       namespace=self.shell.user_ns, cwd=os.getcwd(), approve=approve,
                                       notebook=KernelNotebookContext(self, slot.name))
        else:
            agent.notebook = KernelNotebookContext(self, slot.name)
            agent.session = slot.session
            agent.config = config
            agent.tools = {t.name: t for t in tool_list}
            agent.tool_context.cwd = os.getcwd()
            agent.tool_context.namespace = self.shell.user_ns
            agent.approve = approve
        agent.tool_context.root = self.notebook_folder()
        from ipyagent.kernel.namespace_info import namespace_describer

        agent.describe_namespace = namespace_describer(self.shell.user_ns)
        agent.tool_context.cell_runner, agent.tool_context.notebook = self.tool_ports()
        return agent

    def notebook_folder(self) -> str:
        """The folder read-only tools read without asking: the notebook's, found the way hydration
        finds the notebook (Agent.notebook_path, __session__, JPY_SESSION_NAME, __vsc_ipynb_file__),
        else the kernel's working directory."""
        path, _ = find_notebook_path(self.shell.user_ns, os.environ, self.config.notebook_path)
        return os.path.dirname(os.path.abspath(path)) if path is not None else os.getcwd()

    def tool_ports(self) -> tuple[Any, Any]:
        """What the tools use in this kernel: IPython's cell machinery for ``python``, this
        notebook's cells for ``notebook`` (``kernel/cell_runner.py``, ``kernel/notebook_port.py``)."""
        if self._cell_runner is None:
            from ipyagent.kernel.cell_runner import IPythonCellRunner
            from ipyagent.kernel.notebook_port import KernelNotebook

            self._cell_runner = IPythonCellRunner(self.shell)
            self._notebook_port = KernelNotebook(self.shell, lambda: self.bridge, lambda: self.config.notebook_path)
        return self._cell_runner, self._notebook_port

    def settings_of(self, slot: SessionSlot, config: AgentConfig | None = None) -> dict[str, Any]:
        settings = dict(slot.settings)
        settings.update((config or self.agent_config()).saved_settings())
        slot.settings = settings
        return settings

    def persist(self, slot: SessionSlot, config: AgentConfig | None = None, *, force: bool = False) -> str | None:
        return self.persister.persist(slot, self.settings_of(slot, config), active=slot.name == self.active,
                                      force=force)

    def bridge_state(self) -> str:
        if self.bridge is None:
            return "no bridge (plain IPython): entries are saved in journal outputs"
        if self.bridge.connected:
            frontend = self.bridge.frontend or "frontend"
            unacked = sum(len(v) for v in self.bridge.unacked().values())
            return f"bridge connected ({frontend})" + (f", {unacked} entries awaiting ack" if unacked else "")
        return "no frontend acknowledged the bridge: each run ends with a journal output"


def get_runtime(shell: Any) -> AgentRuntime | None:
    return getattr(shell, _RUNTIME_ATTR, None)


def load(ipython: Any) -> AgentRuntime:
    runtime = get_runtime(ipython)
    fresh = runtime is None
    if fresh:
        runtime = AgentRuntime(ipython)
        setattr(ipython, _RUNTIME_ATTR, runtime)
    if runtime.config not in ipython.configurables:
        ipython.configurables.append(runtime.config)
    from ipyagent.kernel.magics.agent_cell import register_magics

    register_magics(ipython, runtime)
    if fresh:
        runtime.start()
        _announce(runtime)
    elif not runtime.running:  # %reload_ext: the sessions stay, the bridge opens again
        runtime.start(hydrate=False)
    return runtime


def _announce(runtime: AgentRuntime) -> None:
    result = runtime.load_result
    lines = []
    if result is not None and result.slots:
        counts = ", ".join(f"{name} ({len(slot.session)} entries, from {slot.origin})"
                           for name, slot in result.slots.items())
        lines.append(f"ipyagent: resumed {counts}; the kernel's namespace is new.")
    elif result is not None and result.path is None and not result.pushed and runtime.config.hydrate:
        lines.append("ipyagent: no stored sessions found (no frontend push, notebook path unknown). "
                     "New runs are kept in memory and saved with the notebook through the bridge or the "
                     "runs' journal outputs; set %config Agent.notebook_path to reload from disk after a restart.")
    lines.extend(n for n in runtime.notes if n)
    runtime.notes.clear()
    if lines:
        print("\n".join(lines))


def unload(ipython: Any) -> None:
    runtime = get_runtime(ipython)
    if runtime is None:
        return
    runtime.stop()
    if runtime.config in ipython.configurables:
        ipython.configurables.remove(runtime.config)
    from ipyagent.kernel.magics.agent_cell import unregister_magics

    unregister_magics(ipython)
    # The runtime (and its sessions) stays on the shell, so %reload_ext ipyagent loses nothing.
