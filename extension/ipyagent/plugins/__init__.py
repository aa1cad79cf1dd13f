"""Plugins: packages that add tools, providers, ``%agent`` commands, hooks and MCP transports,
through pluggy hooks (``hookspecs.py``) and the ``ipyagent`` entry-point group; the built-in tools,
providers and transports are plugins too. ``manager.py`` loads them, once per kernel, at
``%load_ext ipyagent``. ``docs/extending.md`` is the guide.

    import ipyagent

    @ipyagent.hookimpl
    def register_tools(register):
        register(word_count, read_only=True)
"""

from ipyagent.plugin_markers import hookimpl, hookspec
from ipyagent.plugins.manager import (
    ENTRY_POINT_GROUP,
    HOOKS_GROUP,
    PluginCommand,
    PluginRecord,
    Plugins,
)

__all__ = ["ENTRY_POINT_GROUP", "HOOKS_GROUP", "PluginCommand", "PluginRecord", "Plugins", "hookimpl", "hookspec"]
