"""Agent tools: the built-ins register on import (through their plugin hook), user tools with
``register_tool`` (a Tool, or a typed function: ``functions.py``)."""

from ipyagent.agent.tools.approval import ApprovalPolicy, run_tool_call, validate_arguments
from ipyagent.agent.tools.builtin import register_tools as _register_builtins
from ipyagent.agent.tools.functions import FunctionTool, function_tool, read_only
from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.tool_registry import default_tools, get_tool, register_tool, unregister_tool

_register_builtins(register_tool)

__all__ = [
    "ApprovalCallback",
    "ApprovalPolicy",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "default_tools",
    "function_tool",
    "get_tool",
    "read_only",
    "register_tool",
    "run_tool_call",
    "unregister_tool",
    "validate_arguments",
]
