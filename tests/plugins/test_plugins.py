"""The plugin surface in-process (the example package in a real kernel: tests/kernel/test_plugins_kernel.py):
a typed function as a tool, the plugin manager with real entry points over modules written to a
temporary folder (what each registers, a failing one named, turning one off and on, the older
``ipyagent.hooks`` group), and the MCP transports as a table."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from typing import Any, Literal

import pytest

from ipyagent.agent.mcp.server_definitions import parse_server
from ipyagent.agent.mcp.transports import transport_for
from ipyagent.agent.tools import ToolContext, builtin_tools, default_tools, function_tool, read_only, run_tool_call
from ipyagent.agent.tools import builtin as builtin_tool_plugin
from ipyagent.hooks import AgentEndCall, HookRegistry, TurnEndCall
from ipyagent.plugins import Plugins
from ipyagent.providers import builtin as builtin_provider_plugin
from ipyagent.providers.registry import ProviderRegistry

# ---- a function as a tool ------------------------------------------------------------------------


def test_a_typed_documented_function_is_a_tool_with_its_schema():
    def lookup(city: str, days: int = 3, units: Literal["metric", "imperial"] = "metric",
               tags: list[str] | None = None, context: ToolContext | None = None) -> dict:
        """The weather of a city.

        More prose the description leaves out.

        Args:
            city: the city's name
            days: how many days ahead,
                one to seven
        """
        return {"city": city, "days": days, "cwd": context.cwd if context else None}

    tool = function_tool(lookup)
    assert tool.name == "lookup" and tool.description.startswith("The weather of a city.")
    assert "Args" not in tool.description and not tool.read_only
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city's name"},
            "days": {"type": "integer", "description": "how many days ahead, one to seven"},
            "units": {"enum": ["metric", "imperial"], "type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city"],
    }
    out = run_tool_call(tool, {"city": "Oslo", "days": 2.0}, ToolContext(cwd="/x"), policy="auto")
    assert not out.is_error and out.text == '{"city": "Oslo", "days": 2, "cwd": "/x"}'
    # not marked read-only: under "ask" it asks, and nobody can answer here
    asked = run_tool_call(tool, {"city": "Oslo"}, ToolContext(), policy="ask")
    assert asked.is_error and "did not approve" in asked.text


def test_read_only_runs_without_asking_by_decorator_or_option():
    @read_only
    def shout(text: str) -> str:
        """Say it loudly."""
        return text.upper()

    def whisper(text: str) -> str:
        """Say it softly."""
        return text.lower()

    for tool in (function_tool(shout), function_tool(whisper, read_only=True)):
        out = run_tool_call(tool, {"text": "Hi"}, ToolContext(), policy="ask", approve=None)
        assert tool.read_only and not out.is_error and out.text in ("HI", "hi")


@pytest.mark.parametrize(("source", "message"), [
    ("def f(x: int) -> int:\n    return x", "needs a docstring"),
    ("def f(x) -> int:\n    '''Doc.'''\n    return x", "parameter 'x' has no type hint"),
    ("def f(*xs: int) -> int:\n    '''Doc.'''\n    return 0", r"\*xs cannot be described"),
    ("def f(x: complex) -> int:\n    '''Doc.'''\n    return 0", "has no JSON schema"),
])
def test_a_function_the_model_could_not_call_is_refused_with_the_reason(source, message):
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message):
        function_tool(namespace["f"])


# ---- the manager, over real entry points -------------------------------------------------------------

GOOD = '''
    import argparse
    import ipyagent
    from ipyagent.agent.mcp.transports import McpTransport
    from ipyagent.providers import OpenAIChatProvider

    async def connect(stack, endpoint, context):
        raise RuntimeError("not a real transport")

    def shout(args):
        """Say it loudly."""
        return " ".join(args.words).upper()

    PARSER = argparse.ArgumentParser(description="Say it loudly.")
    PARSER.add_argument("words", nargs="+")

    def seen(event):
        SEEN.append(event.type)

    SEEN = []

    @ipyagent.read_only
    def word_count(text: str) -> int:
        """Count the words."""
        return len(text.split())

    @ipyagent.hookimpl
    def register_tools(register):
        register(word_count)

    @ipyagent.hookimpl
    def register_providers(register):
        register("pluginprov", OpenAIChatProvider)

    @ipyagent.hookimpl
    def register_commands(register):
        register("shout", shout, parser=PARSER)
        register("echo", lambda rest: rest)

    @ipyagent.hookimpl
    def register_hooks(hooks):
        hooks.on("turn_end", seen)

    @ipyagent.hookimpl
    def register_mcp_transports(register):
        register("websocket", connect, types=("ws",), needs="url", url_schemes=("ws://",))
'''

HALF = '''
    import ipyagent

    def first(x: str) -> str:
        """The first tool."""
        return x

    @ipyagent.hookimpl
    def register_tools(register):
        register(first)
        raise ValueError("the second tool is missing")
'''


class Site:
    """Modules written to a folder on sys.path, and entry points naming them."""

    def __init__(self, folder):
        self.folder = folder
        self.points: dict[str, list[importlib.metadata.EntryPoint]] = {}

    def add(self, name: str, source: str, group: str = "ipyagent", value: str | None = None) -> None:
        module = f"plugin_{name}_{id(self)}"
        (self.folder / f"{module}.py").write_text(textwrap.dedent(source))
        point = importlib.metadata.EntryPoint(name, value or module, group)
        self.points.setdefault(group, []).append(point)

    def entry_points(self, group: str):
        return self.points.get(group, [])


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[Plugins] = []
    folder = Site(tmp_path)
    folder.made = made  # type: ignore[attr-defined]
    yield folder
    for plugins in made:  # the MCP transports they added leave that table, which is still the process's
        plugins.set_disabled(list(plugins.records))
    for name in [m for m in sys.modules if m.startswith("plugin_")]:
        del sys.modules[name]


def manager(site: Site, hooks: HookRegistry | None = None, builtins: tuple = ()) -> Plugins:
    """A plugin manager over the site's entry points, with registries of its own."""
    plugins = Plugins(entry_points=site.entry_points, hooks=hooks or HookRegistry(), builtins=builtins)
    site.made.append(plugins)  # type: ignore[attr-defined]
    return plugins


