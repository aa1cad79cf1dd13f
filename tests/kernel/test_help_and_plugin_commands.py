"""``%agent help`` grouped (one line a command; ``%agent help COMMAND`` and ``%agent help all`` for
the options), the plugins' commands in it and dispatched, ``%agent plugins``, and the entry ids
that ``%agent context`` shows for ``%agent mask``; in-process (tests/kernel/test_plugins_kernel.py
has the example package in a real kernel)."""

from __future__ import annotations

import argparse
import re

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from ipyagent.kernel.magics import BUILTIN_COMMANDS
from ipyagent.kernel.magics.commands import COMMANDS, dispatch, help_text
from ipyagent.kernel.runtime import AgentRuntime
from ipyagent.plugins import Plugins
from support.shell import run, runtime_of


def _help(ip, arguments: str = "") -> str:
    with capture_output() as cap:
        ip.run_line_magic("agent", f"help {arguments}".strip())
    return cap.stdout


def test_help_lists_every_command_by_group_one_line_each(ip):
    text = _help(ip)
    for title in ("Running the agent", "Sessions", "Status and settings", "Context", "Compaction",
                  "Tools, MCP, skills and plugins", "Replay", "Help"):
        assert f"\n{title}\n" in f"\n{text}"
    listed = re.findall(r"^  %agent (\S+)", text, re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS)
    assert len(text.splitlines()) < 60  # was 120: the options moved to %agent help COMMAND
    sessions = text.split("\nSessions\n")[1].split("\n\n")[0]
    assert "%agent checkout" in sessions and "%agent mask" not in sessions


def test_help_of_one_command_and_of_all(ip):
    mask = _help(ip, "mask")
    # its option's help reads as written ("%agent context"; argparse used to format "%a" away)
    assert "%agent mask [--tool-results-before N] [entry]" in mask
    assert "(as %agent context and the explorer show it)" in " ".join(mask.split())
    assert "what the summary should pay special attention to" in " ".join(_help(ip, "%compact").split())
    full = _help(ip, "all")
    assert "--tool-results-before: hide every tool result" in full and "%agent context and the explorer" in full
    with pytest.raises(UsageError, match="no command 'nope'"):
        ip.run_line_magic("agent", "help nope")


@pytest.fixture
def plugin_runtime(ip):
    """A runtime whose plugins have one command with a parser and one without."""

    def shout(args):
        return " ".join(args.words).upper()

    def echo(rest):
        """Repeat the line as typed."""
        return rest

    parser = argparse.ArgumentParser(description="Say it loudly.")
    parser.add_argument("words", nargs="+", help="what to say")

    class Plugin:
        import ipyagent

        @ipyagent.hookimpl
        def register_commands(self, register):
            register("shout", shout, parser=parser)
            register("echo", echo)

    plugins = Plugins(entry_points=lambda group: [], builtins=[("commands", Plugin())])
    runtime = AgentRuntime(ip, plugins=plugins)
    runtime.load_plugins(BUILTIN_COMMANDS)
    yield runtime
    runtime.plugins.set_disabled(["commands"])


def test_a_plugins_commands_run_and_appear_in_the_help(plugin_runtime, capsys):
    assert dispatch(plugin_runtime, "shout hello there") == "HELLO THERE"
    assert dispatch(plugin_runtime, "echo  keep 'quotes' ") == "keep 'quotes'"
    with pytest.raises(UsageError, match="the following arguments are required: words"):
        dispatch(plugin_runtime, "shout")
    text = help_text(plugin_runtime)
    plugins = text.split("\nFrom plugins\n")[1]
    assert "%agent shout  Say it loudly (plugin commands)" in plugins
    assert "%agent echo   Repeat the line as typed (plugin commands)" in plugins
    dispatch(plugin_runtime, "help shout")
    assert "agent shout [-h] words [words ...]" in capsys.readouterr().out
    with pytest.raises(UsageError, match="Commands: .*echo.*shout"):
        dispatch(plugin_runtime, "nope")


def test_the_plugins_command_lists_the_builtins(ip):
    with capture_output() as cap:
        ip.run_line_magic("agent", "plugins")
    text = cap.outputs[0].data["text/plain"]
    assert "builtin-tools" in text and "tools python, read" in text and "MCP transports stdio, http" in text


def test_context_shows_each_messages_entry_id_that_mask_takes(ip, server):
    server.enqueue_tool_call("ls", {"path": "."})
    server.enqueue_text("listed")
    run(ip, "", "list the folder")
    session = runtime_of(ip).slot().session
    [result] = [e for e in session.entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    with capture_output() as cap:
        ip.run_line_magic("agent", "context")
    text = cap.outputs[0].data["text/plain"]
    assert f"3. toolResult (id {result['id']})" in text
    ip.run_line_magic("agent", f"mask {result['id']}")
    assert result["id"] in [e["id"] for e in session.masked_entries()]
