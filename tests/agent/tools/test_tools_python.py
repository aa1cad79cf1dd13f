"""The python tool: a notebook cell run in the tool context's namespace."""

import sys
from pathlib import Path

import pytest

from ipyagent.agent.tools import ToolContext, get_tool


def py(ctx: ToolContext, code: str):
    return get_tool("python").run({"code": code}, ctx)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=str(tmp_path), namespace={})


def test_last_expression_repr_is_returned(ctx):
    out = py(ctx, "x = [1, 2]\nx + [3]")
    assert (out.text, out.is_error, out.details["has_value"]) == ("[1, 2, 3]", False, True)
    assert py(ctx, "'text'").text == "'text'"


def test_none_and_trailing_semicolon_show_nothing(ctx):
    assert py(ctx, "None").text == "(no output)"
    assert py(ctx, "42;").text == "(no output)"
    assert py(ctx, "y = 1").text == "(no output)"


def test_stdout_stderr_and_value_in_order(ctx):
    out = py(ctx, "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7")
    assert out.text == "hello\n[stderr]\nwarn\n42"


def test_namespace_persists_and_is_the_callers(ctx):
    py(ctx, "import math\ndef area(r):\n    return math.pi * r ** 2\ncounter = 1")
    py(ctx, "counter += 1")
    assert py(ctx, "round(area(1), 4), counter").text == "(3.1416, 2)"
    assert ctx.namespace["counter"] == 2 and callable(ctx.namespace["area"])


def test_without_a_namespace_one_is_created_and_kept():
    ctx = ToolContext()
    py(ctx, "z = 5")
    assert ctx.namespace is not None and py(ctx, "z").text == "5"


def test_traceback_shows_only_user_frames(ctx):
    out = py(ctx, "def f():\n    return 1 / 0\nprint('before')\nf()")
    assert out.is_error
    assert out.text.startswith("before\nTraceback (most recent call last):\n")
    assert "return 1 / 0" in out.text and out.text.endswith("ZeroDivisionError: division by zero")
    assert "ipyagent" not in out.text and "_execute" not in out.text


def test_syntax_error_is_reported(ctx):
    out = py(ctx, "x = (")
    assert out.is_error and "SyntaxError" in out.text and "Traceback" not in out.text


def test_system_exit_does_not_escape(ctx):
    out = py(ctx, "import sys\nsys.exit(3)")
    assert out.is_error and out.text.endswith("SystemExit: 3")


def test_repr_failure_is_an_error(ctx):
    out = py(ctx, "class Bad:\n    def __repr__(self):\n        raise ValueError('no repr')\nBad()")
    assert out.is_error and out.text.endswith("ValueError: no repr")


def test_streams_restored_after_success_and_error(ctx):
    before = sys.stdout, sys.stderr
    py(ctx, "print('x')")
    py(ctx, "raise RuntimeError('boom')")
    assert (sys.stdout, sys.stderr) == before


def test_keyboard_interrupt_propagates_and_restores_streams(ctx):
    before = sys.stdout, sys.stderr
    with pytest.raises(KeyboardInterrupt):
        py(ctx, "print('partial')\nraise KeyboardInterrupt")
    assert (sys.stdout, sys.stderr) == before


def test_huge_output_is_tail_truncated_with_full_output_file(ctx):
    out = py(ctx, "for i in range(5000):\n    print(i)")
    body, notice = out.text.rsplit("\n\n", 1)
    lines = body.split("\n")
    assert (lines[0], lines[-1], len(lines)) == ("3000", "4999", 2000)
    path = out.details["full_output_path"]
    assert notice == f"[Showing lines 3001-5000 of 5000. Full output: {path}]"
    assert Path(path).read_text().split("\n")[0] == "0"


def test_control_characters_are_cleaned(ctx):
    assert py(ctx, r"print('a\x00b\x1b[1mc\x1b[0m')").text == "abc"



def test_what_a_call_prints_is_kept_as_a_head_and_a_tail_with_every_line_counted(ctx):
    """Outside a kernel too: 200,000 lines (9.4 MB) leave a head and a tail (the kept file is
    under 120 KB), the notice counts all 200,000 lines, and the line in the middle says how many
    were not kept."""
    out = py(ctx, "for i in range(200_000):\n    print(f'{i:07d}' + '.' * 39)")
    path = Path(out.details["full_output_path"])
    assert path.stat().st_size < 120_000
    kept = path.read_text().splitlines()
    assert kept[0] == "0000000" + "." * 39 and kept[-1] == "0199999" + "." * 39
    marker = next(line for line in kept if line.startswith("[... "))
    assert len(kept) - 1 + int(marker.split()[1].replace(",", "")) == 200_000
    assert out.text.splitlines()[-1].startswith("[Showing lines 198912-200000 of 200000 (50.0KB limit). "
                                                "The start and end of the output (the middle was not kept): ")
