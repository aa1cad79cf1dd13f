"""Running one tool call: argument checks, the approval policy, and errors turned into results.

Whatever happens, the model gets a ``ToolOutput`` it can read; only a KeyboardInterrupt escapes,
so the agent loop can record the interruption.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from ipyagent.agent.tools.tool import ApprovalCallback, Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import bounded_result
from ipyagent.shapes import JsonSchema

ApprovalPolicy = Literal["ask", "auto"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list, tuple),
    "null": (type(None),),
}


def _type_ok(value: Any, expected: str | list[str]) -> bool:
    for name in [expected] if isinstance(expected, str) else expected:
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True  # models often write 10.0 for 10
        types = _JSON_TYPES.get(name)
        if types is None:
            return True  # a type we don't check
        # bool is an int subclass in Python but not a number in JSON.
        if isinstance(value, types) and not (isinstance(value, bool) and name != "boolean"):
            return True
    return False


def validate_arguments(tool: Tool, arguments: Any) -> str | None:
    """Check arguments against the schema's ``required`` and property types; None if fine."""
    if not isinstance(arguments, dict):
        return f"Arguments for `{tool.name}` must be a JSON object, got {type(arguments).__name__}."
    problems: list[str] = []
    props: dict[str, JsonSchema] = tool.parameters.get("properties", {})
    for name in tool.parameters.get("required", []):
        if arguments.get(name) is None:
            problems.append(f"missing required argument `{name}`")
    for name, value in arguments.items():
        expected = props.get(name, {}).get("type")
        if expected is not None and value is not None and not _type_ok(value, expected):
            problems.append(f"`{name}` must be of type {expected}, got {type(value).__name__}")
    if not problems:
        return None
    return f"Invalid arguments for `{tool.name}`: " + "; ".join(problems) + "."


def _normalise(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Integral floats given for integer parameters become ints; nulls mean "not given"."""
    props: dict[str, JsonSchema] = tool.parameters.get("properties", {})
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if value is None:
            continue
        if props.get(name, {}).get("type") == "integer" and isinstance(value, float):
            value = int(value)
        out[name] = value
    return out


def run_tool_call(
    tool: Tool,
    arguments: Any,
    context: ToolContext,
    *,
    policy: ApprovalPolicy = "ask",
    approve: ApprovalCallback | None = None,
) -> ToolOutput:
    if policy not in ("ask", "auto"):
        raise ValueError(f'tool approval policy must be "ask" or "auto", got {policy!r}')
    if problem := validate_arguments(tool, arguments):
        return ToolOutput(problem, is_error=True)
    arguments = _normalise(tool, arguments)

    try:
        reason = tool.approval_reason(arguments, context)
    except Exception as e:  # noqa: BLE001 - e.g. a path with a NUL byte: the call could not run either
        return ToolOutput(f"`{tool.name}` failed: {type(e).__name__}: {e}", is_error=True)
    if reason is not None and policy == "ask":
        if approve is None:
            why = f"; {reason}" if reason else ""
            return ToolOutput(
                f"The user did not approve running `{tool.name}` (tool_approval is \"ask\" and nobody can answer "
                f"here){why}. Set %config Agent.tool_approval = \"auto\" to allow it.",
                is_error=True,
            )
        try:
            approved = approve(tool.name, arguments)
        except Exception as e:  # noqa: BLE001 - a failing approver refuses the call, never breaks the run
            why = f": {reason}" if reason else ""
            return ToolOutput(
                f"Could not ask the user to approve `{tool.name}` ({type(e).__name__}: {e}); it was not run{why}.",
                is_error=True,
            )
        if not approved:
            why = f" ({reason})" if reason else ""
            return ToolOutput(
                f"The user declined running `{tool.name}`{why}. It was not run; ask the user how to proceed "
                "instead of retrying the same call.",
                is_error=True,
            )

    try:
        output = tool.run(arguments, context)
    except Exception as e:  # noqa: BLE001 - a tool's own failure is a tool error the model sees
        return ToolOutput(f"`{tool.name}` failed: {type(e).__name__}: {e}", is_error=True)
    return bounded_output(output, tool.name)


MAX_DETAILS_CHARS = 256 * 1024  # a result's details (kept in the session, never sent) as JSON, at most


def bounded_output(output: Any, tool: str) -> ToolOutput:
    """Every tool's output as the session keeps it: its text through the one cut
    (:func:`bounded_result`: what a built-in cut itself passes), details past
    ``MAX_DETAILS_CHARS`` left out with a word saying so. A tool that returns no ToolOutput fails."""
    if not isinstance(output, ToolOutput) or not isinstance(output.text, str):
        return ToolOutput(f"`{tool}` failed: it returned {type(output).__name__}, not a ToolOutput with text",
                          is_error=True)
    text = bounded_result(output.text, tool)
    details = output.details
    if details:
        size = len(json.dumps(details, ensure_ascii=False, default=repr))
        if size > MAX_DETAILS_CHARS:
            details = {"omitted": f"{tool}'s details ({size:,} characters as JSON) were not kept"}
    if text is output.text and details is output.details:
        return output
    return dataclasses.replace(output, text=text, details=details)
