"""``%agent mcp``: each MCP server — where it is defined, its state, start-up time, the tools it
offers and the tokens their definitions take (of the window, and a warning over
``Agent.mcp_warn_share``); ``%agent mcp start [NAME]`` starts the servers now and waits for them
(the tools are then in the next prompt from its start); ``restart NAME`` and ``stop [NAME]``.

Everything here is plain text: tool names and descriptions come from the servers (untrusted).
The listing names the variables and headers a server sets, not their values (a project server's
approval question shows those, ``kernel/cell_run.py``); every output is scrubbed on its way out
(``commands.dispatch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ipyagent.agent.mcp.hub import START_TIMEOUT
from ipyagent.kernel.magics.commands import TOOLS, argument, command, magic_arguments, parse_argstring
from ipyagent.text import one_line

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["mcp_report"]


def mcp_report(runtime: AgentRuntime, *, window: int | None) -> str:
    rows = runtime.mcp.rows()
    if not rows:
        return ('No MCP servers defined. Set %config Agent.mcp_servers = {"NAME": {"command": ..., "args": [...]}} '
                '(or a url), or add a .mcp.json to the project (README, "MCP servers and skills").')
    share = runtime.config.mcp_warn_share
    lines = []
    total = 0
    for row in rows:
        config = row.config
        started = f", started in {row.startup_seconds:.1f} s" if row.startup_seconds is not None else ""
        lines.append(f"{config.name} [{config.transport}] {row.state}{started} — from {config.origin}")
        lines.append(f"  {config.shown()}")
        if row.error:
            lines.append(f"  {row.error}")
        if row.tools or row.listed:
            of_window = f", {row.tokens / window:.1%} of the {window:,}-token window" if window else ""
            enabled = f" ({len(row.tools)} of {row.listed} enabled)" if len(row.tools) != row.listed else ""
            lines.append(f"  {len(row.tools)} tools{enabled}, ~{row.tokens:,} tokens of definitions{of_window}")
            if window and row.tokens > share * window:
                lines.append(f"  WARNING: more than {share:.0%} of the window; offer only some tools with "
                             f"\"tools\": [...] in {config.name!r}'s definition")
            for tool in row.tools:
                lines.append(f"    {tool.name}: {one_line(tool.description, 90)}")
        total += row.tokens
    waiting = [r for r in rows if not (r.tools or r.listed) and r.state != "ready" and r.state != "disabled"]
    if waiting and not any(r.tools or r.listed for r in rows):
        lines.append("MCP tool definitions in all: not counted, no server has started yet (%agent mcp start "
                     "starts them now); once started they count in the budget like the built-in tools'.")
    else:
        later = f"; {len(waiting)} server{'s' * (len(waiting) != 1)} not started yet" if waiting else ""
        lines.append(f"MCP tool definitions in all: ~{total:,} tokens (counted in the budget like the built-in "
                     f"tools'){later}.")
    return "\n".join(lines)


def replaying(runtime: AgentRuntime) -> bool:
    """Whether the active session's recorded cells replay now (then no server is needed)."""
    config = runtime.run_config()
    return bool(runtime.replay.recorded_cells(runtime.active)) and runtime.replay.replays(
        runtime.config.replay, config.model, config.provider_options)


@command("mcp", group=TOOLS)
@magic_arguments()
@argument("action", nargs="?", default="list", choices=["list", "start", "restart", "stop"],
          help="list (default): servers, states, tools and their tokens; start: start them now and wait; "
               "restart NAME; stop [NAME]")
@argument("name", nargs="?", default=None, help="one server (default: all)")
def agent_mcp(runtime: AgentRuntime, rest: str) -> None:
    """MCP servers: each one's state, its tools and the tokens their definitions take."""
    args = parse_argstring(agent_mcp, rest)
    mcp = runtime.mcp
    servers, problems = mcp.definitions()
    names = [s.name for s in servers]
    if args.name is not None and args.name not in names:
        raise UsageError(f"%agent mcp: no server {args.name!r}; defined: {', '.join(names) or 'none'}")
    for line in problems:
        print(f"ipyagent: {line}")
    if args.action == "stop":
        for name in [args.name] if args.name else names:
            mcp.hub.stop_server(name)
    elif args.action == "restart":
        if args.name is None:
            raise UsageError("%agent mcp restart NAME")
        mcp.hub.restart(args.name)
        mcp.hub.wait_ready([args.name], START_TIMEOUT)
    elif args.action == "start" and replaying(runtime):
        print("This notebook replays its recorded responses (Agent.replay): MCP servers are not started; recorded "
              "MCP calls answer from the recording.")
    elif args.action == "start":
        from ipyagent.kernel.cell_run import start_approver

        mcp.prompt_tools(print, approve_start=start_approver(print, runtime.redactor().text), window=None, taken=(),
                         wait=START_TIMEOUT)
    window = None
    try:
        window = runtime.budget_for().window()
    except Exception:  # noqa: BLE001 - no model or window: the list without shares
        window = None
    print(mcp_report(runtime, window=window))
