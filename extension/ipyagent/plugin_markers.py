"""The pluggy markers of the plugin hooks (:data:`hookimpl`, :data:`hookspec`) and the project's name
(pluggy's, and the plugins' entry-point group): here, in the innermost layer, so that every layer can
mark its built-in plugin. The plugin hooks themselves are specified in ``plugins/hookspecs.py``."""

from __future__ import annotations

import pluggy

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "ipyagent"
#: Marks a plugin's implementation of a plugin hook (``@hookimpl def register_tools(): …``).
hookimpl = pluggy.HookimplMarker(PROJECT)
#: Marks a plugin hook's specification (``plugins/hookspecs.py``).
hookspec = pluggy.HookspecMarker(PROJECT)
