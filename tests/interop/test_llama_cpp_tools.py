"""Tools, and requests that cannot fit, against the real llama-cpp-python server (issue 28, items 1–3).

What the server does with tools (0.3.36, seen here):
* started as docs/context-windows.md's "Local servers" first showed it (no ``--chat_format``), it
  formats the prompt with the model's own chat template, which has no place for tools: the
  definitions are left out without a word, and the model writes made-up calls as text;
* with ``--chat_format chatml-function-calling`` it offers the tools only when the request says
  ``tool_choice`` (a missing one counts as ``"none"``), and a *streamed* request whose reply calls a
  tool fails inside the server ("Automatic streaming tool choice is not supported"): a ``200``
  with an empty body. Whole (non-streamed) answers carry the tool calls, and usage.
* in that format a tool call's arguments are generated under a JSON-schema grammar without the
  request's ``max_tokens``: the test tool takes two integers, so a call stays short.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from ipyagent import AgentLoop, Session
from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.hooks import HookRegistry
from kernel_support import notebook, path_of
from support.outputs import outputs_text

from .llama_server import MODEL_ALIAS, N_CTX, TOOLS_FORMAT, LlamaServer, point_kernels_at, start_server
from .test_llama_cpp_server import MAX_OUTPUT, all_output_text, run, session_of, setup


class Add(Tool):
    name: ClassVar[str] = "add"
    description: ClassVar[str] = "Add two whole numbers and return their sum."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "required": ["a", "b"],
                                            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    read_only: ClassVar[bool] = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput(str(int(arguments["a"]) + int(arguments["b"])))


@pytest.fixture(scope="module")
def tools_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The server as it must run for tools: ``--chat_format chatml-function-calling``."""
    server = start_server(tmp_path_factory.mktemp("llama-server-tools") / "server.log", extra=TOOLS_FORMAT)
    print(f"\n[interop] llama-cpp-python server (chatml-function-calling) ready in {server.started_in:.1f} s")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "whole-answers"])
