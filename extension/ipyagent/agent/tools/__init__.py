"""Agent tools: the built-ins (``tools/builtin``, a plugin), registries of tools by name
(``tool_registry.py``), and ``register_tool`` for a user's own (a Tool, or a typed function:
``functions.py``)."""

from ipyagent.agent.tools.approval import ApprovalPolicy, run_tool_call, validate_arguments
from ipyagent.agent.tools.functions import FunctionTool, function_tool, read_only
from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.tool_registry import (
    USER_TOOLS,
    ToolRegistry,
    builtin_tools,
    default_tools,
    get_tool,
    register_tool,
    unregister_tool,
)

__all__ = [
    "USER_TOOLS",
    "ApprovalCallback",
    "ApprovalPolicy",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "builtin_tools",
    "default_tools",
    "function_tool",
    "get_tool",
    "read_only",
    "register_tool",
    "run_tool_call",
    "unregister_tool",
    "validate_arguments",
]
