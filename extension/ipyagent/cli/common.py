"""What every ``ipyagent`` command shares: the error type, command registration, reading a
session file, and the common arguments.

Command modules import from here (never from the package ``__init__``), so the package imports
its command modules and no module imports back up.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from ipyagent.agent.run_config import SavedSettings
from ipyagent.compaction.settings import CompactionSettings

if TYPE_CHECKING:
    from ipyagent.core import Session

__all__ = ["COMMANDS", "Budget", "CliError", "Command", "LoadedSession", "budget_args", "budget_of", "command",
           "file_args", "load_session", "load_session_file"]

Command = Callable[[argparse.Namespace], int]
Configure = Callable[[argparse.ArgumentParser], None]

COMMANDS: dict[str, tuple[Configure, Command]] = {}  # name -> (configure its parser, run it); in order


def command(name: str, configure: Configure) -> Callable[[Command], Command]:
    """Register the decorated function as ``ipyagent NAME`` (its docstring's first line is the help)."""
    def register(run: Command) -> Command:
        COMMANDS[name] = (configure, run)
        return run

    return register


class CliError(Exception):
    pass


@dataclass
class LoadedSession:
    """A session read for a command, with its name and the settings stored with it."""

    session: Session
    name: str | None  # the notebook's name for it, or the name a Pi session_info entry gave it
    settings: SavedSettings = field(default_factory=lambda: SavedSettings())  # stored with a notebook's session


def load_session(args: argparse.Namespace) -> Session:
    return load_session_file(args).session


def load_session_file(args: argparse.Namespace) -> LoadedSession:
    """Read ``args.file`` (a notebook's session ``args.session``, or a Pi file) with ``args.estimator``.

    A warning while reading (tiktoken missing or offline) is printed as one ``note:`` line.
    """
    from ipyagent.core import Session

    estimator = getattr(args, "estimator", None) or "chars4"
    path = Path(args.file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if path.suffix == ".ipynb":
                loaded = _load_notebook_session(path, getattr(args, "session", None), estimator)
            else:
                session = Session.from_file(path, estimator=estimator)
                loaded = LoadedSession(session, _pi_session_name(session))
        except FileNotFoundError:
            raise CliError(f"no such file: {args.file}") from None
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read {args.file}: {exc}") from None
    for warning in dict.fromkeys(str(w.message) for w in caught):
        print(f"ipyagent {args.command}: note: {warning}", file=sys.stderr)
    return loaded


def _load_notebook_session(path: Path, name: str | None, estimator: str) -> LoadedSession:
    from ipyagent.agent.run_config import upgrade_saved_settings
    from ipyagent.session.tokens import make_estimator
    from ipyagent.store.ipynb import read_notebook, sessions_from_notebook

    sessions, _ = sessions_from_notebook(read_notebook(path), source=str(path))
    name = sessions.resolve_name(name)
    settings = upgrade_saved_settings(sessions.sessions[name].settings)
    model = settings.get("model")
    model = model if isinstance(model, str) else ""
    session = sessions.to_session(name, estimator=make_estimator(estimator, model=model))  # its model's encoding
    return LoadedSession(session, name, settings)


def _pi_session_name(session: Session) -> str | None:
    """The name the latest ``session_info`` entry gave a Pi session (``/name`` in Pi), if any."""
    for entry in reversed(session.entries):
        if entry.get("type") == "session_info" and isinstance(entry.get("name"), str):
            return entry["name"] or None
    return None


@dataclass
class Budget:
    """The compaction settings and window for a command: its options, else what the session stored."""

    settings: CompactionSettings
    context_window: int | None
    window_source: str  # "--context-window", "stored with the session" or "" (unknown)


def budget_of(args: argparse.Namespace, stored: SavedSettings) -> Budget:
    compaction = stored.get("compaction")
    compaction = compaction if isinstance(compaction, dict) else {}
    saved = CompactionSettings.from_dict({k: v for k, v in compaction.items() if _is_int(v) or k == "enabled"})
    settings = CompactionSettings(
        reserve_tokens=args.reserve_tokens if args.reserve_tokens is not None else saved.reserve_tokens,
        keep_recent_tokens=args.keep_recent_tokens if args.keep_recent_tokens is not None
        else saved.keep_recent_tokens,
        enabled=bool(saved.enabled))
    if args.context_window:
        return Budget(settings, args.context_window, "--context-window")
    window = stored.get("context_window")
    if _is_int(window) and window > 0:
        return Budget(settings, window, "stored with the session")
    learned = stored.get("learned_window")
    window = learned.get("window") if isinstance(learned, dict) else None
    if _is_int(window) and window > 0:
        return Budget(settings, window, "learned from an overflow error, stored with the session")
    return Budget(settings, None, "")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def file_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a notebook (.ipynb) or a Pi session file (.jsonl)")
    parser.add_argument("--session", help="which session of a notebook (default: the active one)")


def budget_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimator", choices=["chars4", "tiktoken"], default="chars4",
                        help="how tokens after the last provider-reported usage are estimated: chars4 "
                             "(Pi's chars/4, the default) or tiktoken")
    parser.add_argument("--reserve-tokens", type=int, metavar="N",
                        help="tokens kept free for the answer; compaction runs above window - N "
                             "(default: the session's stored setting, else derived from the window: "
                             "16384 from 65,536 tokens up, window/4 below)")
    parser.add_argument("--keep-recent-tokens", type=int, metavar="N",
                        help="tokens of recent work kept verbatim by a compaction "
                             "(default: the session's stored setting, else derived from the window: "
                             "20000 from 65,536 tokens up, about 30%% below)")
    parser.add_argument("--context-window", type=int, metavar="N",
                        help="the model's context window in tokens, for the budget "
                             "(default: the session's stored window)")
