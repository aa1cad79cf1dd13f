"""Interpolation in ``%%agent`` prompts, like Jupyter AI's ``%%ai``:

* ``{In[3]}`` — the source of the cell that ran as [3];
* ``{Out[3]}`` — its value's text repr, as the notebook showed it;
* ``{Err[3]}`` — its exception: type, message and the last frames of the traceback;
* ``{name}`` — a variable of the user's namespace (its repr, cut to a size).

A value of several lines goes in as a fenced block of its own.

Anything else in braces is left alone (code and JSON in prompts pass untouched), and
``{{In[3]}}`` / ``{{name}}`` write the braces literally. The prompt then says what was filled in,
and which ``{name}`` it left as written for want of such a variable (after a restart the model
would otherwise take ``{by_region}`` for a value it was given).
The values come through :class:`Lookup`, which the notebook layer implements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from ipyagent.agent.prompt.activity_block import clip, fence

MAX_VALUE_CHARS = 2000
_REF = r"(?:In|Out|Err)\[\d+\]|[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(r"\{\{(?P<escaped>" + _REF + r")\}\}?"
                    r"|\{(?P<kind>In|Out|Err)\[(?P<count>\d+)\]\}"
                    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_WHAT = {"In": "the source of cell [{n}]", "Out": "the value of cell [{n}]", "Err": "the error of cell [{n}]"}


class Lookup(Protocol):
    def source(self, count: int) -> str | None: ...

    def output(self, count: int) -> str | None: ...

    def error(self, count: int) -> str | None: ...

    def variable(self, name: str) -> tuple[str, str] | None:
        """(repr, type name) of a user variable, or None when there is no such variable."""


@dataclass(frozen=True)
class Interpolation:
    ref: str  # as written: "{In[3]}"
    what: str  # "the source of cell [3]"
    chars: int
    cut: bool = False


@dataclass
class Interpolated:
    text: str
    items: list[Interpolation] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # cell references with nothing recorded
    unknown: list[str] = field(default_factory=list)  # {name} with no such variable in the namespace
    escaped: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.items or self.escaped)

    def note(self) -> str:
        """What was filled in (and what could not be), in one line; empty when nothing was."""
        bits = []
        if self.items:
            bits.append("filled in " + "; ".join(
                f"{i.ref} = {i.what} ({i.chars:,} characters{', cut' if i.cut else ''})" for i in self.items))
        if self.missing:
            bits.append("left as written (nothing recorded): " + ", ".join(self.missing))
        if self.unknown:
            bits.append("left as written (no variable of that name in the kernel, whose namespace may be new): "
                        + ", ".join(self.unknown))
        return f"[ipyagent {' and '.join(bits)}]" if bits else ""


def interpolate(prompt: str, lookup: Lookup, *, max_chars: int = MAX_VALUE_CHARS) -> Interpolated:
    result = Interpolated(prompt)
    out: list[str] = []
    position = 0
    for match in _TOKEN.finditer(prompt):
        out.append(prompt[position:match.start()])
        position = match.end()
        token = match.group(0)
        if match.group("escaped"):
            out.append("{" + match.group("escaped") + "}")
            result.escaped += 1
            continue
        if match.group("kind"):
            if len(match.group("count")) > 9 or not match.group("count").isascii():  # no such cell, and no
                result.missing.append(token[:20] + "…]}" if len(token) > 24 else token)  # huge int() either
                out.append(token)
                continue
            kind, count = match.group("kind"), int(match.group("count"))
            value = {"In": lookup.source, "Out": lookup.output, "Err": lookup.error}[kind](count)
            what = _WHAT[kind].format(n=count)
            if value is None:
                result.missing.append(token)
                out.append(token)
                continue
        else:
            found = lookup.variable(match.group("name"))
            if found is None:  # ordinary text in braces, or a variable this kernel lacks (after a restart)
                before = prompt[match.start() - 1] if match.start() else " "
                after = prompt[match.end()] if match.end() < len(prompt) else " "
                # in a string or an f-string of code it is code; standing alone it was meant as a value
                if before not in "\"'`" and after not in "\"'`" and token not in result.unknown:
                    result.unknown.append(token)
                out.append(token)
                continue
            value, type_name = found
            what = f"repr of `{match.group('name')}` ({type_name})"
        shown = clip(value, max_chars)
        result.items.append(Interpolation(token, what, len(value), cut=shown != value))
        if "\n" in shown.strip():  # a block of its own, so the sentence around it stays readable
            shown = "\n" + fence(shown, "python" if match.group("kind") == "In" else "") + "\n"
        out.append(shown)
    out.append(prompt[position:])
    result.text = "".join(out)
    note = result.note()
    if result.items or result.missing or result.unknown:
        result.text = f"{result.text}\n\n{note}"
    return result
