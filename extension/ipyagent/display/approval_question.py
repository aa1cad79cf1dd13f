"""Asking before a tool call runs: the question, a tool call shown in full with nothing invisible
in it, and the approver that asks it (``make_approver``, for ``Agent.tool_approval = "ask"``).

A call's arguments come from the model, so the question must not hide anything: every argument
is shown whole (wrapped to a width, never cut), control characters, tabs and carriage returns
become visible marks, invisible Unicode (bidi overrides, zero-width characters, unusual spaces)
is shown by code point, and runs of spaces are marked so that ``echo SHOWN<50 spaces>; rm …``
cannot pass for ``echo SHOWN``. What is too long to show is not asked about at all
(:class:`TooLongToShow`).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

from ipyagent.agent.tools import Tool, get_tool
from ipyagent.display.untrusted import escape_html

__all__ = ["MAX_SHOWN_CHARS", "NobodyToAsk", "TooLongToShow", "approval_text", "decision_bundle", "make_approver",
           "visible_lines"]

# what a refusal where nobody can answer advises (a tool call's; a project MCP server's is its own)
TOOL_ADVICE = 'set %config Agent.tool_approval = "auto" to let tools run without asking'
MAX_SHOWN_CHARS = 20_000  # of argument text; a longer call is refused rather than asked about
WIDTH = 100
INDENT_KEPT = 16  # leading indentation up to this many spaces stays plain (code stays readable)
SPACE_DOTS = 16  # inner runs of 2..SPACE_DOTS spaces become dots; longer runs are counted

_PICTURES = {0x09: "⇥", 0x0D: "␍", 0x7F: "␡"}  # the other C0 controls: their Control Pictures
_LEGEND = {  # kind of mark -> what it means, in the order the legend lists them
    "dots": "· a space in a run of spaces",
    "run": "«N spaces» a run of N spaces",
    "tab": "⇥ a tab",
    "cr": "␍ a carriage return",
    "control": "␛, ␀… a control character",
    "code": "«U+XXXX» an invisible or unusual character",
    "newline": "␊ a line break",
    "wrap": "↪ the line above goes on (wrapped)",
}
_KIND = {0x09: "tab", 0x0D: "cr"}
# Characters that render as nothing (or as a blank) although their category says otherwise.
_BLANK_LETTERS = {0x115F, 0x1160, 0x2800, 0x3164, 0xFFA0}


class TooLongToShow(ValueError):
    """The call is too long to show in full, so it is not asked about."""


def _char_token(ch: str, marks: set[str]) -> str | None:
    """The visible form of a character that would not show as itself, or None if it does."""
    code = ord(ch)
    if code in _PICTURES:
        marks.add(_KIND.get(code, "control"))
        return _PICTURES[code]
    if code < 0x20:
        marks.add("control")
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␀ for NUL…
    category = unicodedata.category(ch)
    if (category in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn") or (category == "Zs" and ch != " ")
            or code in _BLANK_LETTERS):
        marks.add("code")
        return f"«U+{code:04X}»"
    return None


def _tokens(line: str, marks: set[str], keep_indent: bool = True) -> list[str]:
    """One logical line as display tokens: characters, marks, and marked runs of spaces."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == " ":
            j = i
            while j < n and line[j] == " ":
                j += 1
            run = j - i
            if keep_indent and i == 0 and run <= INDENT_KEPT and j < n:
                out.extend(" " * run)  # plain indentation
            elif run == 1:
                out.append(" ")
            elif run <= SPACE_DOTS:
                out.extend("·" * run)
                marks.add("dots")
            else:
                out.append(f"«{run} spaces»")
                marks.add("run")
            i = j
            continue
        token = _char_token(ch, marks)
        out.append(ch if token is None else token)
        i += 1
    return out


def _break_point(row: list[str], width: int) -> int:
    """Where to wrap a full row: after its last space if that keeps most of the row, else at the end."""
    carried = 0
    for j in range(len(row) - 1, 0, -1):
        if row[j] == " ":
            return j + 1
        carried += len(row[j])
        if carried > width // 4:
            break
    return len(row)


def visible_lines(text: str, width: int = WIDTH, marks: set[str] | None = None,
                  keep_indent: bool = True) -> list[tuple[bool, str]]:
    """``text`` as display rows ``(continued, row)``; ``continued`` rows wrap the row before.
    The kinds of marks used are added to ``marks``."""
    marks = set() if marks is None else marks
    rows: list[tuple[bool, str]] = []
    for line in text.split("\n"):
        tokens = _tokens(line, marks, keep_indent)
        row: list[str] = []
        used = 0
        continued = False
        for token in tokens:
            if row and used + len(token) > width:
                cut = _break_point(row, width)
                rows.append((continued, "".join(row[:cut])))
                row, continued = row[cut:], True
                used = sum(len(t) for t in row)
                marks.add("wrap")
            row.append(token)
            used += len(token)
        rows.append((continued, "".join(row)))
    return rows


def _marked_line(text: str, marks: set[str]) -> str:
    if "\n" in text:
        marks.add("newline")
    return "␊".join("".join(_tokens(part, marks, keep_indent=False)) for part in text.split("\n"))


def _argument_text(value: Any) -> tuple[str, bool]:
    """The text shown for a value, and whether it goes in a block (code, commands, long text).

    A short one-line string is shown as it is after its name: it cannot fake another argument,
    since each argument starts a line of its own and a line break always makes a block."""
    if isinstance(value, str):
        if "\n" in value or len(value) > WIDTH - 20:
            return value, True
        return value or '""', False
    return json.dumps(value, ensure_ascii=False, default=str), False


