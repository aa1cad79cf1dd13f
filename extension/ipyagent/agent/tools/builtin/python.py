"""``python(code)``: run code in the user's namespace the way a notebook cell runs it.

Inside a kernel the notebook layer gives the tool a :class:`~ipyagent.agent.tools.cell.CellRunner`
(IPython's machinery: magics, ``!cmd``, ``display()``, rich outputs, images). Without one (plain
Python) the code runs with ``exec``, the last expression's ``repr`` as its value.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import linecache
import sys
import traceback
from types import TracebackType
from typing import Any, ClassVar

from ipyagent.agent.tools.cell import cell_tool_output
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    RollingText,
    clean_output,
    save_full_output,
    tail_notice,
    truncate_tail,
)
from ipyagent.shapes import JsonSchema

_cell_numbers = itertools.count(1)
_NO_VALUE = object()


def _execute(code: str, filename: str, namespace: dict[str, Any]) -> Any:
    """Exec every statement; if the last one is an expression, evaluate and return its value."""
    tree = ast.parse(code, filename, "exec")
    final = tree.body[-1] if tree.body else None
    last = final if isinstance(final, ast.Expr) else None
    if last is not None:
        tree.body.pop()
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - running the model's code is this tool's job
    if last is None:
        return _NO_VALUE
    value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307 - likewise
    # As in IPython, None is not displayed and a trailing ';' silences the value.
    if value is None or code.rstrip().endswith(";"):
        return _NO_VALUE
    return value


def _user_frames(tb: TracebackType | None, filename: str) -> TracebackType | None:
    """Drop the tool's own frames: start at the first frame running the submitted code."""
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return tb


class PythonTool(Tool):
    name = "python"
    description = (
        "Run Python code in the user's live namespace (the notebook's kernel), like a notebook "
        "cell: variables, imports and functions persist between calls and are shared with the "
        "user; IPython magics (%timeit, %%bash), shell escapes (!ls) and display() work. Returns "
        "stdout, stderr, the text of displayed outputs and of the last expression's value, the "
        "traceback if it raises, and images (plots) when you can see images. Output is truncated "
        f"to the last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python code to run"}},
        "required": ["code"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        if context.cell_runner is not None:
            text, is_error, details, images = cell_tool_output(context.cell_runner.run(arguments["code"]))
            output = _output(text, is_error, details.pop("has_value"), details.pop("left_out_lines", 0))
            output.details.update(details)
            output.images = images
            return output
        if context.namespace is None:
            context.namespace = {"__name__": "__main__"}  # outside a kernel: a namespace of its own
        code: str = arguments["code"]
        filename = f"<agent-python-{next(_cell_numbers)}>"
        # Registering the source lets tracebacks show the offending lines.
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)

        stdout, stderr = RollingText(), RollingText()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        value_repr: str | None = None
        error: str | None = None
        try:
            value = _execute(code, filename, context.namespace)
            if value is not _NO_VALUE:
                value_repr = repr(value)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - KeyboardInterrupt is left to propagate
            error = "".join(traceback.format_exception(type(e), e, _user_frames(e.__traceback__, filename)))
        finally:
            sys.stdout, sys.stderr = saved

        parts = [stdout.getvalue().removesuffix("\n")]
        if err := stderr.getvalue().removesuffix("\n"):
            parts.append("[stderr]\n" + err)
        parts += [error.removesuffix("\n") if error else "", value_repr or ""]
        return _output("\n".join(p for p in parts if p), error is not None, value_repr is not None,
                       stdout.left_out_lines + stderr.left_out_lines)


def _output(text: str, is_error: bool, has_value: bool, left_out_lines: int = 0) -> ToolOutput:
    """The tool's result: the text's tail within Pi's limits. ``left_out_lines``: lines the
    capture did not keep (a line in the text says where), counted in the notice's line numbers;
    the file then holds what was kept, not the full output."""
    details: dict[str, Any] = {"has_value": has_value}
    text = clean_output(text)
    if not text:
        return ToolOutput("(no output)", is_error=is_error, details=details)
    t = truncate_tail(text)
    if not t.truncated:
        return ToolOutput(text, is_error=is_error, details=details)
    path = save_full_output(text, "ipyagent-python-")
    label = "Full output"
    if left_out_lines:
        t = dataclasses.replace(t, total_lines=t.total_lines + left_out_lines)
        label = "The start and end of the output (the middle was not kept)"
    details.update(truncation=t.as_details(), full_output_path=path)
    return ToolOutput(f"{t.content}\n\n{tail_notice(t, path, label)}", is_error=is_error, details=details)
