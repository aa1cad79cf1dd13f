"""The artifact ledger: what the summarised work left behind, made without a model.

Next to Pi's file lists, every compaction records

* the kernel variables the agent's ``python`` calls created or rebound (names from the code's
  assignments, ``for`` and ``with`` targets, defs, classes and imports), with a type and
  shape/len that the caller's ``describe`` callback reads from the namespace when the compaction
  runs;
* the shell commands run (``bash`` calls, ``!cmd`` lines of python calls, Pi's user ``!cmd``);
* the last lines of tool errors;
* the notebook cells the work came from (the ``%%agent`` cells whose prompts were summarised).

Each item keeps the id of the entry it came from, so the model can ``recall`` it in full. The
ledger is stored in the compaction entry's ``details["artifacts"]`` (Pi reads only ``readFiles``
and ``modifiedFiles`` there) and carries over from one compaction to the next exactly as the file
lists do: from the previous compaction, unless a hook wrote that one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from ipyagent.session.messages import Message, call_arguments, prompt_text, text_of
from ipyagent.text import one_line

PYTHON_TOOLS = frozenset({"python"})
SHELL_TOOLS = frozenset({"bash"})

# Caps (the newest are kept): the ledger rides in every request after a compaction.
MAX_VARIABLES = 80
MAX_COMMANDS = 30
MAX_ERRORS = 10
MAX_CELLS = 40
COMMAND_CHARS = 200
ERROR_LINES = 3
ERROR_CHARS = 300
PROMPT_CHARS = 60

# The tags appended to a summary after its text: Pi's file lists, then the ledger's sections.
VARIABLES_TAG = "kernel-variables"
COMMANDS_TAG = "shell-commands"
ERRORS_TAG = "tool-errors"
CELLS_TAG = "notebook-cells"
APPENDIX_TAGS = ("read-files", "modified-files", VARIABLES_TAG, COMMANDS_TAG, ERRORS_TAG, CELLS_TAG)

# names -> {name: "list, len 39"} for the names defined now; a name left out is not defined.
Describe = Callable[[list[str]], Mapping[str, str]]


@dataclass
class Variable:
    name: str
    entryId: str | None = None  # the assistant entry whose python call bound it last
    type: str | None = None  # "DataFrame, shape (100, 3)"; None: never described
    defined: bool | None = None  # in the namespace when last described; None: not known


@dataclass
class Command:
    command: str
    entryId: str | None = None


@dataclass
class ToolError:
    tool: str
    text: str  # the error's last lines
    entryId: str | None = None


@dataclass
class Cell:
    executionCount: int | None = None
    cellId: str | None = None
    prompt: str = ""  # the start of the prompt sent from the cell
    entryId: str | None = None


@dataclass
class Ledger:
    variables: dict[str, Variable] = field(default_factory=dict)  # in binding order, rebinding moves last
    commands: list[Command] = field(default_factory=list)
    errors: list[ToolError] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=dict)  # section -> items dropped by the caps

    # ---- building --------------------------------------------------------------------------

    def add_details(self, details: Any) -> None:
        """Carry the ledger of an earlier (non-hook) compaction forward; anything malformed is skipped."""
        found = details.get("artifacts") if isinstance(details, dict) else None
        if not isinstance(found, dict):
            return
        for item in self._carried(found, "variables", MAX_VARIABLES):
            name = item.get("name")
            if isinstance(name, str) and name.isidentifier():
                self._bind(Variable(name, _str(item.get("entryId")), _str(item.get("type"), 200),
                                    item["defined"] if isinstance(item.get("defined"), bool) else None))
        for item in self._carried(found, "commands", MAX_COMMANDS):
            if isinstance(item.get("command"), str):
                self.commands.append(Command(one_line(item["command"], COMMAND_CHARS), _str(item.get("entryId"))))
        for item in self._carried(found, "errors", MAX_ERRORS):
            if isinstance(item.get("text"), str):
                self.errors.append(ToolError(_str(item.get("tool"), 60) or "tool", one_line(item["text"], ERROR_CHARS),
                                             _str(item.get("entryId"))))
        for item in self._carried(found, "cells", MAX_CELLS):
            count = item.get("executionCount")
            self.cells.append(Cell(count if isinstance(count, int) and not isinstance(count, bool) else None,
                                   _str(item.get("cellId"), 100), _str(item.get("prompt"), PROMPT_CHARS) or "",
                                   _str(item.get("entryId"))))
        omitted = found.get("omitted")
        if isinstance(omitted, dict):
            for key, value in omitted.items():
                if key in _SECTIONS and isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    self.omitted[key] = self.omitted.get(key, 0) + value
        self._cap()

    def _carried(self, found: dict[str, Any], key: str, limit: int) -> list[dict[str, Any]]:
        items = _dicts(found.get(key))
        if len(items) > limit:  # more than this ledger would ever have written: keep the newest
            self.omitted[key] = self.omitted.get(key, 0) + len(items) - limit
            items = items[-limit:]
        return items

    def add_messages(self, messages: Sequence[Message], entry_ids: Sequence[str | None] = ()) -> None:
        """Add what ``messages`` (summarised, oldest first) did; ``entry_ids`` are their entries' ids."""
        ids = list(entry_ids) + [None] * (len(messages) - len(entry_ids))
        for message, entry_id in zip(messages, ids):
            self._add_message(message, entry_id)
        self._cap()

    def _add_message(self, message: Message, entry_id: str | None) -> None:
        role = message.get("role")
        if role == "user":
            count, cell_id = message.get("executionCount"), message.get("cellId")
            count = count if isinstance(count, int) and not isinstance(count, bool) else None
            cell_id = cell_id if isinstance(cell_id, str) and cell_id else None
            if count is not None or cell_id is not None:
                self.cells.append(Cell(count, cell_id, one_line(prompt_text(message), PROMPT_CHARS), entry_id))
        elif role == "assistant" and isinstance(message.get("content"), list):
            for call in message["content"]:
                if not isinstance(call, dict) or call.get("type") != "toolCall":
                    continue
                arguments = call_arguments(call)
                if call.get("name") in PYTHON_TOOLS and isinstance(arguments.get("code"), str):
                    bound, deleted = bound_names(arguments["code"])
                    for name in deleted:
                        self.variables.pop(name, None)
                    for name in bound:
                        self._bind(Variable(name, entry_id))
                    for command in shell_escapes(arguments["code"]):
                        self.commands.append(Command(command, entry_id))
                elif call.get("name") in SHELL_TOOLS and isinstance(arguments.get("command"), str):
                    self.commands.append(Command(one_line(arguments["command"], COMMAND_CHARS), entry_id))
        elif role == "toolResult" and message.get("isError"):
            text = last_lines(text_of(message.get("content"), "\n"))
            if text:
                self.errors.append(ToolError(_str(message.get("toolName"), 60) or "tool", text, entry_id))
        elif role == "bashExecution" and isinstance(message.get("command"), str) \
                and not message.get("excludeFromContext"):  # a user's !!cmd is kept from the model
            self.commands.append(Command(one_line(message["command"], COMMAND_CHARS), entry_id))

    def _bind(self, variable: Variable) -> None:
        self.variables.pop(variable.name, None)
        self.variables[variable.name] = variable

    def _cap(self) -> None:
        if len(self.variables) > MAX_VARIABLES:
            extra = len(self.variables) - MAX_VARIABLES
            for name in list(self.variables)[:extra]:
                del self.variables[name]
            self.omitted["variables"] = self.omitted.get("variables", 0) + extra
        for key, limit in (("commands", MAX_COMMANDS), ("errors", MAX_ERRORS), ("cells", MAX_CELLS)):
            items = getattr(self, key)
            if len(items) > limit:
                self.omitted[key] = self.omitted.get(key, 0) + len(items) - limit
                del items[:len(items) - limit]

    def describe(self, describe: Describe | None) -> None:
        """Read each variable's type and shape/len now. Without a callback (no kernel) the
        descriptions carried from earlier compactions stay as they were."""
        if describe is None or not self.variables:
            return
        try:
            found = describe(list(self.variables))
        except Exception:  # noqa: BLE001 - a description is a nicety: it never stops a compaction
            return
        found = found if isinstance(found, Mapping) else {}
        for name, variable in self.variables.items():
            info = found.get(name)
            if isinstance(info, str):
                variable.type, variable.defined = one_line(info, 200), True
            else:
                variable.defined = False

    # ---- output ----------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not (self.variables or self.commands or self.errors or self.cells)

    def to_details(self) -> dict[str, Any]:
        """Plain JSON data for ``details["artifacts"]``."""
        data: dict[str, Any] = {
            "variables": [_compact(asdict(v)) for v in self.variables.values()],
            "commands": [_compact(asdict(c)) for c in self.commands],
            "errors": [_compact(asdict(e)) for e in self.errors],
            "cells": [_compact(asdict(c)) for c in self.cells],
        }
        if self.omitted:
            data["omitted"] = dict(self.omitted)
        return data

    def text(self) -> str:
        """The tagged sections appended to the summary (a blank line before each), or ""."""
        sections = []
        if self.variables:
            sections.append(_section(VARIABLES_TAG, [_variable_line(v) for v in self.variables.values()],
                                     self.omitted.get("variables", 0)))
        if self.commands:
            sections.append(_section(COMMANDS_TAG, [c.command for c in self.commands], self.omitted.get("commands", 0)))
        if self.errors:
            sections.append(_section(ERRORS_TAG, [f"{e.tool}{_at(e.entryId)}: {e.text}" for e in self.errors],
                                     self.omitted.get("errors", 0)))
        if self.cells:
            sections.append(_section(CELLS_TAG, [_cell_line(c) for c in self.cells], self.omitted.get("cells", 0)))
        return "".join("\n\n" + s for s in sections)


