"""Every output of every ``%agent`` command goes through the one redactor (display/redacted_output.py,
run by the commands' dispatch): a command registered here, which knows nothing of redaction, prints
a secret in pieces and on stderr, displays it in a bundle, returns it and raises with it, and none
of it reaches the cell's outputs."""

from __future__ import annotations

import sys

import pytest
from IPython.core.error import UsageError
from IPython.core.magic_arguments import magic_arguments
from IPython.display import display
from IPython.utils.capture import capture_output

from ipyagent.kernel.magics.commands import COMMANDS, GROUPS, STATUS_AND_SETTINGS, command

SECRET = "sk-proj-one-redactor-for-every-command-77"


@pytest.fixture
def careless_command():
    @command("careless", STATUS_AND_SETTINGS)
    @magic_arguments()
    def careless(runtime, rest):
        """A command that forgot about secrets."""
        print("the key is", SECRET[:10], end="")
        print(SECRET[10:], "and more")
        print(f"on stderr: {SECRET}", file=sys.stderr)
        display({"text/plain": f"plain {SECRET}", "text/html": f"<b>{SECRET}</b>"}, raw=True)
        if rest == "fail":
            raise UsageError(f"%agent careless: bad value {SECRET}")
        return f"returned {SECRET}"

    yield
    COMMANDS.pop("careless")
    GROUPS.pop("careless", None)


def test_a_command_that_forgets_redaction_still_prints_no_secret(ip, monkeypatch, careless_command):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with capture_output() as cap:
        returned = ip.run_line_magic("agent", "careless")
    assert "the key is *** and more" in cap.stdout and "on stderr: ***" in cap.stderr
    assert [o.data for o in cap.outputs] == [{"text/plain": "plain ***", "text/html": "<b>***</b>"}]
    assert returned == "returned ***"
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("agent", "careless fail")
    assert SECRET not in str(raised.value) and "bad value ***" in str(raised.value)