def test_a_plugin_registers_each_kind_and_is_listed_with_what_it_added(site):
    site.add("good", GOOD)
    hooks = HookRegistry()
    plugins = manager(site, hooks)
    assert plugins.load(reserved_commands=["status"]) == []
    record = plugins.records["good"]
    assert record.state == "loaded"
    assert record.summary() == ("tool word_count; provider pluginprov; commands shout, echo; hook turn_end; "
                                "MCP transport websocket")
    assert plugins.tools.find("word_count") is not None and plugins.tools.find("word_count").read_only
    assert "word_count" in [t.name for t in plugins.tools.tools()]
    assert "pluginprov" in plugins.providers.names() and plugins.providers.parse("pluginprov:m") == ("pluginprov", "m")
    # the plugin manager's registries: nothing reached the process's
    assert "word_count" not in [t.name for t in default_tools()]
    assert ProviderRegistry.builtin().factory("pluginprov") is None
    assert plugins.commands["shout"].parser.prog == "agent shout"
    assert plugins.commands["echo"].function("as typed") == "as typed"
    hooks.emit(TurnEndCall())
    assert sys.modules[plugins.records["good"].plugin.__name__].SEEN == ["turn_end"]
    # the transport is selected by a definition's type, and checks its URL scheme
    assert parse_server("sock", {"type": "ws", "url": "ws://localhost:1/mcp"}).transport == "websocket"
    with pytest.raises(ValueError, match="must start with ws://"):
        parse_server("sock", {"type": "ws", "url": "http://localhost:1/mcp"})
    assert "good" in plugins.listing() and "[loaded]" in plugins.listing()