_SECTIONS = ("variables", "commands", "errors", "cells")


def build_ledger(messages: Sequence[Message], entry_ids: Sequence[str | None] = (),
                 previous_details: Any = None) -> Ledger:
    """The ledger of a compaction: the previous one's (if any), then what ``messages`` did."""
    ledger = Ledger()
    ledger.add_details(previous_details)
    ledger.add_messages(messages, entry_ids)
    return ledger


def without_ledger(summary: str) -> str:
    """``summary`` without the ledger sections (Pi's file lists stay): the previous summary as the
    summariser gets it, since compaction appends the carried ledger again anyway."""
    cut = len(summary)
    for tag in APPENDIX_TAGS[2:]:
        found = summary.find(f"\n\n<{tag}>\n")
        if found >= 0:
            cut = min(cut, found)
    return summary[:cut]


def split_appendix(summary: str) -> tuple[str, str]:
    """(the summary's own text, the file lists and ledger appended to it)."""
    cut = len(summary)
    for tag in APPENDIX_TAGS:
        found = summary.find(f"\n\n<{tag}>\n")
        if found >= 0:
            cut = min(cut, found)
    return summary[:cut], summary[cut:]


# ---- reading code ------------------------------------------------------------------------------

_PYTHON_BODY_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")
_SHELL_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][\w, ]*?)\s*=\s*[!%]")
_HELP = re.compile(r"^(\?{1,2}[\w.]+|[\w.]+\?{1,2})$")  # obj? / ??obj: IPython's help
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _python_source(code: str) -> str | None:
    """``code`` with IPython's line syntax (``!cmd``, ``%magic``, ``x = !cmd``, ``obj?``) made
    plain Python; None for a cell magic whose body is not Python."""
    lines = code.split("\n")
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        if not first.startswith(_PYTHON_BODY_MAGICS):
            return None
        index = next(i for i, line in enumerate(lines) if line.strip())
        lines = lines[index + 1:]
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        assign = _SHELL_ASSIGN.match(line)
        if stripped.startswith(("!", "%")) or _HELP.match(stripped):
            out.append(indent + "pass")
        elif assign:
            out.append(f"{assign.group(1)}{assign.group(2)} = None")
        else:
            out.append(line)
    return "\n".join(out)


