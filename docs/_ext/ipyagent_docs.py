"""The generated reference pages: ``ipyagent`` on the command line (from its argparse parsers) and
the magics (from the parsers ``%agent help`` prints), as Sphinx directives.

    ```{ipyagent-cli}
    ```
    ```{ipyagent-magics}
    ```

Each command becomes a rubric with an anchor (``cli-run``, ``magic-agent-mask``), its usage line,
what it does, and every option with its help, so the pages list whatever the parsers accept.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


@dataclass
class Option:
    flags: str  # "--output OUTPUT, -o OUTPUT" or a positional's name
    help: str


@dataclass
class Reference:
    name: str  # "ipyagent run", "%agent mask", "%%agent"
    anchor: str
    usage: str
    description: str
    options: list[Option] = field(default_factory=list)


def _expanded(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An option's help as argparse prints it (``%(default)s`` filled in, ``%%`` as ``%``)."""
    formatter = parser._get_formatter()  # argparse has no public way to expand one action's help
    return " ".join(formatter._expand_help(action).split())


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return ", ".join(f"{flag} {metavar}" for flag in action.option_strings)


def _options(parser: argparse.ArgumentParser) -> list[Option]:
    return [Option(_flags(action), _expanded(parser, action) if action.help else "")
            for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]


def _usage(parser: argparse.ArgumentParser) -> str:
    text = " ".join(parser.format_usage().split())
    return text.removeprefix(":: ").removeprefix("usage: ")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def cli_reference() -> list[Reference]:
    """``ipyagent`` and each of its commands, in the order ``ipyagent --help`` lists them."""
    from ipyagent.cli import build_parser

    parser = build_parser()
    out = [Reference("ipyagent", "cli", _usage(parser), " ".join((parser.description or "").split()),
                     _options(parser))]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in subparsers._choices_actions}
    for name, child in subparsers.choices.items():
        out.append(Reference(f"ipyagent {name}", f"cli-{name}", _usage(child), helps.get(name, ""), _options(child)))
    return out


def magics_reference() -> list[Reference]:
    """``%%agent``, ``%compact`` and every ``%agent`` command, in the order ``%agent help`` lists them."""
    import ipyagent.kernel.magics  # noqa: F401  (the command modules register their parsers)
    from ipyagent.kernel.magics.commands import CELL_MAGICS, COMMANDS

    parsers = [(name, parser) for name, parser in CELL_MAGICS.items()]
    parsers += [(f"%agent {name}", COMMANDS[name].parser) for name in COMMANDS]  # type: ignore[attr-defined]
    out = []
    for name, parser in parsers:
        usage = _usage(parser).replace(" [-h]", "")
        description = " ".join((parser.description or "").split())
        out.append(Reference(name, "magic-" + _anchor(name), usage, description, _options(parser)))
    return out


class _ReferenceDirective(SphinxDirective):
    has_content = False

    def references(self) -> list[Reference]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        out: list[nodes.Node] = []
        for ref in self.references():
            rubric = nodes.rubric(ref.name, "", nodes.literal(ref.name, ref.name), ids=[ref.anchor])
            out.append(rubric)
            out.append(nodes.literal_block(ref.usage, ref.usage, language="text"))
            if ref.description:  # as the parser says it: no smart quotes, "--" stays two hyphens
                out.append(nodes.paragraph(ref.description, ref.description, support_smartquotes=False))
            if ref.options:
                items = nodes.bullet_list()
                for option in ref.options:
                    para = nodes.paragraph(support_smartquotes=False)
                    para += nodes.literal(option.flags, option.flags)
                    if option.help:
                        para += nodes.Text(": " + option.help)
                    items += nodes.list_item("", para)
                out.append(items)
        return out


class CliDirective(_ReferenceDirective):
    def references(self) -> list[Reference]:
        return cli_reference()


class MagicsDirective(_ReferenceDirective):
    def references(self) -> list[Reference]:
        return magics_reference()


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("ipyagent-cli", CliDirective)
    app.add_directive("ipyagent-magics", MagicsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
