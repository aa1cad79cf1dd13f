"""``%agent replay on|off|auto|status [--tools|--no-tools]``: replay recorded responses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipyagent.kernel.magics.commands import REPLAY, argument, command, magic_arguments, parse_argstring

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime


@command("replay", group=REPLAY)
@magic_arguments()
@argument("mode", nargs="?", choices=["on", "off", "auto", "status"], default="status",
          help="on: replay every recorded cell; auto: only without a configured provider; off: never")
@argument("--tools", dest="tools", action="store_true", default=None,
          help="run recorded tool calls again and report results that differ")
@argument("--no-tools", dest="tools", action="store_false", help="use the recorded tool results (default)")
def agent_replay(runtime: AgentRuntime, rest: str) -> None:
    """Replay recorded responses: each %%agent cell takes its model and summary responses from what the
    session recorded for that cell; the budget, trigger and cut point run for real."""
    args = parse_argstring(agent_replay, rest)
    if args.mode in ("on", "off", "auto"):
        if args.mode == "on" and runtime.config.replay != "on":
            # turning replay on takes the session as it stands now as the recording
            for name, slot in runtime.slots.items():
                runtime.replay.capture(name, slot.session)
        runtime.config.replay = args.mode
    if args.tools is not None:
        runtime.config.replay_tools = args.tools
    config = runtime.run_config()
    name = runtime.active
    cells = runtime.replay.recorded_cells(name)
    live = runtime.providers.configured(config.model, config.provider_options)
    mode = runtime.config.replay
    effective = {"on": "replays every recorded cell",
                 "off": "runs every cell live",
                 "auto": ("runs live (a provider is configured)" if live
                          else "replays recorded cells (no provider is configured)")}[mode]
    tools = "run again and compared" if runtime.config.replay_tools else "taken from the recording"
    print(f"replay = {mode!r}: {effective}. Session {name!r} has {cells} recorded cell run(s); "
          f"tool results are {tools}.")