def bound_names(code: str) -> tuple[list[str], list[str]]:
    """(names the code binds in the namespace it runs in, names it deletes), in order.

    Module-level bindings only: assignments (tuple and starred targets included), augmented and
    annotated assignments with a value, ``for`` and ``with … as`` targets, ``:=``, defs, classes
    and imports (aliases included; ``import a.b`` binds ``a``). Code that does not parse gives
    nothing. ``_`` and dunder names are left out.
    """
    bound, deleted = _bound_names(code)
    return list(bound), list(deleted)


@lru_cache(maxsize=1024)  # a compaction re-reads the calls a retried or probing compaction read
def _bound_names(code: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names ``code`` binds at its top level, in the order last bound, and those it deletes."""
    source = _python_source(code)
    if source is None:
        return (), ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return (), ()
    names = _Bindings()
    names.statements(tree.body)
    return tuple(names.bound), tuple(names.deleted)


class _Bindings:
    """The names a module's statements bind and delete, read statement by statement (a name bound
    again moves to the end; nested functions and classes bind only their own name)."""

    def __init__(self) -> None:
        self.bound: list[str] = []
        self.deleted: list[str] = []

    def bind(self, name: str) -> None:
        if name == "_" or (name.startswith("__") and name.endswith("__")):
            return
        if name in self.bound:
            self.bound.remove(name)
        if name in self.deleted:
            self.deleted.remove(name)
        self.bound.append(name)

    def delete(self, name: str) -> None:
        if name in self.bound:
            self.bound.remove(name)
        if name not in self.deleted:
            self.deleted.append(name)

    def targets(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self.bind(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.targets(element)
        elif isinstance(node, ast.Starred):
            self.targets(node.value)

    def walrus(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                continue
            if isinstance(child, ast.NamedExpr):
                self.targets(child.target)
            if not isinstance(child, ast.stmt):
                self.walrus(child)

    def statements(self, body: Iterable[ast.stmt]) -> None:
        for node in body:
            self.walrus(node)
            if self.statement(node):
                self.statements(getattr(node, "body", None) or [])
                for handler in getattr(node, "handlers", None) or []:
                    self.statements(handler.body)
                for case in getattr(node, "cases", None) or []:
                    self.statements(case.body)
                self.statements(getattr(node, "orelse", None) or [])
                self.statements(getattr(node, "finalbody", None) or [])

    def statement(self, node: ast.stmt) -> bool:
        """Bind what ``node`` itself binds; whether its bodies are read too (not a function's or a
        class's)."""
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.targets(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            if not isinstance(node, ast.AnnAssign) or node.value is not None:
                self.targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self.targets(item.optional_vars)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bind(node.name)
            return False
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.bind(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    self.bind(alias.asname or alias.name)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.delete(target.id)
        return True


def shell_escapes(code: str) -> list[str]:
    """The ``!cmd`` lines of a python call (IPython runs them in a shell)."""
    found = []
    for line in code.split("\n"):
        stripped = line.strip()
        match = re.match(r"^(?:[A-Za-z_][\w, ]*?\s*=\s*)?!!?(.+)$", stripped)
        if match and match.group(1).strip():
            found.append(one_line(match.group(1), COMMAND_CHARS))
    return found


def last_lines(text: str, lines: int = ERROR_LINES, chars: int = ERROR_CHARS) -> str:
    """The last non-empty lines of an error, joined with " | " and cut to ``chars`` from the end."""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return joined if len(joined) <= chars else "…" + joined[-(chars - 1):]


# ---- formatting helpers ------------------------------------------------------------------------


def _section(tag: str, lines: list[str], omitted: int) -> str:
    head = [f"({omitted} earlier omitted)"] if omitted else []
    return f"<{tag}>\n" + "\n".join(head + lines) + f"\n</{tag}>"


def _at(entry_id: str | None) -> str:
    return f" [entry {entry_id}]" if entry_id else ""


def _variable_line(v: Variable) -> str:
    if v.defined is False:
        info = "not defined now" + (f" (was {v.type})" if v.type else "")
    else:
        info = v.type or ""
    return f"{v.name}{': ' + info if info else ''}{_at(v.entryId)}"


def _cell_line(c: Cell) -> str:
    """``cell 3 (id …): the prompt as typed`` — the execution count first, as a notebook shows it."""
    where = "cell" + (f" {c.executionCount}" if c.executionCount is not None else "")
    cell = f"{where} (id {c.cellId})" if c.cellId else where
    return f"{cell}: {c.prompt}" if c.prompt else cell


def _str(value: Any, limit: int = 40) -> str | None:
    return one_line(value, limit) if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None and v != ""}
