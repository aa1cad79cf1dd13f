"""``%agent COMMAND …``: the registry of subcommands, the dispatch (to the plugins' commands too),
the help built from them, and ``%agent plugins``.

Each subcommand is a function of ``(runtime, rest_of_line)`` with its own ``magic_arguments``,
declared once with :func:`command` and its help group, in the module of its group (``status.py``,
``sessions.py``, ``pins.py``, ``probe.py``, ``replay.py``, ``explore.py``…). A plugin's command is
``function(args)`` (``ipyagent/plugins``). ``%agent help`` and the magic's docstring are written
from the parsers, so they always list every command and option.

:func:`dispatch` is the one way a command runs, a plugin's too, and it runs inside
:func:`~ipyagent.display.redacted_output.redacted_output` with the runtime's redactor (the
environment's keys, ``Agent.provider_options``', the MCP servers' ``env``, ``headers`` and URL
credentials): whatever a command prints, displays, raises or returns is scrubbed, so no command
has to remember to.

IPython's decorators and its argument parser carry no annotations; the command modules take them
from here, typed (:func:`magic_arguments`, :func:`argument`, :func:`parse_argstring`,
:func:`line_cell_magic`), so that the functions they decorate stay typed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython.core import magic
from IPython.core import magic_arguments as ipython_arguments
from IPython.core.error import UsageError
from IPython.display import display

from ipyagent.agent.redaction import Redactor
from ipyagent.display.redacted_output import redacted_output

if TYPE_CHECKING:
    from ipyagent.kernel.runtime import AgentRuntime
    from ipyagent.plugins import PluginCommand

__all__ = ["COMMANDS", "GROUPS", "argument", "command", "dispatch", "help_text", "line_cell_magic", "magic_arguments",
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

# the groups of ``%agent help``, in its order; each command names its own (``command(name, group)``)
SESSIONS, STATUS_AND_SETTINGS, CONTEXT, COMPACTION, TOOLS, REPLAY, HELP = GROUP_TITLES = (
    "Sessions", "Status and settings", "Context", "Compaction", "Tools, MCP, skills and plugins", "Replay", "Help")
PLUGINS = "From plugins"
GROUPS: dict[str, str] = {}  # command -> its group


def command(name: str, group: str) -> Callable[[Command], Command]:
    """Register a ``magic_arguments`` function as ``%agent NAME`` in one of the help's groups; its
    parser is named so that its usage (and errors) read as typed."""
    if group not in GROUP_TITLES:
        raise ValueError(f"%agent {name}: group {group!r} is none of {GROUP_TITLES}")

    def register(func: Command) -> Command:
        parser = getattr(func, "parser", None)
        if parser is None:
            raise TypeError(f"%agent {name}: decorate {func.__name__} with @magic_arguments() first")
        parser.prog = f"agent {name}"  # IPython's formatter writes the "%" of the usage itself
        for action in parser._actions:  # argparse %-formats each help ("%agent" would be "%a"…)
            if action.help and "%" in action.help and "%(" not in action.help:
                action.help = action.help.replace("%", "%%")
        COMMANDS[name] = func
        GROUPS[name] = group
        return func

    return register


def cell_magic_parser(name: str, func: Any) -> None:
    """Name a cell magic's parser (``%%agent``, ``%compact``) and show it first in the help."""
    func.parser.prog = name.removeprefix("%")
    CELL_MAGICS[name] = func.parser


def _plugin_commands(runtime: AgentRuntime | None) -> dict[str, PluginCommand]:
    plugins = getattr(runtime, "plugins", None)
    return dict(plugins.commands) if plugins is not None else {}


def dispatch(runtime: AgentRuntime, line: str) -> Any:
    name, _, rest = line.strip().partition(" ")
    name = name or "status"
    func = COMMANDS.get(name)
    plugin_command = _plugin_commands(runtime).get(name) if func is None else None
    if func is None and plugin_command is None:
        known = sorted([*COMMANDS, *_plugin_commands(runtime)])
        raise UsageError(f"%agent: unknown command {name!r}. Commands: {', '.join(known)} "
                         "(%agent help; %%agent runs the agent on a cell).")
    redactor = runtime.redactor()
    with redacted_output(runtime.shell, redactor):
        if func is not None:
            result = func(runtime, rest.strip())
        else:
            result = run_plugin_command(plugin_command, rest.strip())
    return redactor.data(result)  # a value IPython shows as Out[n] (text and containers scrubbed)


def run_plugin_command(plugin_command: Any, rest: str) -> Any:
    """A plugin's ``%agent NAME``: its function with the parsed arguments (its parser's errors and
    ``-h`` as the built-in commands have them), or with the rest of the line."""
    parser = plugin_command.parser
    if parser is None:
        return plugin_command.function(rest)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(shlex.split(rest))
    except SystemExit as exc:
        if exc.code in (0, None):  # -h: argparse printed the help
            return None
        raise UsageError(errors.getvalue().strip() or f"%agent {plugin_command.name}: invalid arguments") from None
    return plugin_command.function(args)


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


