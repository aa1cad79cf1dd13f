"""Interpolation in %%agent prompts: ``{In[n]}``, ``{Out[n]}``, ``{Err[n]}``, ``{name}``; anything
else in braces untouched; ``{{…}}`` escapes. The pure function against a plain lookup, then the
magic in an IPython shell against the fake provider (real kernels: test_kernel_notebook_context.py)."""

from __future__ import annotations

import json

import pytest
from IPython.utils.capture import capture_output

from ipyagent.agent.prompt.interpolate import interpolate
from ipyagent.kernel import extension
from ipyagent.testing import FakeProviderServer
from support.shell import extension_shell


class Lookup:
    def __init__(self, sources=None, outputs=None, errors=None, variables=None):
        self.sources, self.outputs = sources or {}, outputs or {}
        self.errors, self.variables = errors or {}, variables or {}

    def source(self, count):
        return self.sources.get(count)

    def output(self, count):
        return self.outputs.get(count)

    def error(self, count):
        return self.errors.get(count)

    def variable(self, name):
        return (repr(self.variables[name]), type(self.variables[name]).__name__) if name in self.variables else None


LOOKUP = Lookup({3: "df = load()"}, {4: "42"}, {5: "KeyError: 'month'"}, {"xs": [1, 2, 3]})


def test_cells_and_variables_are_filled_in_and_named():
    result = interpolate("why {In[3]} then {Out[4]} and {Err[5]} with {xs}?", LOOKUP)
    body, note = result.text.split("\n\n[ipyagent ")
    assert body == "why df = load() then 42 and KeyError: 'month' with [1, 2, 3]?"
    assert [i.ref for i in result.items] == ["{In[3]}", "{Out[4]}", "{Err[5]}", "{xs}"]
    assert "{In[3]} = the source of cell [3]" in note and "{xs} = repr of `xs` (list)" in note


def test_anything_else_in_braces_is_left_alone():
    text = 'a dict {"a": {"b": 1}}, an f-string f"{name}", {unknown}, {In[x]}, {{In[3]}}, {{xs}}, {'
    result = interpolate(text, LOOKUP)
    body, note = result.text.split("\n\n")
    assert body == text.replace("{{In[3]}}", "{In[3]}").replace("{{xs}}", "{xs}")
    assert not result.items and result.escaped == 2
    # a name in braces that stands alone, with no such variable, is said (the model would take it
    # for a value it was given: after a restart, {by_region} no longer exists); code in quotes is not
    assert result.unknown == ["{unknown}"]
    assert note == ("[ipyagent left as written (no variable of that name in the kernel, whose namespace may be "
                    "new): {unknown}]")


def test_missing_cells_stay_as_written_and_are_reported():
    result = interpolate("see {Err[9]} and {Out[1]}", LOOKUP)
    assert result.text.startswith("see {Err[9]} and {Out[1]}")
    assert "left as written (nothing recorded): {Err[9]}, {Out[1]}" in result.text


def test_a_cell_number_of_thousands_of_digits_is_left_as_written_and_reported():
    """Python refuses int() of a string over 4,300 digits: such a reference is no cell (issue 19)."""
    huge = "9" * 5000
    result = interpolate(f"explain {{Out[{huge}]}} and {{In[3]}}", LOOKUP)
    assert result.text.startswith(f"explain {{Out[{huge}]}} and df = load()")
    assert [i.ref for i in result.items] == ["{In[3]}"]
    assert result.missing == ["{Out[999999999999999…]}"] and len(result.note()) < 200
    assert interpolate("{Err[1234567890]}", LOOKUP).missing == ["{Err[1234567890]}"]


def test_long_and_multiline_values():
    lookup = Lookup({2: "for i in range(3):\n    print(i)"}, variables={"big": "x" * 10_000})
    result = interpolate("explain {In[2]} and {big}", lookup, max_chars=500)
    assert "\n```python\nfor i in range(3):\n    print(i)\n```\n" in result.text
    assert "characters cut" in result.text and result.items[1].cut and result.items[1].chars == 10_002
    assert len(result.text) < 1000


# ---- the magic -----------------------------------------------------------------------------------


@pytest.fixture
def ip(monkeypatch, tmp_path):
    with FakeProviderServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
        monkeypatch.chdir(tmp_path)
        with extension_shell() as (shell, _):
            yield shell, server


def test_the_magic_interpolates_and_keeps_the_typed_prompt(ip):
    shell, server = ip
    source_count = shell.execution_count
    shell.run_cell("interp_items = ['a', 'b']\nlen(interp_items)", store_history=True)
    error_count = shell.execution_count
    shell.run_cell("{}['missing']", store_history=True)
    server.enqueue_text("done")
    typed = "Look at {In[%d]} = {Out[%d]} and {Err[%d]}; {interp_items}; {{interp_items}}" % (
        source_count, source_count, error_count)
    with capture_output() as cap:
        shell.run_cell_magic("agent", "", typed)
    sent = server.requests[-1].body["messages"][-1]["content"]
    sent = sent if isinstance(sent, str) else json.dumps(sent)
    assert "interp_items = ['a', 'b']" in sent and "= 2 and" in sent
    assert "KeyError: 'missing'" in sent and "['a', 'b']; {interp_items}" in sent
    notes = [o.data["text/plain"] for o in cap.outputs if "text/plain" in o.data and "filled in" in o.data["text/plain"]]
    assert notes and f"{{Err[{error_count}]}} = the error of cell [{error_count}]" in notes[0]
    runtime = extension.get_runtime(shell)
    user = [e["message"] for e in runtime.slot().session.entries if e["type"] == "message"
            and e["message"]["role"] == "user"][-1]
    assert user["cellPrompt"] == typed
    # %agent tree shows what was typed, not the filled-in text or the activity block
    with capture_output() as cap:
        shell.run_line_magic("agent", "tree")
    assert "Look at {In[" in cap.stdout and "notebook-activity" not in cap.stdout