def _call_size(arguments: dict[str, Any]) -> int:
    """The characters of a call's arguments as the question shows them (names and values)."""
    return sum(len(str(key)) + len(_argument_text(value)[0]) for key, value in arguments.items())


def decision_bundle(line: str, question: str) -> dict[str, str]:
    """The record of an answered question: one line ("approved: python (2,314 chars)"), the
    question itself collapsed under it in HTML (after it in plain text)."""
    return {"text/plain": f"{line}\n{question}",
            "text/html": ("<details class='ipyagent-approval'><summary style='cursor:pointer;font-family:monospace'>"
                          f"{escape_html(line)}</summary><pre style='margin:2px 0;white-space:pre-wrap'>"
                          f"{escape_html(question)}</pre></details>")}


def approval_text(tool: str, arguments: dict[str, Any], *, note: str = "",
                  max_chars: int = MAX_SHOWN_CHARS, width: int = WIDTH) -> str:
    """The whole call, made visible, for the user to approve; raises :class:`TooLongToShow`."""
    texts = {key: _argument_text(value) for key, value in arguments.items()}
    size = _call_size(arguments)
    if size > max_chars:
        raise TooLongToShow(
            f"the call's arguments are {size:,} characters long, more than the {max_chars:,} an approval question "
            "shows in full, so the user was not asked. Split the work into smaller steps")
    marks: set[str] = set()
    lines = [f"ipyagent: approve this `{_marked_line(tool, marks)}` call?" + (f" {note}" if note else "")]
    for key, (text, block) in texts.items():
        name = _marked_line(str(key), marks)
        rows = visible_lines(text, width, marks, keep_indent=block)
        if block:
            lines.append(f"  {name}:")
            lines.extend(f"    {'↪' if continued else '│'} {row}" for continued, row in rows)
        else:
            lines.append(f"  {name}: {rows[0][1]}")
            lines.extend(f"    ↪ {row}" for _, row in rows[1:])
    legend = [meaning for kind, meaning in _LEGEND.items() if kind in marks]
    if legend:
        lines.append("  (" + "; ".join(legend) + ")")
    return "\n".join(lines)


class NobodyToAsk(RuntimeError):
    """Asking for approval is impossible here (no stdin: a headless run)."""


def _approval_note(tool: str, find: Callable[[str], Tool | None] | None) -> str:
    try:
        found = find(tool) if find is not None else get_tool(tool)
    except KeyError:
        return ""
    read_only = found is not None and found.read_only
    # a read-only tool is only asked about when it would read outside the notebook's folder
    return "It reads outside the notebook's folder." if read_only else ""


def make_approver(input_func: Callable[[str], str] | None = None,
                  on_refusal: Callable[[str], None] | None = None,
                  show_func: Callable[[str], None] | None = None,
                  on_decision: Callable[[str, str], None] | None = None,
                  advice: str = TOOL_ADVICE,
                  tools: Callable[[str], Tool | None] | None = None) -> Callable[[str, dict[str, Any]], bool]:
    """The approval callback for ``tool_approval == "ask"``: shows the whole call, then asks
    through ``input()``.

    The call is shown by ``show_func`` (default ``print``: a stream output, which every frontend
    shows whole, where an input prompt may be cut to one line), made visible by
    :func:`~ipyagent.display.approval_question.approval_text`; a call too long to show is refused
    without asking. Once answered, ``on_decision(line, question)`` records the outcome in one
    line ("approved: python (2,314 chars)", "declined: …", "refused: … nobody can answer here"),
    so the cell's record can put it before the result (``RunRenderer.record_decision``). Where
    nobody can answer (``StdinNotImplementedError``: nbclient, ``ipyagent run``), the call is
    refused with a clear message that ends with ``advice`` (what to do instead), and later calls in
    the same run are refused without asking. ``tools`` finds the run's tool of a name (default:
    the built-ins and the user's), for what the question says of a read-only one.
    """
    state = {"headless": False}
    from IPython.core.error import StdinNotImplementedError

    def approve(tool: str, arguments: dict[str, Any]) -> bool:
        if state["headless"]:
            raise NobodyToAsk(f"nobody can answer approval questions in this run (no stdin, e.g. a headless run); "
                              f"{advice}")
        ask = input_func
        if ask is None:
            import builtins

            ask = builtins.input
        try:
            question = approval_text(tool, arguments, note=_approval_note(tool, tools))
        except TooLongToShow as exc:
            if on_refusal is not None:
                on_refusal(f"Refused `{tool}` without asking: {exc}.")
            raise
        (show_func or print)(question)
        size = f"{tool} ({_call_size(arguments):,} chars)"
        try:
            answer = ask(f"Allow `{tool}` as shown above? [y/N] ")
        except (StdinNotImplementedError, EOFError, OSError) as exc:
            state["headless"] = True
            if on_decision is not None:
                on_decision(f"refused: {size}, nobody can answer here", question)
            if on_refusal is not None:
                on_refusal(f"Refused `{tool}`: nobody can answer approval questions here ({type(exc).__name__}). "
                           f"{advice[:1].upper()}{advice[1:]}.")
            raise NobodyToAsk(f"nobody can answer approval questions in this run (no stdin, e.g. a headless run); "
                              f"{advice}") from None
        approved = str(answer).strip().lower() in ("y", "yes", "ok", "run", "allow")
        if on_decision is not None:
            on_decision(f"{'approved' if approved else 'declined'}: {size}", question)
        return approved

    return approve
