"""The pluggy markers of the plugin hooks (:data:`hookimpl`, :data:`hookspec`) and the project's name
(pluggy's, and the plugins' entry-point group): here, in the innermost layer, so that every layer can
mark its built-in plugin. The plugin hooks themselves are specified in ``plugins/hookspecs.py``."""

from __future__ import annotations

import pluggy

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "ipyagent"
hookimpl = pluggy.HookimplMarker(PROJECT)
hookspec = pluggy.HookspecMarker(PROJECT)
