"""The approval question shows the whole call, with nothing invisible, or refuses to ask."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from ipyagent.agent.tools import ToolContext, get_tool, run_tool_call
from ipyagent.display.approval_question import make_approver

MAX_SHOWN_CHARS, WIDTH = 20_000, 100


def approval_text(*args: Any, **kwargs: Any) -> str:
    from ipyagent.display.approval_question import approval_text

    return approval_text(*args, **kwargs)


def visible_lines(*args: Any, **kwargs: Any) -> list[tuple[bool, str]]:
    from ipyagent.display.approval_question import visible_lines

    return visible_lines(*args, **kwargs)


class Frontend:
    """What the user sees (``show``) and answers (``ask``)."""

    def __init__(self, *answers: str):
        self.answers = list(answers)
        self.shown: list[str] = []
        self.prompts: list[str] = []
        self.refusals: list[str] = []

    def approver(self):
        return make_approver(input_func=self.ask, on_refusal=self.refusals.append, show_func=self.shown.append)

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)


def unwrap(rows: list[tuple[bool, str]]) -> str:
    """The text back from display rows (for text without marks)."""
    lines: list[str] = []
    for continued, row in rows:
        if continued:
            lines[-1] += row
        else:
            lines.append(row)
    return "\n".join(lines)


def test_a_command_hidden_behind_spaces_is_shown(tmp_path, capsys):
    command = "echo SHOWN" + " " * 50 + "; rm -rf ~/important"
    prompts: list[str] = []
    approve = make_approver(input_func=lambda prompt: prompts.append(prompt) or "n")  # shown with print()
    out = run_tool_call(get_tool("bash"), {"command": command}, ToolContext(cwd=str(tmp_path)), approve=approve)
    assert out.is_error and "declined" in out.text
    seen = capsys.readouterr().out + "".join(prompts)
    assert "rm -rf ~/important" in seen
    assert seen == ("ipyagent: approve this `bash` call?\n"
                    "  command: echo SHOWN«50 spaces»; rm -rf ~/important\n"
                    "  («N spaces» a run of N spaces)\n"
                    "Allow `bash` as shown above? [y/N] ")


def test_long_code_is_shown_whole_and_wrapped():
    code = "\n".join(f"result_{i} = compute({i}, " + "argument, " * 20 + ")" for i in range(60))
    text = approval_text("python", {"code": code})
    lines = text.split("\n")
    assert lines[:2] == ["ipyagent: approve this `python` call?", "  code:"]
    rows = [(line.startswith("    ↪ "), line[6:]) for line in lines[2:-1]]
    assert all(line.startswith(("    │ ", "    ↪ ")) for line in lines[2:-1])
    assert all(len(row) <= WIDTH for _, row in rows)
    assert unwrap(rows) == code  # every character is there, in order
    assert lines[-1] == "  (↪ the line above goes on (wrapped))"


@pytest.mark.parametrize("hidden,mark", [
    ("\x1b[2K", "␛[2K"), ("\r", "␍"), ("\t", "⇥"), ("\x00", "␀"), ("\x7f", "␡"), ("\x9b", "«U+009B»"),
    ("\u202e", "«U+202E»"), ("\u200b", "«U+200B»"), ("\u00a0", "«U+00A0»"), ("\u2028", "«U+2028»"),
    ("\ufeff", "«U+FEFF»"), ("\u3164", "«U+3164»"), ("  ", "··"), (" " * 17, "«17 spaces»"),
])
def test_control_characters_and_invisible_text_become_marks(hidden, mark):
    text = approval_text("bash", {"command": f"echo safe{hidden}rm -rf /"})
    assert f"  command: echo safe{mark}rm -rf /" in text
    visible_control = [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
    assert visible_control == [] and "\u00a0" not in text and "\u3164" not in text


def test_code_keeps_its_indentation_readable_and_marks_the_rest():
    code = "def f(x):\n    if x:\n        return 1\t# tab\n    return 2   \n"
    rows = visible_lines(code)
    assert [row for _, row in rows] == ["def f(x):", "    if x:", "        return 1⇥# tab", "    return 2···", ""]


def test_arguments_cannot_fake_the_layout():
    text = approval_text("write", {"path": "notes.txt", "content": "hello\n  path: /etc/passwd",
                                   "evil\n  path": "x"})
    assert text.split("\n")[1:] == [
        "  path: notes.txt",
        "  content:",
        "    │ hello",
        "    │   path: /etc/passwd",
        "  evil␊··path: x",
        "  (· a space in a run of spaces; ␊ a line break)",
    ]


def test_values_other_than_text_are_shown_as_json():
    text = approval_text("recorder", {"n": 3, "flags": [True, None], "opts": {"k": "v  w"}})
    assert text.split("\n")[1:4] == ["  n: 3", "  flags: [true, null]", '  opts: {"k": "v··w"}']


def test_a_call_too_long_to_show_is_refused_without_asking(tmp_path):
    ui = Frontend("y")
    content = "x" * (MAX_SHOWN_CHARS + 1)
    out = run_tool_call(get_tool("write"), {"path": "big.txt", "content": content}, ToolContext(cwd=str(tmp_path)),
                        approve=ui.approver())
    assert out.is_error and out.text.startswith("Could not ask the user to approve `write` (TooLongToShow: the call's "
                                                "arguments are 20,019 characters long, more than the 20,000")
    assert ui.prompts == [] and ui.shown == [] and not (tmp_path / "big.txt").exists()
    assert ui.refusals == [("Refused `write` without asking: the call's arguments are 20,019 characters long, more "
                            "than the 20,000 an approval question shows in full, so the user was not asked. Split the "
                            "work into smaller steps.")]
    from ipyagent.display.approval_question import MAX_SHOWN_CHARS as limit
    from ipyagent.display.approval_question import TooLongToShow

    assert limit == MAX_SHOWN_CHARS
    with pytest.raises(TooLongToShow):
        approval_text("bash", {"command": "y" * 100}, max_chars=50)
    assert approval_text("write", {"path": "f", "content": "x" * (MAX_SHOWN_CHARS - 20)})  # under the limit: asked


def test_yes_runs_and_the_question_names_outside_reads(tmp_path):
    (tmp_path / "inside").mkdir()
    (tmp_path / "outside.txt").write_text("out there\n")
    ui = Frontend("y")
    out = run_tool_call(get_tool("read"), {"path": "../outside.txt"},
                        ToolContext(cwd=str(tmp_path / "inside"), root=str(tmp_path / "inside")), approve=ui.approver())
    assert out.text == "out there"
    assert ui.shown == [("ipyagent: approve this `read` call? It reads outside the notebook's folder.\n"
                         "  path: ../outside.txt")]


def test_no_stdin_still_refuses_clearly(tmp_path):
    from IPython.core.error import StdinNotImplementedError

    def no_stdin(prompt: str) -> Any:
        raise StdinNotImplementedError("no stdin")

    refusals: list[str] = []
    approve = make_approver(input_func=no_stdin, on_refusal=refusals.append, show_func=lambda text: None)
    out = run_tool_call(get_tool("bash"), {"command": "touch x"}, ToolContext(cwd=str(tmp_path)), approve=approve)
    again = run_tool_call(get_tool("bash"), {"command": "touch y"}, ToolContext(cwd=str(tmp_path)), approve=approve)
    assert out.is_error and again.is_error and "nobody can answer" in again.text
    assert len(refusals) == 1 and not any(tmp_path.iterdir())


# ---- the record of an answered question --------------------------------------------------------


def test_the_answer_is_recorded_in_one_line():
    decisions: list[tuple[str, str]] = []
    approve = make_approver(input_func=lambda prompt: "y", show_func=lambda text: None,
                            on_decision=lambda line, question: decisions.append((line, question)))
    code = "x = 1\n" * 385  # 2,310 characters of code
    assert approve("python", {"code": code})
    assert decisions[0][0] == "approved: python (2,314 chars)"
    assert decisions[0][1].startswith("ipyagent: approve this `python` call?")
    refuse = make_approver(input_func=lambda prompt: "n", show_func=lambda text: None,
                           on_decision=lambda line, question: decisions.append((line, question)))
    assert not refuse("bash", {"command": "rm -rf build"})
    assert decisions[1][0] == "declined: bash (19 chars)"


@pytest.mark.kernel
def test_the_saved_output_reads_question_answer_result_in_that_order(tmp_path):
    """In a real kernel, with a frontend that writes the answered prompt into the outputs as
    JupyterLab does: the decision is one line before the result (the question collapsed in it),
    and neither the question nor the typed "y" is left below the result."""
    from kernel_support import SETUP, LiveKernel, fake_provider
    from support.outputs import outputs_text

    code = "total = 0\n" + "".join(f"total += {i}  # step {i:04d} of the long calculation\n" for i in range(60)) \
        + "print(total)"
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")
        server.enqueue_tool_call("python", {"code": code})
        server.enqueue_text("The total is 1770.")
        k.answers = ["y"]
        cell = k.run("%%agent\nAdd the numbers up.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
    outputs = cell.outputs
    plain = [(o.get("data") or {}).get("text/plain", "") if "data" in o else o.get("text", "") for o in outputs]
    size = len("code") + len(code)
    decision = [i for i, text in enumerate(plain) if text.startswith(f"approved: python ({size:,} chars)\n")]
    answer = [i for i, o in enumerate(outputs) if o.get("name") == "stdin"]
    result = [i for i, text in enumerate(plain) if text.startswith("✓ python(")]
    assert len(decision) == len(answer) == len(result) == 1, plain
    assert decision[0] < answer[0] < result[0], plain
    assert "1770" in plain[result[0]]
    # nothing of the question below the result; in HTML it is collapsed under the one line
    assert not any("approve this" in text for text in plain[result[0]:])
    html = outputs[decision[0]]["data"]["text/html"]
    assert html.startswith("<details class='ipyagent-approval'><summary")
    assert f"approved: python ({size:,} chars)</summary>" in html and "step 0059" in html
    assert sum("approve this `python` call?" in text for text in plain) == 1  # the record, not a leftover
