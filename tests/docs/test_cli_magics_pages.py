"""docs/cli.md and docs/magics.md: the reference generated from the parsers (``ipyagent --help``,
``%agent help``; ``docs/_ext/ipyagent_docs.py``) lists every command and every option."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from support.sphinx_pages import page_text


def _parser_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string, and every positional as its usage names it (metavar, else dest)."""
    out = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        positional = action.metavar if isinstance(action.metavar, str) else action.dest
        out += action.option_strings or [positional]
    return out


def test_the_generated_cli_and_magics_pages_list_every_command_and_option(reference_section: Path):
    """The two pages as the site builds them: every parser's commands and options are there."""
    cli_page = page_text((reference_section / "cli.html").read_text(encoding="utf-8"))
    magics_page = page_text((reference_section / "magics.html").read_text(encoding="utf-8"))

    from ipyagent.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert subparsers.choices
    for name, child in subparsers.choices.items():
        assert f"ipyagent {name}" in cli_page, name
        for flag in _parser_options(child):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", cli_page), f"ipyagent {name} {flag}"

    import ipyagent.kernel.magics  # noqa: F401  (registers every %agent command)
    from ipyagent.kernel.magics.commands import CELL_MAGICS, COMMANDS

    magic_parsers = {**CELL_MAGICS, **{f"%agent {n}": f.parser for n, f in COMMANDS.items()}}
    assert len(magic_parsers) > 20
    for name, magic_parser in magic_parsers.items():
        assert name in magics_page, name
        for flag in _parser_options(magic_parser):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", magics_page), f"{name} {flag}"
    for page in (cli_page, magics_page):  # a help string argparse could not expand
        assert "option_strings" not in page and "%(" not in page