def test_turning_a_plugin_off_takes_back_what_it_added_and_on_again_restores_it(site):
    site.add("good", GOOD)
    hooks = HookRegistry()
    plugins = manager(site, hooks)
    plugins.load()
    [line] = plugins.set_disabled(["good"])
    assert line.startswith("ipyagent: plugin 'good' turned off (it had added tool word_count")
    assert plugins.tools.find("word_count") is None and plugins.providers.registered("pluginprov") is None
    assert plugins.commands == {} and not hooks.has("turn_end") and transport_for("websocket") is None
    assert plugins.records["good"].state == "disabled"
    [line] = plugins.set_disabled([])
    assert "turned on" in line and plugins.tools.find("word_count") is not None and "shout" in plugins.commands


REPLACING = '''
    import ipyagent
    from ipyagent.agent.mcp.transports import McpTransport

    async def connect(stack, endpoint, context):
        raise RuntimeError("not a real transport")

    @ipyagent.read_only
    def read(path: str) -> str:
        """Read a file, the plugin's way."""
        return path

    def openai(model, **options):
        raise RuntimeError("the plugin's provider")

    @ipyagent.hookimpl
    def register_tools(register):
        register(read)

    @ipyagent.hookimpl
    def register_providers(register):
        register("openai", openai)

    @ipyagent.hookimpl
    def register_mcp_transports(register):
        register(McpTransport("stdio", connect))
'''


def test_a_plugin_that_replaces_a_builtin_gives_it_back_when_turned_off(site):
    site.add("replacing", REPLACING)
    plugins = manager(site, builtins=((builtin_tool_plugin.PLUGIN_NAME, builtin_tool_plugin),
                                      (builtin_provider_plugin.PLUGIN_NAME, builtin_provider_plugin)))
    builtin_read = builtin_tools().find("read")
    stdio = transport_for("stdio")
    said = plugins.load()  # each replacement is said (the built-ins were loaded first)
    assert [line.split(" puts its ")[1].split(" in place of ")[0] for line in said] == \
        ["tool 'read'", "provider 'openai'", "MCP transport 'stdio'"], said
    now = plugins.tools.find("read"), plugins.providers.registered("openai"), transport_for("stdio")
    assert now[0].description == "Read a file, the plugin's way." and now[2] is not stdio
    with pytest.raises(ValueError, match="provider 'openai'"):  # the plugin's factory, which takes no options
        plugins.providers.resolve("openai:gpt-4.1")
    plugins.set_disabled(["replacing"])
    assert type(plugins.tools.find("read")) is type(builtin_read) and transport_for("stdio") is stdio
    assert plugins.providers.registered("openai") is not now[1]
    assert plugins.providers.resolve("openai:gpt-4.1")[0].name == "openai"


def test_a_disabled_plugin_is_never_imported(site):
    site.add("good", GOOD)
    plugins = manager(site)
    assert plugins.load(disabled=["good"]) == []
    assert plugins.records["good"].plugin is None and plugins.tools.find("word_count") is None
    assert not [m for m in sys.modules if m.startswith("plugin_good")]


def test_a_failing_plugin_is_named_in_one_line_and_what_it_added_is_taken_back(site):
    site.add("broken", "raise ImportError('no module named nope')\n")
    site.add("half", HALF)
    site.add("typo", "import ipyagent\n\n@ipyagent.hookimpl\ndef register_tool(register):\n    pass\n")
    site.add("clash", "import ipyagent\n\n@ipyagent.hookimpl\ndef register_commands(register):\n"
                      "    register('status', print)\n")
    site.add("good", GOOD)
    plugins = manager(site)
    lines = plugins.load(reserved_commands=["status"])
    assert len(lines) == 4 and all("\n" not in line for line in lines)
    assert "plugin 'broken'" in lines[0] and "ImportError: no module named nope" in lines[0]
    assert "plugin 'half'" in lines[1] and "ValueError: the second tool is missing" in lines[1]
    assert "plugin 'typo'" in lines[2] and "register_tool" in lines[2]
    assert "plugin 'clash'" in lines[3] and "%agent status is a built-in command" in lines[3]
    assert plugins.tools.find("first") is None  # registered before its hook failed: taken back
    assert plugins.records["good"].state == "loaded"  # the others load
    assert [r.state for r in plugins.records.values()] == ["failed", "failed", "failed", "failed", "loaded"]