def _description(parser: argparse.ArgumentParser | None, fallback: str = "") -> str:
    lines = ((parser.description if parser is not None else None) or fallback or "").strip().splitlines()
    return " ".join(line.strip() for line in lines[:3] if line.strip()).split(". ")[0].rstrip(".")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:  # argparse keeps its actions there; there is no public accessor
        if isinstance(action, argparse._HelpAction) or not action.help:
            continue
        flags = ", ".join(action.option_strings) or action.dest
        # as argparse prints it: "%%" written once, "%(default)s" filled in
        lines.append(f"      {flags}: {parser._get_formatter()._expand_help(action)}")
    return lines


def _grouped(runtime: AgentRuntime | None) -> list[tuple[str, list[tuple[str, argparse.ArgumentParser | None, str]]]]:
    """(group, [(name, parser, description)]) in the help's order: the cell magics, the built-in
    groups, then the plugins' commands."""
    groups: list[tuple[str, list[tuple[str, argparse.ArgumentParser | None, str]]]] = [
        ("Running the agent", [(name, parser, _description(parser)) for name, parser in CELL_MAGICS.items()])]
    for title in GROUP_TITLES:
        names = [n for n in COMMANDS if GROUPS.get(n) == title]
        parsers = [(n, COMMANDS[n].parser) for n in names]  # type: ignore[attr-defined]
        groups.append((title, [(n, p, _description(p)) for n, p in parsers]))
    plugin_commands = _plugin_commands(runtime)
    if plugin_commands:
        groups.append((PLUGINS, [(n, c.parser, f"{_description(c.parser, c.description)} (plugin {c.plugin})")
                                 for n, c in plugin_commands.items()]))
    return [(title, rows) for title, rows in groups if rows]


def help_text(runtime: AgentRuntime | None = None, *, full: bool = False) -> str:
    """Every magic and ``%agent`` command by group, one line each (``full``: with its usage and
    options, as ``%agent help all`` and ``%agent?`` show them)."""
    blocks = []
    for title, rows in _grouped(runtime):
        if full:
            entries = []
            for name, parser, description in rows:
                head = usage(parser) if parser is not None else f"%agent {name} …"
                entries.append("\n".join([head, f"    {description}", *(_options(parser) if parser else [])]))
            blocks.append(f"{title}\n\n" + "\n\n".join(entries))
        else:
            width = max(len(_short_name(name)) for name, _, _ in rows)
            blocks.append(title + "\n" + "\n".join(f"  {_short_name(name):<{width}}  {description}"
                                                      for name, _, description in rows))
    blocks.append("%agent help COMMAND shows one command's usage and options; %agent help all, every one. "
                  "Settings: %agent config; change one with %config Agent.NAME = VALUE (or c.Agent.NAME in "
                  "ipython_config.py).")
    return "\n\n".join(blocks)


def _short_name(name: str) -> str:
    return name if name.startswith("%") else f"%agent {name}"


def one_command_help(runtime: AgentRuntime | None, name: str) -> str | None:
    """``%agent help NAME``: its usage, description and options (None: no such command)."""
    name = name.strip()
    bare = name.removeprefix("%agent ").removeprefix("agent ").strip()
    if bare in COMMANDS:
        return str(COMMANDS[bare].parser.format_help())  # type: ignore[attr-defined]
    plugin_command = _plugin_commands(runtime).get(bare)
    if plugin_command is not None:
        if plugin_command.parser is not None:
            return str(plugin_command.parser.format_help()) + f"\n(from the plugin {plugin_command.plugin})"
        return (f"%agent {bare} [the rest of the line]\n\n{plugin_command.description}\n\n"
                f"(from the plugin {plugin_command.plugin})")
    for cell_magic, parser in CELL_MAGICS.items():
        if bare in (cell_magic, cell_magic.lstrip("%")):
            return parser.format_help()
    return None


@command("help", group=HELP)
@magic_arguments()
@argument("name", nargs="?", default=None, help="one command to explain, or 'all' (default: the list of commands)")
def agent_help(runtime: AgentRuntime, rest: str) -> None:
    """Every magic and %agent command by group; %agent help COMMAND explains one."""
    args = parse_argstring(agent_help, rest)
    if args.name is None or args.name == "all":
        print(help_text(runtime, full=args.name == "all"))
        return
    text = one_command_help(runtime, args.name)
    if text is None:
        known = sorted([*COMMANDS, *_plugin_commands(runtime)])
        raise UsageError(f"%agent help: no command {args.name!r}; commands: {', '.join(known)}")
    print(text)


@command("plugins", group=TOOLS)
@magic_arguments()
def agent_plugins(runtime: AgentRuntime, rest: str) -> None:
    """The plugins: each one's source and what it added (tools, providers, commands, hooks, MCP transports)."""
    parse_argstring(agent_plugins, rest)
    show(runtime.plugins.listing())
