"""Old path of :mod:`ipyagent.kernel.extension` (saved notebooks call ``get_runtime``)."""

from ipyagent.kernel.extension import get_runtime, load, unload

__all__ = ["get_runtime", "load", "unload"]