def test_the_older_hooks_group_still_loads_through_the_same_surface(site):
    site.add("legacy", "SEEN = []\ndef install(hooks):\n    hooks.on('agent_end', lambda call: SEEN.append(call.type))\n",
             group="ipyagent.hooks", value=None)
    site.points["ipyagent.hooks"][0] = importlib.metadata.EntryPoint(
        "legacy", site.points["ipyagent.hooks"][0].value + ":install", "ipyagent.hooks")
    hooks = HookRegistry()
    plugins = manager(site, hooks)
    assert plugins.load() == []
    hooks.emit(AgentEndCall())
    assert sys.modules[site.points["ipyagent.hooks"][0].value.split(":")[0]].SEEN == ["agent_end"]
    assert plugins.records["legacy"].summary() == "hook agent_end"
    assert plugins.load() == []  # once
    assert len(hooks.handlers["agent_end"]) == 1


def test_the_builtin_tools_providers_and_transports_are_plugins():
    plugins = Plugins(entry_points=lambda group: [], hooks=HookRegistry())
    try:
        plugins.load()
        assert list(plugins.records) == ["builtin-tools", "builtin-providers", "builtin-mcp"]
        assert plugins.records["builtin-tools"].names("tool")[:3] == ["python", "read", "bash"]
        assert "anthropic" in plugins.records["builtin-providers"].names("provider")
        assert plugins.records["builtin-mcp"].names("MCP transport") == ["stdio", "http"]
        assert parse_server("t", {"command": "x"}).transport == "stdio"
        assert parse_server("t", {"type": "streamable-http", "url": "http://h/mcp"}).transport == "http"
        with pytest.raises(ValueError, match=r"type 'sse' is not supported \(the transports are: stdio, http, streamable-http"):
            parse_server("t", {"type": "sse", "url": "http://h/mcp"})
    finally:
        plugins.set_disabled([])  # (nothing was turned off: the process's built-ins stay)


def test_a_builtin_disabled_from_the_start_is_taken_away_too():
    plugins = Plugins(entry_points=lambda group: [], hooks=HookRegistry())
    try:
        plugins.load(disabled=["builtin-mcp"])
        assert plugins.records["builtin-mcp"].state == "disabled" and transport_for("stdio") is None
        with pytest.raises(ValueError, match="type 'stdio' is not supported .*builtin-mcp plugin turned off"):
            parse_server("t", {"command": "x"})
    finally:
        plugins.set_disabled([])
    assert transport_for("stdio") is not None and parse_server("t", {"command": "x"}).transport == "stdio"


def test_each_plugin_manager_owns_its_registries(site):
    """Two kernels (two runtimes, each with its plugin manager): a plugin loaded in one, a window
    learned or a server's answer cached in one, is not in the other; nothing is the process's."""
    site.add("good", GOOD)
    builtins = ((builtin_tool_plugin.PLUGIN_NAME, builtin_tool_plugin),
                (builtin_provider_plugin.PLUGIN_NAME, builtin_provider_plugin))
    one, two = manager(site, builtins=builtins), manager(site, builtins=builtins)
    assert one.load() == [] and two.load(disabled=["good"]) == []
    assert one.tools.find("word_count") is not None and two.tools.find("word_count") is None
    assert one.providers.factory("pluginprov") is not None and two.providers.factory("pluginprov") is None
    assert [t.name for t in two.tools.tools()] == [t.name for t in builtin_tools().tools()]
    one.providers.models.learn_window("openai", "my-model", 3000)
    assert one.providers.info("openai:my-model").context_window == 3000
    assert two.providers.info("openai:my-model") is None
    assert one.providers.discovery is not two.providers.discovery
    assert one.providers.resolve("openai:m")[0] is not two.providers.resolve("openai:m")[0]
