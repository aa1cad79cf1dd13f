"""``%agent explore``: the compaction explorer for a session of this kernel (``explorer/``)."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ipyagent.kernel.magics.commands import COMPACTION, command

__all__: list[str] = []


# ---- the compaction explorer ---------------------------------------------------------------------


@command("explore", group=COMPACTION)
@magic_arguments()
@argument("--session", "-s", default=None, help="the session to explore (default: the active one)")
@argument("--window", type=int, default=None, help="the window to start with (default: the model's)")
@argument("--reserve", type=int, default=None, help="the reserve to start with (default: Agent.reserve_tokens)")
@argument("--keep-recent", type=int, default=None, dest="keep_recent",
          help="keep-recent to start with (default: Agent.keep_recent_tokens)")
@argument("--estimator", default=None, help="chars4, tiktoken, chars4x1.2 or tiktokenx1.1 (default: the session's)")
def agent_explore(runtime: Any, rest: str) -> None:
    """The compaction explorer: move the sliders, watch the cut point move."""
    args = parse_argstring(agent_explore, rest)
    if args.session and args.session not in runtime.slots:
        raise UsageError(f"no session {args.session!r}; sessions: {', '.join(runtime.slots) or 'none'}")
    from ipyagent.explorer.widget import explorer_for_slot

    try:
        explorer = explorer_for_slot(runtime, args.session, window=args.window, reserve=args.reserve,
                                     keep_recent=args.keep_recent, estimator=args.estimator)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    display(explorer)
