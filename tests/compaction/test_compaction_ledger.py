"""The artifact ledger (compaction/ledger.py): kernel variables, shell commands, tool errors and
notebook cells of the summarised work, made without a model, appended to the summary next to
Pi's file lists, stored in ``details["artifacts"]`` and carried from compaction to compaction."""

from __future__ import annotations

import json

import pytest

from ipyagent.agent.replayer import Recording, ReplayDescriber, split_recorded_summary
from ipyagent.compaction.compact import compact
from ipyagent.compaction.ledger import (
    MAX_ERRORS,
    MAX_VARIABLES,
    bound_names,
    build_ledger,
    shell_escapes,
    split_appendix,
)
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.hooks import HookRegistry
from ipyagent.kernel.ports.namespace import describe_value, namespace_describer
from ipyagent.session.entries import compaction_entry
from kernel_support import SETUP, fake_provider, notebook
from support.builders import assistant, call, new_session, tool_result
from support.builders import user as _user

KEEP = CompactionSettings(keep_recent_tokens=30)


def summarizer(text: str) -> ScriptedSummarizer:
    """Answers every request: ``text`` for the history, a turn-prefix summary for a split turn."""
    return ScriptedSummarizer(fn=lambda request: text if request.kind == "history" else "PREFIX")


# ---- names from code ---------------------------------------------------------------------------


def test_bound_names_cover_every_binding_form():
    code = "\n".join([
        "import numpy as np, os.path",
        "from math import pi as PI, tau",
        "from os import *",
        "x, (y, *z) = 1, (2, 3)",
        "a += 1",
        "b: int = 3",
        "c: int",                       # an annotation alone binds nothing
        "for i, j in []: pass",
        "with open('f') as fh, open('g') as (g1, g2): pass",
        "def f():\n    inner = 1",       # locals of a def are not namespace variables
        "class K:\n    attr = 2",
        "if (w := 5):\n    q = 1\nelse:\n    r = 3",
        "try:\n    t1 = 1\nexcept ValueError as e:\n    t2 = 2\nfinally:\n    t3 = 3",
        "del q",
        "[v for v in range(3) if (cw := v)]",
        "obj.attr = 1; d['k'] = 2",     # mutations, not bindings
        "_ = 1; __x__ = 2",
    ])
    bound, deleted = bound_names(code)
    assert bound == ["np", "os", "PI", "tau", "x", "y", "z", "a", "b", "i", "j", "fh", "g1", "g2", "f", "K", "w",
                     "r", "t1", "t2", "t3", "cw"]
    assert deleted == ["q"]


def test_ipython_syntax_is_read_and_code_that_does_not_parse_is_skipped():
    code = "files = !ls data\n!pip install tqdm\n%matplotlib inline\nnp?\nn = len(files)"
    assert bound_names(code) == (["files", "n"], [])
    assert shell_escapes(code) == ["ls data", "pip install tqdm"]
    assert bound_names("%%time\ntotal = sum(range(9))") == (["total"], [])
    assert bound_names("%%bash\nx=1") == ([], [])  # not Python
    assert bound_names("def broken(:\n    y = 2") == ([], [])
    assert bound_names("s = '''is it?\n'''") == (["s"], [])


# ---- the ledger of messages --------------------------------------------------------------------


def user(text: str, **extra) -> dict:
    return {**_user(text), **extra}  # cellId / executionCount ride on the message, as %%agent writes them


def _python(call_id: str, code: str) -> dict:
    return assistant("", call(call_id, "python", code=code))