def test_a_tool_call_runs_with_the_function_calling_format(tools_server: LlamaServer, stream: bool):
    options: dict[str, Any] = {"base_url": tools_server.base_url}
    if not stream:
        options["stream"] = False
    # one tool round: this model calls the tool again and again, and the call is what is tested
    config = RunConfig(model=f"openai:{tools_server.model}", max_output_tokens=MAX_OUTPUT, max_tool_rounds=1,
                         provider_options={"openai": options})
    agent = AgentLoop(Session(hooks=HookRegistry()), config=config, tools=[Add()])
    notices: list[str] = []
    agent.subscribe(lambda e: notices.append(e.message) if isinstance(e, ev.Notice) else None)
    try:
        result = agent.prompt("Use the add tool to add 2 and 3.")
    finally:
        agent.providers.resolve(config.model, config.provider_options)[0].close()
    calls = [b for e in result.new_entries if e.get("type") == "message" and e["message"]["role"] == "assistant"
             for b in e["message"]["content"] if b["type"] == "toolCall"]
    outputs = [e["message"] for e in result.new_entries
               if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert calls and calls[0]["name"] == "add", result.new_entries
    assert outputs and not outputs[0]["isError"]
    a, b = calls[0]["arguments"]["a"], calls[0]["arguments"]["b"]
    assert outputs[0]["content"][0]["text"] == str(a + b)  # the tool really ran
    assert not [n for n in notices if "left the tool definitions out" in n]
    # the server cannot stream a tool call: a request that met its empty stream was sent whole, and
    # that is said once (or the request went whole at once, to read the server's count of it)
    assert len([n for n in notices if "go whole from now on" in n]) <= 1, notices


def test_a_server_that_leaves_the_tools_out_is_named_once_in_the_cells(real_provider_env: LlamaServer, tmp_path):
    # the server without --chat_format, as a newcomer starts it; tools on (the default)
    prompt = "%%agent\nUse the python tool to print the sum of 2 and 3."
    nb = notebook(setup(window=N_CTX, reserve=128, keep=100), prompt, prompt)
    outcome = run(nb, tmp_path, "2 cells with tools, server without a function-calling format")
    shown = all_output_text(outcome.nb)
    said = [c for c in outcome.nb["cells"][1:3] if "left the tool definitions out" in outputs_text(c["outputs"])]
    assert len(said) == 1, shown  # once, in the first cell
    text = outputs_text(said[0]["outputs"])
    print("\n[interop] the message, as the cell shows it:\n" + text[text.index("The server left"):][:700])
    assert "--chat_format chatml-function-calling" in text and "--no-tools" in text


def plain(output: dict[str, Any]) -> str:
    text = (output.get("data") or {}).get("text/plain") or output.get("text") or ""
    return text if isinstance(text, str) else "".join(text)


LOG_LINE = "2026-12-02 12:00:{:02d} INFO worker-{} processed batch {} in 0.{:03d} s, 512 rows, 0 errors, queue 3"


def test_a_prompt_too_large_for_any_compaction_is_said_first_and_the_window_is_kept(
        real_provider_env: LlamaServer, tmp_path):
    # No window configured: the server names it in its overflow error. The pasted log (~3,000
    # tokens) cannot fit its 2,048 even with the whole earlier conversation summarised away.
    log = "\n".join(LOG_LINE.format(i % 60, i % 4, i, i % 1000) for i in range(150))
    first = "%%agent --no-tools\nIn one short sentence: what is a log file?"
    pasted = f"%%agent --no-tools\nWhat went wrong here?\n{log}"
    nb = notebook("%load_ext ipyagent\n"
                  f"%config Agent.model = 'openai:{MODEL_ALIAS}'\n%config Agent.max_output_tokens = {MAX_OUTPUT}",
                  first, pasted, "%agent status")
    # the pasted cell fails as a failing cell does (AgentCellError); the run goes on past it, as a
    # notebook says with this tag for nbclient and papermill
    nb["cells"][2]["metadata"]["tags"] = ["raises-exception"]
    outcome = run(nb, tmp_path, "a prompt larger than the window")
    entries = session_of(outcome)["entries"]
    assert not [e for e in entries if e["type"] == "compaction"]  # nothing summarised for nothing
    cell = outputs_text(outcome.nb["cells"][2]["outputs"])
    assert "compacting and retrying" not in cell and "Automatic compaction skipped" not in cell
    said = [plain(o) for o in outcome.nb["cells"][2]["outputs"] if plain(o).startswith("Model error")]
    assert len(said) == 1, cell  # said once, and first
    print("\n[interop] the cell's error:\n" + said[0])
    assert "even after the deepest compaction" in said[0] and "one prompt (entry" in said[0]
    assert "window from an overflow error" in all_output_text({"cells": outcome.nb["cells"][3:]})
    learned = session_of(outcome)["settings"]["learned_window"]
    assert learned["window"] == N_CTX and learned["source"] == "error"

    # a restart (the saved notebook run again in a new kernel): the window is still known
    saved = tmp_path / "saved.ipynb"
    again = dict(outcome.nb, cells=[*outcome.nb["cells"][:1], *notebook("%agent status", prefix="again")["cells"]])
    reopened = run(again, tmp_path, "the saved notebook in a new kernel")
    status = all_output_text({"cells": reopened.nb["cells"][1:]})
    # for that session: a window read from a notebook is named as such (issue 35, item 2)
    assert f"/ {N_CTX:,} tokens" in status and "window learned in this notebook on " in status, status
    assert len(path_of(session_of(reopened))) >= len(path_of(session_of(outcome)))

    import nbformat
    nbformat.write(nbformat.from_dict(outcome.nb), saved)
    inspected = subprocess.run([sys.executable, "-m", "ipyagent", "inspect", str(saved)], capture_output=True,
                               text=True, check=True).stdout
    assert f"of {N_CTX:,} (learned from an overflow error" in inspected, inspected


# ---- issue 37, item 2: a python call that quotes runs ---------------------------------------------

ONLY_PYTHON = ("from ipyagent.agent.tools.tool_registry import default_tools, unregister_tool\n"
               "for _tool in default_tools():\n"
               "    if _tool.name != 'python':\n"
               "        unregister_tool(_tool.name)\n")
ESCAPED = "print(sales[&#39;units&#39;][1])"  # what SmolLM2 writes, reading the escaped prompt
# The 135M model copies the prompt's code about one time in three (else it writes noise), so the
# request's schema holds its code to what it writes when it does: the server turns the schema
# into the grammar its reply is sampled under. Everything else is the server's and the kernel's.
HOLD_TO_WHAT_IT_WRITES = (
    "from ipyagent.hooks import hooks as _hooks\n"
    "@_hooks.on('before_provider_request')\n"
    "def _hold(event):\n"
    "    tools = [t.to_dict() for t in event.payload.tools]\n"
    "    for t in tools:\n"
    f"        t['parameters'] = {{**t['parameters'], 'properties': {{'code': {{'type': 'string', 'enum': [{ESCAPED!r}]}}}}}}\n"
    "    event.payload.options['extra_body'] = {'tools': [{'type': 'function', 'function': t} for t in tools]}\n")


def test_a_python_call_with_quotes_and_brackets_runs(tools_server: LlamaServer, monkeypatch, tmp_path):
    # The server's template shows the model the prompt HTML-escaped (' as &#39;), and the model
    # copies what it reads: before, the call failed with a SyntaxError. A short system prompt and
    # the python tool alone keep the prompt small (about 300 tokens).
    point_kernels_at(tools_server, monkeypatch)
    setup = "\n".join([
        "%load_ext ipyagent", f"%config Agent.model = 'openai:{MODEL_ALIAS}'",
        f"%config Agent.max_output_tokens = {MAX_OUTPUT}", "%config Agent.tool_approval = 'auto'",
        "%config Agent.max_tool_rounds = 2",
        "%config Agent.system_prompt = 'You run Python code for the user with the python tool.'",
        ONLY_PYTHON + HOLD_TO_WHAT_IT_WRITES + "sales = {'units': [3, 5, 8]}"])
    nb = notebook(setup, "%%agent\nRun print(sales['units'][1]) with python.")
    outcome = run(nb, tmp_path, "a python call that quotes, chatml-function-calling")
    entries = path_of(session_of(outcome))
    replies = [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    calls = [b for m in replies for b in m["content"] if b["type"] == "toolCall"]
    results = [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    print(f"\n[interop] the calls: {[c['arguments'] for c in calls]}; the results: "
          f"{[r['content'][0]['text'] for r in results]}")
    assert calls and calls[0]["name"] == "python" and calls[0]["id"].startswith("call__0_python_cmpl-"), calls
    assert calls[0]["arguments"]["code"] == "print(sales['units'][1])"  # unescaped once, at the boundary
    assert not results[0]["isError"] and results[0]["content"][0]["text"].strip() == "5", results[0]
    assert len(replies) == 2  # the model was asked again, with the result (as a user message)
    shown = outputs_text(outcome.nb["cells"][1]["outputs"])
    assert shown.count("chatml-function-calling template") == 1, shown  # said once, in the cell


def test_the_wire_messages_reach_the_template_with_the_tool_result():
    # llama-cpp-python's own chatml-function-calling handler renders what ipyagent sends for a
    # conversation with a call of that format and its result: the result is in the model's prompt
    # (a role "tool" message would render as nothing)
    from llama_cpp import llama_chat_format

    from ipyagent.agent.tools.builtin.python import PythonTool
    from ipyagent.providers import ModelRequest
    from ipyagent.providers.apis.openai_chat import OpenAIChatProvider

    call_id = "call__0_python_cmpl-fc550a01-7ddb-4ab1-b2ab-bb275353aad0"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Run print(sales['units'][1]) with python."}]},
        {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": "python",
                                           "arguments": {"code": "print(sales['units'][1])"}}],
         "api": "openai-completions", "provider": "openai", "model": MODEL_ALIAS, "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": call_id, "toolName": "python",
         "content": [{"type": "text", "text": "RESULT-5"}], "isError": False},
    ]
    provider = OpenAIChatProvider(base_url="http://127.0.0.1:9/v1", api_key="unused")
    body = provider.payload(ModelRequest(model=MODEL_ALIAS, messages=messages, system_prompt="You run Python.",
                                         tools=[PythonTool().spec()]))
    prompts: list[str] = []

    class Capture:
        verbose = False

        def create_completion(self, prompt: str, **kwargs: Any) -> Any:
            prompts.append(prompt)
            raise StopIteration  # the prompt is all this test reads

    with pytest.raises(StopIteration):
        llama_chat_format.chatml_function_calling(Capture(), body["messages"], tools=body["tools"],
                                                  tool_choice=body["tool_choice"])
    assert "Result of functions.python:\nRESULT-5" in prompts[0], prompts[0]
