"""``%load_ext ipyagent`` and ``%unload_ext ipyagent``: the runtime on the shell, the magics, the
resume note.

One :class:`~ipyagent.kernel.runtime.AgentRuntime` per shell holds the named sessions, the
``Agent`` settings, the bridge to the frontend and the persister. Loading twice (``%reload_ext``)
keeps the sessions.
"""

from __future__ import annotations

from typing import Any

from ipyagent.bridge.comm import TARGET
from ipyagent.bridge.kernel_status import keep_busy_while_running
from ipyagent.kernel.persistence import pin_notes
from ipyagent.kernel.runtime import AgentRuntime
from ipyagent.providers.pricing import warm_up as warm_up_prices

__all__ = ["AgentRuntime", "get_runtime", "load", "unload"]

_RUNTIME_ATTR = "_ipyagent_runtime"


def get_runtime(shell: Any) -> AgentRuntime | None:
    return getattr(shell, _RUNTIME_ATTR, None)


def load(ipython: Any) -> AgentRuntime:
    found = get_runtime(ipython)
    fresh = found is None
    runtime = AgentRuntime(ipython) if found is None else found
    if fresh:
        setattr(ipython, _RUNTIME_ATTR, runtime)
    if runtime.config not in ipython.configurables:
        ipython.configurables.append(runtime.config)
    from ipyagent.kernel.magics import BUILTIN_COMMANDS, register_magics

    if fresh:  # before the magics, so that %agent? lists the plugins' commands
        runtime.load_plugins(BUILTIN_COMMANDS)
    register_magics(ipython, runtime)
    if fresh:
        # the page's acks, handled on a subshell during a run, must not make the kernel read idle
        keep_busy_while_running(getattr(ipython, "kernel", None), TARGET)
        _register_widget_control()
        warm_up_prices()  # loaded while the user writes the first prompt, not when its reply ends
        runtime.start()
        _announce(runtime)
    elif not runtime.running:  # %reload_ext: the sessions stay, the bridge opens again
        runtime.start(hydrate=False)
    return runtime


def _register_widget_control() -> None:
    """Import ipywidgets now, so the kernel has its ``jupyter.widget.control`` comm target.

    JupyterLab's widget manager opens that comm from every page that connects. A kernel without
    the target answers with a ``comm_close`` that reaches every page, and each page that did not
    open it logs "Comm not found for comm id …" (a second tab, a page reopened on a running
    kernel). The budget widget needs ipywidgets anyway; importing it registers the target.
    """
    try:
        import ipywidgets  # noqa: F401
    except ImportError:  # the budget widget degrades to text without it
        pass


def _announce(runtime: AgentRuntime) -> None:
    result = runtime.load_result
    lines = []
    if result is not None and result.slots:
        counts = ", ".join(f"{name} ({len(slot.session)} entries, from {slot.origin})"
                           for name, slot in result.slots.items())
        lines.append(f"ipyagent: resumed {counts}; the kernel's namespace is new.")
        lines.extend(pin_notes(runtime.slots, result.slots))
        lines.extend(runtime.settings_policy.load_notes(runtime.slots, result.slots))
    elif result is not None and result.path is None and not result.pushed and runtime.config.hydrate:
        # true wherever it loads: a page with the bridge may still answer (it pushes only sessions
        # it holds), so nothing is said here about the bridge or the notebook's path
        lines.append("ipyagent: nothing stored to resume; the first %%agent cell starts the session.")
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
    from ipyagent.kernel.magics import unregister_magics

    unregister_magics(ipython)
    # The runtime (and its sessions) stays on the shell, so %reload_ext ipyagent loses nothing.