def test_ledger_of_messages_collects_variables_commands_errors_and_cells():
    messages = [
        user("load the data", cellId="cell-a", executionCount=3),
        _python("c1", "import json\nrows = [1, 2, 3]\nrows2 = rows * 2"),
        tool_result("c1", "(no output)", name="python"),
        assistant("", call("c2", "bash", command="ls -la\n  data/")),
        tool_result("c2", "total 0", name="bash"),
        _python("c3", "rows = rows2\nboom()"),
        tool_result("c3", "Traceback (most recent call last):\n  File \"<agent>\", line 2\n    boom()\n"
                    "NameError: name 'boom' is not defined", name="python", is_error=True),
        {"role": "bashExecution", "command": "cat .env", "output": "SECRET=1", "exitCode": 0,
         "excludeFromContext": True, "timestamp": 1},
        {"role": "bashExecution", "command": "pwd", "output": "/tmp", "exitCode": 0, "timestamp": 2},
    ]
    ledger = build_ledger(messages, [f"e{i}" for i in range(len(messages))])
    assert list(ledger.variables) == ["json", "rows2", "rows"]  # rebinding moves rows last
    assert ledger.variables["rows"].entryId == "e5" and ledger.variables["json"].entryId == "e1"
    assert [(c.command, c.entryId) for c in ledger.commands] == [("ls -la data/", "e3"), ("pwd", "e8")]
    [error] = ledger.errors
    assert error.tool == "python" and error.entryId == "e6"
    assert error.text == "File \"<agent>\", line 2 | boom() | NameError: name 'boom' is not defined"
    [cell] = ledger.cells
    assert (cell.executionCount, cell.cellId, cell.prompt, cell.entryId) == (3, "cell-a", "load the data", "e0")
    text = ledger.text()
    assert "cat .env" not in text and "SECRET" not in text  # a user's !!cmd stays out of the model's view
    assert text.startswith("\n\n<kernel-variables>\njson [entry e1]\nrows2 [entry e1]\nrows [entry e5]\n"
                           "</kernel-variables>\n\n<shell-commands>\nls -la data/\npwd\n</shell-commands>")
    assert "<tool-errors>\npython [entry e6]: File \"<agent>\", line 2 | boom() | NameError" in text
    assert text.endswith("<notebook-cells>\ncell 3 (id cell-a): load the data\n</notebook-cells>")


def test_describe_fills_type_and_shape_and_marks_what_is_gone():
    class Grid:
        shape = (3, 4)

    namespace = {"grid": Grid(), "rows": [1, 2], "np": json, "f": len, "K": Grid, "n": 7}
    ledger = build_ledger([_python("c", "grid = Grid()\nrows = [1, 2]\nimport json as np\nf = len\nK = Grid\n"
                                        "n = 7\ngone = 1")], ["e1"])
    ledger.describe(namespace_describer(namespace))
    described = {v.name: (v.type, v.defined) for v in ledger.variables.values()}
    assert described == {"grid": ("Grid, shape (3, 4)", True), "rows": ("list, len 2", True),
                         "np": ("module json", True), "f": ("function", True),
                         "K": ("class test_describe_fills_type_and_shape_and_marks_what_is_gone.<locals>.Grid", True),
                         "n": ("int", True), "gone": (None, False)}
    assert "grid: Grid, shape (3, 4) [entry e1]" in ledger.text()
    assert "gone: not defined now [entry e1]" in ledger.text()
    del namespace["rows"]
    ledger.describe(namespace_describer(namespace))
    assert "rows: not defined now (was list, len 2) [entry e1]" in ledger.text()

    def broken(names):
        raise RuntimeError("a describe callback that fails")

    before = ledger.text()
    ledger.describe(broken)  # keeps what it knew
    assert ledger.text() == before


def test_describe_value_is_cheap_and_never_raises():
    class Exploding:
        @property
        def shape(self):
            raise RuntimeError("no")

    class Lazy:
        def __len__(self):
            raise AssertionError("len of an arbitrary object must not be called")

    assert describe_value(Exploding()) == "Exploding"
    assert describe_value(Lazy()) == "Lazy"
    assert describe_value({"a": 1}) == "dict, len 1"
    assert describe_value(type("Weird", (), {"shape": "not a tuple"})()) == "Weird"


