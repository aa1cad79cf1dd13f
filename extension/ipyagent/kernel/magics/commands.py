"""``%agent COMMAND …``: the registry of subcommands, the dispatch, and the help built from them.

Each subcommand is a function of ``(runtime, rest_of_line)`` with its own ``magic_arguments``,
declared once with :func:`command`, in the module of its group (``status.py``, ``sessions.py``,
``pins.py``, ``probe.py``, ``replay.py``, ``explore.py``). ``%agent help`` and the magic's
docstring are written from the parsers, so they always list every command and option.

IPython's decorators and its argument parser carry no annotations; the command modules take them
from here, typed (:func:`magic_arguments`, :func:`argument`, :func:`parse_argstring`,
:func:`line_cell_magic`), so that the functions they decorate stay typed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython.core import magic
from IPython.core import magic_arguments as ipython_arguments
from IPython.core.error import UsageError
from IPython.display import display

from ipyagent.agent.redaction import Redactor

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime

__all__ = ["COMMANDS", "argument", "command", "dispatch", "help_text", "line_cell_magic", "magic_arguments",
           "parse_argstring", "show", "usage"]

F = TypeVar("F", bound=Callable[..., Any])


def magic_arguments() -> Callable[[F], F]:
    """IPython's ``@magic_arguments()``: gives the function an argparse parser (``func.parser``)."""
    return cast("Callable[[F], F]", ipython_arguments.magic_arguments())


def argument(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """IPython's ``@argument(...)``: one ``add_argument`` call on the function's parser."""
    return cast("Callable[[F], F]", ipython_arguments.argument(*args, **kwargs))


def parse_argstring(func: Callable[..., Any], line: str) -> argparse.Namespace:
    """The arguments of ``line``, parsed by ``func``'s parser (a usage error names the command)."""
    return cast(argparse.Namespace, ipython_arguments.parse_argstring(func, line))


def line_cell_magic(func: F) -> F:
    """IPython's ``@line_cell_magic``: the method serves as ``%name`` and ``%%name``."""
    return cast(F, magic.line_cell_magic(func))


Command = Callable[["AgentRuntime", str], Any]
COMMANDS: dict[str, Command] = {}
# the parsers of the cell magics, shown before the subcommands (%%agent, %compact)
CELL_MAGICS: dict[str, argparse.ArgumentParser] = {}


def command(name: str) -> Callable[[Command], Command]:
    """Register a ``magic_arguments`` function as ``%agent NAME``; its parser is named so that its
    usage (and errors) read as typed."""

    def register(func: Command) -> Command:
        parser = getattr(func, "parser", None)
        if parser is None:
            raise TypeError(f"%agent {name}: decorate {func.__name__} with @magic_arguments() first")
        parser.prog = f"agent {name}"  # IPython's formatter writes the "%" of the usage itself
        COMMANDS[name] = func
        return func

    return register


def cell_magic_parser(name: str, func: Any) -> None:
    """Name a cell magic's parser (``%%agent``, ``%compact``) and show it first in the help."""
    func.parser.prog = name.removeprefix("%")
    CELL_MAGICS[name] = func.parser


def dispatch(runtime: AgentRuntime, line: str) -> Any:
    name, _, rest = line.strip().partition(" ")
    name = name or "status"
    func = COMMANDS.get(name)
    if func is None:
        raise UsageError(f"%agent: unknown command {name!r}. Commands: {', '.join(sorted(COMMANDS))} "
                         "(%agent help; %%agent runs the agent on a cell).")
    return func(runtime, rest.strip())


def show(text: str, html_view: str | None = None) -> None:
    """``text/plain`` and, if given, ``text/html`` — built only with ``ipyagent.display.untrusted``
    (session names, labels, entry text and summaries all come from metadata or a model), with the
    keys of this environment scrubbed (a session stored before they were is shown without them)."""
    redactor = Redactor.configured()
    data = {"text/plain": redactor.text(text)}
    if html_view is not None:
        data["text/html"] = redactor.text(html_view)
    display(data, raw=True)


def usage(parser: argparse.ArgumentParser) -> str:
    """The parser's usage line (IPython's formatter starts it with ``::``), on one line, without ``[-h]``."""
    text = " ".join(parser.format_usage().split())
    return text.removeprefix(":: ").removeprefix("usage: ").replace(" [-h]", "")


def _description(parser: argparse.ArgumentParser) -> str:
    lines = (parser.description or "").strip().splitlines()
    return " ".join(line.strip() for line in lines[:3] if line.strip()).split(". ")[0].rstrip(".")


def help_text() -> str:
    """Every magic and ``%agent`` subcommand: its usage, what it does, and its options."""
    blocks = []
    names = sorted(COMMANDS, key=lambda name: name == "help")  # in registration order, help last
    for parser in [*CELL_MAGICS.values(), *(COMMANDS[n].parser for n in names)]:  # type: ignore[attr-defined]
        lines = [usage(parser), f"    {_description(parser)}"]
        for action in parser._actions:  # argparse keeps its actions there; there is no public accessor
            if isinstance(action, argparse._HelpAction) or not action.help:
                continue
            flags = ", ".join(action.option_strings) or action.dest
            lines.append(f"      {flags}: {action.help}")
        blocks.append("\n".join(lines))
    blocks.append("Settings: %agent config; change one with %config Agent.NAME = VALUE (or c.Agent.NAME in "
                  "ipython_config.py). %agent help COMMAND shows one command.")
    return "\n\n".join(blocks)


@command("help")
@magic_arguments()
@argument("name", nargs="?", default=None, help="one command to explain (default: all of them)")
def agent_help(runtime: AgentRuntime, rest: str) -> None:
    """Every magic and %agent command, with its options."""
    args = parse_argstring(agent_help, rest)
    if args.name is None:
        print(help_text())
        return
    parser = CELL_MAGICS.get(args.name) or getattr(COMMANDS.get(args.name), "parser", None)
    if parser is None:
        raise UsageError(f"%agent help: no command {args.name!r}; commands: {', '.join(COMMANDS)}")
    print(parser.format_help())
