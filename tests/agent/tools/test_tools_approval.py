"""The registry and run_tool_call: approval policy, argument checks, errors as results."""

from typing import Any

import pytest

from ipyagent.agent.tools import (
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    builtin_tools,
    default_tools,
    get_tool,
    run_tool_call,
)
from support.builders import Approver

BUILTINS = ["python", "read", "bash", "write", "edit", "ls", "grep", "find", "recall", "notebook"]


class Recorder(Tool):
    name = "recorder"
    description = "Records its calls."
    parameters = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "label": {"type": "string"}, "flag": {"type": "boolean"}},
        "required": ["n"],
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        self.calls.append(arguments)
        return ToolOutput(f"ran with {arguments}")


class Boom(Tool):
    name = "boom"
    description = "Always fails."
    parameters = {"type": "object", "properties": {}}
    read_only = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        raise ValueError("kaput")


CTX = ToolContext()


# ---- registry ------------------------------------------------------------------------------


def test_builtins_are_registered_with_schemas():
    tools = default_tools()
    assert [t.name for t in tools][:len(BUILTINS)] == BUILTINS
    for tool in tools[:len(BUILTINS)]:
        spec = tool.spec().to_dict()
        assert spec["parameters"]["type"] == "object" and spec["description"]
    read_only = {t.name for t in tools[:len(BUILTINS)] if t.read_only}
    assert read_only == {"read", "ls", "grep", "find", "recall"}
    assert set(get_tool("read").parameters["properties"]) == {"path", "offset", "limit"}
    assert set(get_tool("edit").parameters["required"]) == {"path", "oldText", "newText"}


def test_user_tools_register_like_builtins():
    """A user's registry laid over the built-ins (what ``register_tool`` fills, process-wide: that
    one is tested in a kernel, tests/kernel/test_user_registrations.py)."""
    user = ToolRegistry()
    tools = builtin_tools(user=user)
    assert user.register(Recorder) is Recorder  # usable as a class decorator
    assert isinstance(tools.get("recorder"), Recorder) and tools.find("recorder") is None  # the user's, not its own
    names = [t.name for t in tools.tools()]
    assert names[:len(BUILTINS)] == BUILTINS and names[-1] == "recorder"
    instance = Recorder()
    user.register(instance)
    assert tools.get("recorder") is instance
    user.remove("recorder")
    with pytest.raises(KeyError, match="unknown tool 'recorder'"):
        tools.get("recorder")
    assert "recorder" not in [t.name for t in default_tools()]  # nothing reached the process's


def test_overriding_a_builtin_keeps_its_place():
    class MyLs(Tool):
        name = "ls"
        description = "custom"
        parameters = {"type": "object", "properties": {}}

    user = ToolRegistry()
    tools = builtin_tools(user=user)
    user.register(MyLs)
    assert isinstance(tools.get("ls"), MyLs) and not isinstance(tools.find("ls"), MyLs)
    assert [t.name for t in tools.tools()] == BUILTINS
    assert not isinstance(get_tool("ls"), MyLs)


def test_register_rejects_incomplete_tools():
    class Nameless(Tool):
        description = "x"
        parameters = {"type": "object"}

    with pytest.raises(TypeError):
        ToolRegistry().register(Nameless)
    with pytest.raises(TypeError):
        ToolRegistry().register(object())


# ---- approval ------------------------------------------------------------------------------


def test_read_only_tools_run_without_asking(tmp_path):
    (tmp_path / "f.txt").write_text("hi\n")
    approver = Approver(answer=False)
    out = run_tool_call(get_tool("read"), {"path": "f.txt"}, ToolContext(cwd=str(tmp_path)), approve=approver)
    assert out.text == "hi" and approver.asked == []


def test_ask_policy_asks_and_runs_when_approved():
    tool, approver = Recorder(), Approver(answer=True)
    out = run_tool_call(tool, {"n": 1}, CTX, policy="ask", approve=approver)
    assert not out.is_error and tool.calls == [{"n": 1}]
    assert approver.asked == [("recorder", {"n": 1})]


def test_declined_call_is_not_run():
    tool = Recorder()
    out = run_tool_call(tool, {"n": 1}, CTX, policy="ask", approve=Approver(answer=False))
    assert out.is_error and out.text.startswith("The user declined running `recorder`.")
    assert tool.calls == []


def test_auto_policy_never_asks():
    tool, approver = Recorder(), Approver(answer=False)
    out = run_tool_call(tool, {"n": 2}, CTX, policy="auto", approve=approver)
    assert not out.is_error and tool.calls == [{"n": 2}] and approver.asked == []


def test_headless_ask_refuses_with_a_readable_message(tmp_path):
    out = run_tool_call(get_tool("bash"), {"command": "touch made"}, ToolContext(cwd=str(tmp_path)))
    assert out.is_error
    assert out.text == (
        'The user did not approve running `bash` (tool_approval is "ask" and nobody can answer here). '
        'Set %config Agent.tool_approval = "auto" to allow it.'
    )
    assert not (tmp_path / "made").exists()


def test_failing_approval_callback_refuses():
    tool = Recorder()

    def broken(name: str, arguments: dict[str, Any]) -> bool:
        raise RuntimeError("no frontend")

    out = run_tool_call(tool, {"n": 1}, CTX, approve=broken)
    assert out.is_error and "RuntimeError: no frontend" in out.text and tool.calls == []


def test_unknown_policy_is_a_programming_error():
    with pytest.raises(ValueError):
        run_tool_call(Recorder(), {"n": 1}, CTX, policy="sometimes")  # type: ignore[arg-type]


# ---- arguments and errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "missing required argument `n`"),
        ({"n": None}, "missing required argument `n`"),
        ({"n": "3"}, "`n` must be of type integer, got str"),
        ({"n": 1.5}, "`n` must be of type integer, got float"),
        ({"n": True}, "`n` must be of type integer, got bool"),
        ({"n": 1, "flag": "yes"}, "`flag` must be of type boolean, got str"),
    ],
)
def test_invalid_arguments_are_an_error_result_and_nothing_runs(arguments, message):
    tool, approver = Recorder(), Approver(answer=True)
    out = run_tool_call(tool, arguments, CTX, approve=approver)
    assert out.is_error and out.text.startswith("Invalid arguments for `recorder`: ")
    assert message in out.text
    assert tool.calls == [] and approver.asked == []


def test_arguments_must_be_an_object():
    out = run_tool_call(Recorder(), ["n", 1], CTX, policy="auto")
    assert out.is_error and "must be a JSON object, got list" in out.text


def test_integral_floats_become_ints_and_nulls_are_dropped():
    tool = Recorder()
    run_tool_call(tool, {"n": 3.0, "label": None}, CTX, policy="auto")
    assert tool.calls == [{"n": 3}] and type(tool.calls[0]["n"]) is int


def test_tool_exception_becomes_an_error_result():
    out = run_tool_call(Boom(), {}, CTX)
    assert out.is_error and out.text == "`boom` failed: ValueError: kaput"


def test_keyboard_interrupt_from_a_tool_propagates():
    class Interrupted(Boom):
        def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_tool_call(Interrupted(), {}, CTX)


def test_python_tool_through_the_runner_with_approval(tmp_path):
    ctx = ToolContext(cwd=str(tmp_path), namespace={})
    out = run_tool_call(get_tool("python"), {"code": "a = 20\na + 22"}, ctx, approve=Approver(True))
    assert out.text == "42" and ctx.namespace["a"] == 20