def test_caps_keep_the_newest_and_say_how_many_were_left_out():
    code = "\n".join(f"v{i} = {i}" for i in range(MAX_VARIABLES + 5))
    errors = [tool_result(f"c{i}", f"Error {i}", name="bash", is_error=True) for i in range(MAX_ERRORS + 2)]
    ledger = build_ledger([_python("c", code), *errors])
    assert len(ledger.variables) == MAX_VARIABLES and "v0" not in ledger.variables and f"v{MAX_VARIABLES + 4}" in ledger.variables
    assert [e.text for e in ledger.errors][0] == "Error 2"
    assert "(5 earlier omitted)" in ledger.text() and "(2 earlier omitted)" in ledger.text()
    carried = build_ledger([], [], {"artifacts": ledger.to_details()})
    assert carried.omitted == {"variables": 5, "errors": 2} and carried.text() == ledger.text()


def test_hostile_details_are_skipped_not_trusted():
    details = {"readFiles": [], "artifacts": {
        "variables": [{"name": "ok", "type": "int"}, {"name": "not a name; rm -rf"}, {"name": 5}, "junk",
                      {"name": "big", "type": "x" * 10_000, "defined": "yes"}],
        "commands": [{"command": "line one\nline two"}, {"command": None}, [1]],
        "errors": [{"text": "E" * 5000, "tool": {"x": 1}}],
        "cells": [{"executionCount": True, "cellId": 7, "prompt": "p"}],
        "omitted": {"variables": -3, "evil": 10, "commands": 2},
    }}
    ledger = build_ledger([], [], details)
    assert [(v.name, len(v.type or "")) for v in ledger.variables.values()] == [("ok", 3), ("big", 200)]
    assert ledger.variables["big"].defined is None
    assert [c.command for c in ledger.commands] == ["line one line two"]
    assert ledger.errors[0].tool == "tool" and len(ledger.errors[0].text) == 300
    assert (ledger.cells[0].executionCount, ledger.cells[0].cellId) == (None, None)
    assert ledger.omitted == {"commands": 2}
    assert build_ledger([], [], {"artifacts": "nope"}).is_empty()
    flood = {"artifacts": {"commands": [{"command": f"c{i}"} for i in range(100_000)]}}
    assert len(build_ledger([], [], flood).commands) == 30


# ---- through compaction ------------------------------------------------------------------------


def _work(session, prompt: str, code: str, *, cell: int) -> None:
    session.append_message(user(prompt, cellId=f"cell-{cell}", executionCount=cell))
    cid = f"call-{len(session)}"
    session.append_message(_python(cid, code))
    session.append_message(tool_result(cid, "(no output)", name="python"))
    session.append_message(assistant("done " + "x" * 200))


def test_two_compactions_carry_the_ledger_and_describe_everything_again():
    namespace: dict = {}
    describe = namespace_describer(namespace)
    s = new_session()
    _work(s, "make rows", "rows = list(range(10))", cell=1)
    namespace["rows"] = list(range(10))
    _work(s, "more", "x = 1", cell=2)
    first = s.compact(summarizer("FIRST"), KEEP, describe=describe)
    assert first["details"]["readFiles"] == [] and first["details"]["modifiedFiles"] == []
    assert [v["name"] for v in first["details"]["artifacts"]["variables"]] == ["rows", "x"]  # x: the turn prefix
    assert "rows: list, len 10" in first["summary"]
    _work(s, "grid", "class Grid:\n    shape = (2, 5)\ngrid = Grid()", cell=3)
    namespace.update(Grid=type("Grid", (), {"shape": (2, 5)}), rows=list(range(12)), x=1)
    namespace["grid"] = namespace["Grid"]()
    _work(s, "final", "y = 2", cell=4)
    second = s.compact(summarizer("SECOND"), KEEP, describe=describe)
    body, appendix = split_appendix(second["summary"])
    assert body.startswith("SECOND")
    variables = appendix.split("<kernel-variables>\n")[1].split("\n</kernel-variables>")[0].splitlines()
    assert variables[0].startswith("rows: list, len 12 [entry ")  # from before the first compaction, read again
    assert [v.split(":")[0].split(" [")[0] for v in variables] == ["rows", "x", "Grid", "grid", "y"]
    assert "grid: Grid, shape (2, 5)" in appendix
    assert [c["executionCount"] for c in second["details"]["artifacts"]["cells"]] == [1, 2, 3, 4]
    # the plan that `ipyagent compact --dry-run --json` prints keeps exactly its fields
    _work(s, "again", "z = 3", cell=5)
    assert list(s.prepare_compaction(KEEP).to_summary_dict()) == [
        "first_kept_entry_id", "is_split_turn", "tokens_before", "messages_to_summarize", "turn_prefix_messages",
        "read_files", "modified_files", "previous_summary"]


