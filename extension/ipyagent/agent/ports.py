"""What one run of the agent takes from outside, declared in one object.

The loop owns its session, settings and tools; everything else a run needs from its surroundings
reaches it through :class:`RunPorts`: the model provider, the summariser, where tool results come
from (the tools themselves, or a recording), the compaction oracle, the namespace describer for
the artifact ledger and the approval callback. The constructor's ports are the agent's own; a
caller that knows better for one run (the notebook's replay, a cell's approver) declares the whole
set with ``with agent.using(ports): ...`` (``dataclasses.replace`` derives one set from another):
nothing is patched onto the agent from outside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ipyagent.agent.compaction_oracle import CompactionOracle
from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolOutput
from ipyagent.compaction.ledger import Describe
from ipyagent.compaction.summarizer import Summarizer
from ipyagent.providers.provider import Provider
from ipyagent.shapes import ContentBlock

__all__ = ["LateTool", "RunPorts", "ToolResultSource"]

# (tool call, run it) -> its output; replay answers from the recording instead of running.
ToolResultSource = Callable[[ContentBlock, Callable[[], ToolOutput]], ToolOutput]
# (name, the run's tool names) -> a tool the run did not offer but that exists now (an MCP server's,
# still starting when the prompt began: the kernel waits for it), or None
LateTool = Callable[[str, Iterable[str]], Tool | None]


@dataclass(frozen=True)
class RunPorts:
    provider: Provider | None = None  # None: resolved from the config's model at each call
    summarizer: Summarizer | None = None  # None: built from the config (provider_summarizer.summarizer_for)
    tool_results: ToolResultSource | None = None  # None: the tools run
    compaction_oracle: CompactionOracle | None = None  # None: the budget alone decides
    describe_namespace: Describe | None = None  # kernel variables -> type and shape, for the ledger
    approve: ApprovalCallback | None = None  # None: calls that need approval are refused
    late_tool: LateTool | None = None  # None: a call to a tool the run did not offer is an unknown tool
