"""MCP tool names and schemas as every provider accepts them, server definitions checked, and
results turned into tool results (pure: no server)."""

from __future__ import annotations

import base64
import json
import re

import pytest

from ipyagent.agent.mcp.mcp_tool import McpTool, offered_tools, recorded_tools
from ipyagent.agent.mcp.names import adapt_schema, wire_name
from ipyagent.agent.mcp.results import tool_output
from ipyagent.agent.mcp.server_definitions import parse_server, parse_servers
from ipyagent.agent.tools.tool import ToolContext
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES

ALLOWED = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's and Anthropic's function-name rule


def test_names_are_pis_form_and_fit_every_provider():
    assert wire_name("time", "get_current_time") == "mcp__time__get_current_time"
    odd = wire_name("my.server", "tool with spaces/and:colons")
    assert ALLOWED.match(odd) and odd.startswith("mcp__my_server__tool_with_spaces")
    long_a = wire_name("a-very-long-server-name-for-tests", "a_tool_name_that_goes_on_and_on_alpha")
    long_b = wire_name("a-very-long-server-name-for-tests", "a_tool_name_that_goes_on_and_on_beta")
    assert ALLOWED.match(long_a) and ALLOWED.match(long_b) and long_a != long_b
    assert wire_name("s", "t", taken={"mcp__s__t"}) == "mcp__s__t_2"


def test_schemas_are_objects_without_what_openai_rejects_at_the_top():
    assert adapt_schema(None) == {"type": "object", "properties": {}}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "anyOf": [{}], "properties": {"a": {"type": "string"}},
              "required": ["a"]}
    assert adapt_schema(schema) == {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_server_definitions_are_checked():
    servers, problems = parse_servers({"ok": {"command": "x", "args": ["-v"], "env": {"K": "secret"}},
                                       "both": {"command": "x", "url": "http://h/mcp"},
                                       "bad url": {"url": "ftp://h"}})
    assert [s.name for s in servers] == ["ok"] and len(problems) == 2
    ok = servers[0]
    assert "secret" not in repr(ok) and "secret" not in ok.shown() and "K" in ok.shown()
    assert parse_server("h", {"url": "https://h/mcp", "tools": ["a"]}).enabled_tools == ("a",)
    with pytest.raises(ValueError, match="args"):
        parse_server("n", {"command": "x", "args": "not a list"})


def test_results_text_images_structured_and_errors():
    from io import BytesIO

    from PIL import Image

    buffer = BytesIO()
    Image.new("RGB", (4, 3), "red").save(buffer, format="PNG")  # a real PNG: headers are checked
    png = base64.b64encode(buffer.getvalue()).decode()
    result = {"content": [{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/png", "data": png},
                          {"type": "image", "mimeType": "image/png", "data": "bm90IGFuIGltYWdl"}],
              "structuredContent": {"n": 1}}
    out = tool_output(result, server="s", tool="t")
    assert out.text.startswith("hi") and "dropped" in out.text and len(out.images) == 1
    assert out.details["structuredContent"] == {"n": 1} and not out.is_error
    only_structured = tool_output({"content": [], "structuredContent": {"n": 2}}, server="s", tool="t")
    assert only_structured.text == '{"n": 2}'
    assert tool_output({"content": [{"type": "text", "text": "no"}], "isError": True}, server="s", tool="t").is_error


def test_one_line_over_the_limit_reaches_the_model_cut_by_characters_not_emptied():
    line = json.dumps({"rows": ["é" + "x" * 98] * 600})  # one JSON line of ~60 KB, multi-byte characters in it
    out = tool_output({"content": [{"type": "text", "text": line}]}, server="s", tool="dump")
    kept, _, notice = out.text.partition("\n\n[")
    assert line.startswith(kept) and len(kept.encode()) <= DEFAULT_MAX_BYTES and len(kept) > 40_000
    assert "of line 1" in notice and "0 lines" not in notice
    structured = tool_output({"content": [], "structuredContent": {"blob": "y" * 80_000}}, server="s", tool="t")
    assert structured.text.startswith('{"blob": "yyy') and len(structured.text) > 40_000


class _Listed:
    def __init__(self, name):
        self.name, self.description, self.input_schema = name, f"{name} tool", {"type": "object"}


def test_offered_tools_follow_the_enabled_list_and_always_ask():
    config = parse_server("git", {"command": "x", "tools": ["git_log"]})
    tools = offered_tools([(config, [_Listed("git_log"), _Listed("git_reset")])], caller=None, taken={"python"})
    assert [t.name for t in tools] == ["mcp__git__git_log"]
    assert tools[0].approval_reason({}, ToolContext()) is not None  # asks under tool_approval = "ask"
    replayed = recorded_tools([t.spec().to_dict() for t in tools] + [{"name": "python"}])
    assert [t.name for t in replayed] == ["mcp__git__git_log"]
    assert isinstance(replayed[0], McpTool) and replayed[0].run({}, ToolContext()).is_error  # never a server


def test_the_base_install_works_without_the_mcp_package():
    import subprocess
    import sys

    code = """
import sys
sys.modules["mcp"] = None  # as if the mcp extra were not installed
import ipyagent, ipyagent.kernel.extension, ipyagent.kernel.magics
from ipyagent.agent.mcp.server_definitions import parse_server
from ipyagent.agent.mcp.hub import McpHub
hub = McpHub()
hub.start(parse_server("time", {"command": "mcp-server-time"}))
hub.wait_ready(["time"], 30)
print(hub.status("time").state, "|", hub.status("time").error)
hub.close()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failed | MCP server 'time': the MCP client is not installed: pip install 'ipyagent[mcp]'"