def test_without_a_kernel_names_are_listed_and_earlier_descriptions_kept():
    s = new_session()
    _work(s, "a", "rows = [1]", cell=1)
    _work(s, "b", "x = 1", cell=2)
    s.compact(summarizer("ONE"), KEEP, describe=namespace_describer({"rows": [1]}))
    _work(s, "c", "y = 2", cell=3)
    _work(s, "d", "z = 2", cell=4)
    entry = s.compact(summarizer("TWO"), KEEP)  # describe=None: outside a kernel
    assert "rows: list, len 1 [entry" in entry["summary"] and "\ny [entry" in entry["summary"]


def test_a_hook_compaction_restarts_the_ledger_like_the_file_lists():
    hooks = HookRegistry()
    s = new_session(hooks=hooks)
    _work(s, "a", "rows = [1]", cell=1)
    _work(s, "b", "x = 1", cell=2)
    s.compact(summarizer("ONE"), KEEP)
    hooks.on("session_before_compact", lambda event: {"compaction": {"summary": "BY HOOK"}})
    _work(s, "c", "y = 2", cell=3)
    hooked = s.compact(ScriptedSummarizer([]), KEEP)
    assert hooked["summary"] == "BY HOOK" and hooked.get("details") is None
    hooks.handlers["session_before_compact"].clear()
    _work(s, "d", "z = 2", cell=4)
    _work(s, "e", "w = 2", cell=5)
    after = s.compact(summarizer("THREE"), KEEP)
    names = [v["name"] for v in after["details"]["artifacts"]["variables"]]
    assert "rows" not in names and "z" in names


def test_replay_strips_the_ledger_and_answers_describe_from_the_recording():
    s = new_session()
    _work(s, "a", "rows = [1]", cell=1)
    _work(s, "b", "x = 1", cell=2)
    entry = s.compact(summarizer("## Goal\nG"), KEEP, describe=namespace_describer({"rows": [1, 2]}),
                      extra={"cellId": "compact-cell"})
    assert split_recorded_summary(entry["summary"]) == ("## Goal\nG", "PREFIX")
    cell = Recording.from_entries(s.path()).cell("compact-cell")
    describer = ReplayDescriber(cell, fallback=lambda names: {n: "from the live namespace" for n in names})
    assert describer(["rows", "new"]) == {"rows": "list, len 2", "new": "from the live namespace"}


# ---- in a real kernel --------------------------------------------------------------------------


