"""The built-in tools, one module each (``python``, ``read``, ``bash``, ``write``/``edit``, the
searches, ``recall``, ``notebook``); the machinery they share is the folder above.

They are a plugin like any other (``ipyagent/plugins``): :func:`register_tools` is its hook, which
registers them into the plugin manager's registry; ``tool_registry.builtin_tools`` calls it too,
for a registry of the built-ins without a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ipyagent.agent.tools.builtin.bash import BashTool
from ipyagent.agent.tools.builtin.notebook import NotebookTool
from ipyagent.agent.tools.builtin.python import PythonTool
from ipyagent.agent.tools.builtin.read import ReadTool
from ipyagent.agent.tools.builtin.recall import RecallTool
from ipyagent.agent.tools.builtin.search import FindTool, GrepTool, LsTool
from ipyagent.agent.tools.builtin.write import EditTool, WriteTool
from ipyagent.plugin_markers import hookimpl

PLUGIN_NAME = "builtin-tools"
# the order the model sees them in
TOOLS = (PythonTool, ReadTool, BashTool, WriteTool, EditTool, LsTool, GrepTool, FindTool, RecallTool, NotebookTool)


@hookimpl
def register_tools(register: Callable[..., Any]) -> None:
    for tool in TOOLS:
        register(tool)
