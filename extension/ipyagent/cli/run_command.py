"""``ipyagent run NOTEBOOK [-o OUT] [--timeout S]``: execute a notebook headlessly (nbclient, a real
kernel), answer the ipyagent bridge, and write the sessions into the output's metadata (in the
layout the labextension writes, so opening the output changes nothing)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TextIO

from ipyagent.agent.redaction import Redactor, assigned_secrets
from ipyagent.agent.tools.truncate import clean_output
from ipyagent.cli.common import CliError, command
from ipyagent.text import one_line


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the notebook to execute (.ipynb)")
    parser.add_argument("-o", "--output", help="where to write the executed notebook (default: in place)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600; 0: none)")
    parser.add_argument("--kernel", default=None, help="kernel name (default: the notebook's kernelspec)")
    parser.add_argument("--replay", action="store_true",
                        help="every recorded %%%%agent cell takes its responses from the recorded session "
                             "(no provider needed; recorded tool calls are not run again)")
    parser.add_argument("--replay-tools", action="store_true",
                        help="with --replay: run recorded tool calls again and report results that differ")
    parser.add_argument("--live", action="store_true", help="never replay, even where no provider is configured")
    parser.add_argument("--quiet", "-q", action="store_true", help="no line per cell on stderr")


def cell_lines(stream: TextIO, redactor: Redactor | None = None) -> Callable[[int, int, float, str], None]:
    """One line per executed code cell on ``stream``: "cell 3/12  4.1 s  %%agent", dimmed only on
    a terminal (no escape codes in a log or a pipe, nor with NO_COLOR); the cell's first line
    scrubbed of keys (``%env OPENAI_API_KEY=…``) before it is cut to length."""
    dim = stream.isatty() and not os.environ.get("NO_COLOR")
    scrub = (redactor or Redactor.configured()).text

    def line(n: int, total: int, seconds: float, source: str) -> None:
        head = one_line(scrub(next((ln for ln in source.splitlines() if ln.strip()), "")), 60)
        head = "".join(ch for ch in head if ch.isprintable())  # the notebook's text: no escape sequences
        text = f"ipyagent run: cell {n}/{total}  {seconds:6.1f} s  {head}".rstrip()
        print(f"\033[2m{text}\033[0m" if dim else text, file=stream, flush=True)

    return line


def run_redactor(path: str) -> Redactor:
    """What every line ``ipyagent run`` prints is scrubbed with (its stderr is often a CI log): the
    keys of this environment, and those the notebook's cells set themselves (``%env NAME=…``,
    ``os.environ[…] = …``, ``export NAME=…``), which the kernel has and this process does not."""
    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells") or []
        sources = ["".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                   for c in cells if isinstance(c, dict)]
    except (OSError, ValueError, AttributeError, TypeError):  # the run itself says what is wrong with the file
        sources = []
    return Redactor.configured(extra=[value for source in sources for value in assigned_secrets(source)])


def _for_terminal(text: str, stream: TextIO) -> str:
    """The kernel's traceback is coloured (ANSI escapes): kept for a terminal, plain text for a
    file, a pipe or a CI log."""
    isatty = getattr(stream, "isatty", None)
    return text if isatty is not None and isatty() else clean_output(text)


@command("run", _configure_run)
def run_run(args: argparse.Namespace) -> int:
    """Execute a notebook headlessly, keeping its sessions."""
    try:
        from ipyagent.bridge.headless import run_notebook
    except ImportError as exc:  # nbclient / nbformat missing
        raise CliError(f"ipyagent run needs nbclient and nbformat ({exc}); pip install 'ipyagent[test]'") from None
    from ipyagent.store.ipynb import NotebookError

    redactor = run_redactor(args.notebook)

    def say(text: str, stream: TextIO = sys.stderr) -> None:
        print(redactor.text(text), file=stream)

    try:
        if args.replay and args.live:
            raise CliError("--replay and --live exclude each other")
        replay = "on" if args.replay else "off" if args.live else None
        outcome = run_notebook(args.notebook, args.output, timeout=args.timeout or None, kernel_name=args.kernel,
                               replay=replay, replay_tools=args.replay_tools,
                               progress=None if args.quiet else cell_lines(sys.stderr, redactor))
    except FileNotFoundError:
        raise CliError(f"no such notebook: {args.notebook}") from None
    except NotebookError as exc:
        raise CliError(redactor.text(str(exc))) from None
    except KeyboardInterrupt:
        say(f"ipyagent run: interrupted; wrote {args.output or args.notebook} with every delivered session")
        return 130
    target = args.output or args.notebook
    sessions = outcome.sessions.sessions if outcome.sessions is not None else {}
    summary = ", ".join(f"{name} ({len(s.entries)} entries)" for name, s in sessions.items()) or "no sessions"
    say(f"ipyagent run: wrote {target}: {summary}", sys.stdout)
    for problem in outcome.problems:
        say(f"ipyagent run: {problem}")
    if outcome.replies_recovered:
        say(f"ipyagent run: warning: {outcome.replies_recovered} execute replies were found only by the "
            "watchdog's extra poll (each cost a few seconds)")
    if outcome.error:
        if outcome.cell_error:  # the failing cell's traceback, then the one line that sums it up
            say(_for_terminal(outcome.cell_error.rstrip(), sys.stderr))
        say(f"ipyagent run: failed: {outcome.error} (the output notebook holds every delivered session)")
        return 1
    return 0