@pytest.mark.kernel
def test_in_a_kernel_the_latest_summary_lists_the_agents_variables_with_type_and_shape(tmp_path):
    from ipyagent.bridge.headless import execute_notebook

    first_code = ("class Grid:\n    shape = (3, 4)\n\ngrid = Grid()\nnames = ['a', 'b']\nimport json as js\n"
                  "print('cells ' * 500)")
    second_code = "pairs = {n: i for i, n in enumerate(names)}\nfor k in pairs:\n    print(k * 1000)"
    with fake_provider() as server:
        for _ in range(4):
            server.enqueue_summary("## Goal\nGrid and names.")
        server.enqueue_tool_call("python", {"code": first_code}, text="Making a grid.")
        server.enqueue_text("Grid made. " + "ok " * 60)
        server.enqueue_tool_call("python", {"code": second_code})
        server.enqueue_text("Pairs made. " + "ok " * 60)
        server.enqueue_text("Nothing else. " + "ok " * 60)
        nb = notebook(SETUP + "%config Agent.tool_approval = 'auto'\n%config Agent.keep_recent_tokens = 40",
                      "%%agent\nMake a grid and a list of names.", "%compact",
                      "%%agent\nPair the names with numbers.", "%%agent\nAnything else?", "%compact")
        out = execute_notebook(nb, timeout=120, cwd=str(tmp_path))
        assert out.ok, out.error
        assert server.summary_calls >= 2
    session = out.nb["metadata"]["ipyagent"]["sessions"]["default"]
    first, second = [e for e in session["entries"] if e["type"] == "compaction"]
    assert "grid: Grid, shape (3, 4)" in first["summary"]
    summary = second["summary"]
    for line in ("Grid: class Grid [entry", "grid: Grid, shape (3, 4) [entry", "names: list, len 2 [entry",
                 "js: module json [entry", "pairs: dict, len 2 [entry", "k: str, len 1 [entry"):
        assert line in summary, summary
    assert "<notebook-cells>\ncell 2 (id cell-1): Make a grid and a list of names." in summary
    variables = {v["name"]: v for v in second["details"]["artifacts"]["variables"]}
    assert variables["grid"]["type"] == "Grid, shape (3, 4)" and variables["grid"]["defined"] is True
    assert json.dumps(second["details"]).count("readFiles") == 1


def test_the_ledger_is_appended_once_and_not_sent_back_to_the_summariser():
    s = new_session()
    _work(s, "a", "rows = [1]", cell=1)
    s.append_message(assistant("", call("r1", "read", path="data.csv")))
    s.append_message(tool_result("r1", "a,b"))
    _work(s, "b", "x = 1", cell=2)
    first = s.compact(summarizer("FIRST"), KEEP)
    assert "<read-files>\ndata.csv" in first["summary"] and "<kernel-variables>" in first["summary"]
    _work(s, "c", "y = 2", cell=3)
    _work(s, "d", "z = 3", cell=4)
    scripted = summarizer("SECOND")
    second = s.compact(scripted, KEEP)
    previous = scripted.requests[0].prompt.split("<previous-summary>\n")[1].split("\n</previous-summary>")[0]
    assert "<read-files>\ndata.csv" in previous  # Pi's file lists stay in the previous summary, as in Pi
    assert "<kernel-variables>" not in previous and "<notebook-cells>" not in previous
    assert second["summary"].count("<kernel-variables>") == 1 and second["summary"].count("<read-files>") == 1
    # a compaction with nothing new to summarise keeps the previous text, with one fresh appendix
    s.append(compaction_entry(second["summary"], s.path()[-1]["id"], 100, details=second["details"]))
    s.append_message(user("only a new turn " + "w" * 300, executionCount=5))
    s.append_message(assistant("ok " + "v" * 300))
    plan = s.prepare_compaction(CompactionSettings(keep_recent_tokens=10))
    assert plan is not None and [m["role"] for m in plan.messages_to_summarize] == []
    third = compact(plan, summarizer("UNUSED"))
    assert third.summary.count("<kernel-variables>") == 1 and third.summary.count("<read-files>") == 1


def test_a_cell_is_listed_with_the_prompt_as_typed_not_the_activity_block():
    """A prompt that carries the notebook-activity block keeps what the user typed in ``cellPrompt``:
    the ledger lists that, as ``cell N (id …)`` (issue 28, item 10)."""
    block = "<notebook-activity>\nWhat happened in the notebook since the previous prompt: …\n</notebook-activity>"
    prompt = {"role": "user", "content": [{"type": "text", "text": block}, {"type": "text", "text": "plot it"}],
              "cellPrompt": "plot it", "executionCount": 7, "cellId": "c-7", "timestamp": 1}
    [cell] = build_ledger([prompt], ["e0"]).cells
    assert cell.prompt == "plot it"
    assert build_ledger([prompt], ["e0"]).text().endswith("<notebook-cells>\ncell 7 (id c-7): plot it\n</notebook-cells>")
