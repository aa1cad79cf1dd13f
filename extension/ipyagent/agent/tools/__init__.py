"""Agent tools: the built-ins register on import, user tools with ``register_tool``."""

from ipyagent.agent.tools.approval import ApprovalPolicy, run_tool_call, validate_arguments
from ipyagent.agent.tools.base import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.registry import default_tools, get_tool, register_tool, unregister_tool

# Imported for their registrations; the order here is the order the model sees the tools in.
from ipyagent.agent.tools.builtin import python, read, bash, write, search, recall, notebook  # noqa: F401  isort: skip

__all__ = [
    "ApprovalCallback",
    "ApprovalPolicy",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "default_tools",
    "get_tool",
    "register_tool",
    "run_tool_call",
    "unregister_tool",
    "validate_arguments",
]
