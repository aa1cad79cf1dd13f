"""ipyagent: a coding agent inside the Jupyter kernel, with Pi-style context compaction.

``from ipyagent import Session, CompactionSettings`` is the core API; ``%load_ext ipyagent``
adds the notebook magics; ``ipyagent.hookimpl`` (and ``ipyagent.read_only``) are what a plugin
needs (``ipyagent/plugins``, docs/extending.md). Names are imported lazily so that ``import ipyagent.providers`` (or
the CLI) does not pay for the layers it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipyagent.session import file_readers as _loaders

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__version__ = "0.1.0"
__all__ = ["Session", "CompactionSettings", "AgentLoop", "explore", "hookimpl", "hookspec", "read_only"]

# ``Session.from_file("x.ipynb")`` reads through the notebook layer, imported on first use: the core
# never imports it, and ``import ipyagent`` stays light.
_loaders.register_loader(".ipynb", "ipyagent.store.ipynb:session_from_notebook_file")


def __getattr__(name: str) -> Any:
    if name == "Session":
        from ipyagent.core import Session

        return Session
    if name == "CompactionSettings":
        from ipyagent.compaction.settings import CompactionSettings

        return CompactionSettings
    if name == "AgentLoop":
        from ipyagent.agent.loop import AgentLoop

        return AgentLoop
    if name in ("hookimpl", "hookspec"):
        from ipyagent import plugin_markers

        return getattr(plugin_markers, name)
    if name == "read_only":
        from ipyagent.agent.tools.functions import read_only

        return read_only
    if name == "explore":
        from ipyagent.explorer.widget import explore

        return explore
    raise AttributeError(f"module 'ipyagent' has no attribute {name!r}")


def load_ipython_extension(ipython: InteractiveShell) -> None:  # %load_ext ipyagent
    from ipyagent.kernel.extension import load

    load(ipython)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    from ipyagent.kernel.extension import unload

    unload(ipython)
