"""Loading the plugins: the built-in ones, then every entry point of the ``ipyagent`` group (and of
the older ``ipyagent.hooks`` group, whose entry points are functions of the hook registry), each
called through the hooks of ``hookspecs.py`` with a ``register`` that records what it added.

One :class:`Plugins` per kernel, held by its runtime and loaded once, when the extension loads. It
owns the registries the plugins fill: the tools (``plugins.tools``) and the providers with what is
known of their models (``plugins.providers``), each laid over the user's own (``USER_TOOLS``,
``USER_PROVIDERS``); the runtime passes them to every run.

A plugin that fails (its import, a hook, a registration — ``sys.exit``, an interrupt, or taking
longer than ``Agent.plugin_load_timeout`` included) is named in one line, what it had added is
taken back, and the others load. One that puts a tool, a provider or an MCP transport in place of
another's says so, at load and in ``%agent plugins``. A disabled plugin (``Agent.disabled_plugins``)
is not called; one disabled later has what it added taken back, and one enabled again is called
then.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from ipyagent.agent.mcp import transports as mcp_transports
from ipyagent.agent.tools import builtin as builtin_tools
from ipyagent.agent.tools.tool_registry import USER_TOOLS, ToolRegistry, as_tool
from ipyagent.hooks import SESSION_HOOKS, HookRegistry
from ipyagent.hooks import hooks as process_hooks
from ipyagent.plugin_markers import PROJECT, hookimpl
from ipyagent.plugins.hookspecs import PluginSpec
from ipyagent.providers import builtin as builtin_providers
from ipyagent.providers.registry import USER_PROVIDERS, ProviderRegistry
from ipyagent.text import one_line

__all__ = ["ENTRY_POINT_GROUP", "HOOKS_GROUP", "PluginCommand", "PluginRecord", "Plugins"]

ENTRY_POINT_GROUP = PROJECT  # "ipyagent"
HOOKS_GROUP = "ipyagent.hooks"  # the first plugin surface: an entry point is ``fn(hooks)``
HOOK_NAMES = ("register_tools", "register_providers", "register_commands", "register_hooks",
              "register_mcp_transports")
BUILTINS: tuple[tuple[str, ModuleType], ...] = (
    (builtin_tools.PLUGIN_NAME, builtin_tools),
    (builtin_providers.PLUGIN_NAME, builtin_providers),
    (mcp_transports.PLUGIN_NAME, mcp_transports),
)
COMMAND_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
KINDS = ("tool", "provider", "command", "hook", "MCP transport")  # the order %agent plugins lists them in


@dataclass
class Registration:
    kind: str
    name: str
    undo: Callable[[], None] = field(repr=False)
    replaced: str = ""  # the plugin whose entry of that name this one took the place of

    def shown(self) -> str:
        return f"{self.name} (in place of {self.replaced}'s)" if self.replaced else self.name


@dataclass
class PluginCommand:
    """``%agent NAME`` from a plugin: ``function(args)``, args parsed by ``parser`` if given, else
    the rest of the line."""

    name: str
    function: Callable[..., Any]
    parser: argparse.ArgumentParser | None
    plugin: str

    @property
    def description(self) -> str:
        text = (self.parser.description if self.parser is not None else None) or self.function.__doc__ or ""
        return " ".join(text.strip().split("\n\n")[0].split())


@dataclass
class PluginRecord:
    name: str
    source: str  # "built in", or the distribution and its version
    distribution: str = ""
    loader: Callable[[], Any] | None = field(default=None, repr=False)
    plugin: Any = field(default=None, repr=False)
    registered: list[Registration] = field(default_factory=list)
    error: str = ""
    disabled: bool = False

    @property
    def builtin(self) -> bool:
        return self.source == "built in"

    @property
    def state(self) -> str:
        return "disabled" if self.disabled else "failed" if self.error else "loaded"

    def names(self, kind: str) -> list[str]:
        return [r.name for r in self.registered if r.kind == kind]

    def replacements(self) -> list[Registration]:
        return [r for r in self.registered if r.replaced]

    def summary(self) -> str:
        """What it added, by kind (``tools: a, b; command: c``), or why it is off."""
        if self.disabled:
            return "disabled (Agent.disabled_plugins)"
        if self.error:
            return f"failed: {self.error}"
        parts = []
        for kind in KINDS:
            names = [r.shown() for r in self.registered if r.kind == kind]
            if names:
                parts.append(f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}")
        return "; ".join(parts) or "registered nothing"


class _HooksEntryPoint:
    """An ``ipyagent.hooks`` entry point (a function of the hook registry) as a plugin."""

    def __init__(self, function: Callable[[HookRegistry], Any]):
        self.function = function

    @hookimpl
    def register_hooks(self, hooks: HookRegistry) -> None:
        self.function(hooks)


EntryPoints = Callable[[str], Iterable[Any]]


def _returning(value: Any) -> Callable[[], Any]:
    return lambda: value


def _installed(group: str) -> Iterable[Any]:
    return metadata.entry_points(group=group)


class _TooLong(BaseException):
    """A plugin's loading ran past its time (raised by the alarm in the main thread)."""


@contextlib.contextmanager
def _bounded(seconds: float | None) -> Iterator[None]:
    """Stop what runs inside after ``seconds`` (``_TooLong``), with a timer signal: in the main
    thread (where %load_ext runs) of a system that has one, when no one else uses that signal;
    elsewhere unbounded. A hang in Python code or in a blocking call is stopped; the plugin's own
    code keeps running where it always runs (no thread of its own)."""
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds or 0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _failure(exc: BaseException, timeout: float | None) -> str:
    """Why a plugin failed, in words: what a BaseException that is no error means too."""
    if isinstance(exc, _TooLong):
        return f"it did not finish loading within {timeout:g} s (Agent.plugin_load_timeout)"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while loading"
    if isinstance(exc, KeyboardInterrupt):
        return "its loading was interrupted (KeyboardInterrupt: the interrupt button, or the plugin raising it)"
    return one_line(f"{type(exc).__name__}: {exc}", 300)


class Plugins:
    """The plugin manager (pluggy's, with the specs of ``hookspecs.py``), what each plugin added,
    and the registries they add to (``tools``, ``providers``: new ones laid over the user's, unless
    given)."""

    def __init__(self, *, entry_points: EntryPoints = _installed, hooks: HookRegistry = process_hooks,
                 builtins: Iterable[tuple[str, Any]] = BUILTINS, tools: ToolRegistry | None = None,
                 providers: ProviderRegistry | None = None):
        self.tools = tools if tools is not None else ToolRegistry(user=USER_TOOLS)
        self.providers = providers if providers is not None else ProviderRegistry(user=USER_PROVIDERS)
        self.manager = pluggy.PluginManager(PROJECT)
        self.manager.add_hookspecs(PluginSpec)
        self.entry_points = entry_points
        self.hooks = hooks
        self.builtins = tuple(builtins)
        self.records: dict[str, PluginRecord] = {}
        self.commands: dict[str, PluginCommand] = {}
        self.reserved_commands: set[str] = set()
        self.loaded = False
        self.timeout: float | None = None  # seconds one plugin may take to load and register (None: no limit)

    # ---- loading -----------------------------------------------------------------------------

    def load(self, *, disabled: Iterable[str] = (), reserved_commands: Iterable[str] = (),
             timeout: float | None = None) -> list[str]:
        """Load every plugin once (a second call does nothing), each within ``timeout`` seconds;
        one line per plugin that failed, and per entry a plugin put in place of another's."""
        if self.loaded:
            return []
        self.loaded = True
        self.timeout = timeout
        self.reserved_commands = set(reserved_commands)
        off = set(disabled)
        for name, module in self.builtins:
            self._add(PluginRecord(name, "built in", loader=_returning(module)), off)
        for group in (ENTRY_POINT_GROUP, HOOKS_GROUP):
            try:
                points = list(self.entry_points(group))
            except Exception as exc:  # noqa: BLE001 - broken package metadata: said, never fatal
                return [f"ipyagent: the installed plugins could not be listed ({one_line(str(exc), 160)})"]
            for point in points:
                self._add(self._record(point, group), off)
        lines = [self.failure_line(r) for r in self.records.values() if r.error]
        return lines + [line for r in self.records.values() for line in self.replacement_lines(r)]

    @staticmethod
    def _record(point: Any, group: str) -> PluginRecord:
        dist = getattr(point, "dist", None)
        dist_name = str(getattr(dist, "name", "") or "")
        source = f"{dist_name} {getattr(dist, 'version', '')}".strip() if dist_name else point.value
        if group == HOOKS_GROUP:
            source += f" ({HOOKS_GROUP} entry point)"
            return PluginRecord(point.name, source, dist_name, loader=lambda: _HooksEntryPoint(point.load()))
        return PluginRecord(point.name, source, dist_name, loader=point.load)

    def _add(self, record: PluginRecord, off: set[str]) -> None:
        if record.name in self.records:
            record = PluginRecord(f"{record.name} ({record.source})", record.source, record.distribution)
            record.error = "another plugin has this name; rename its entry point"
            self.records[record.name] = record
            return
        self.records[record.name] = record
        if record.name in off or (record.distribution and record.distribution in off):
            if record.builtin:  # it registered itself on import: taken back like one turned off later
                self._activate(record)
                self._deactivate(record)
            record.disabled = True
            return
        self._activate(record)

    def _activate(self, record: PluginRecord) -> None:
        record.error = ""
        try:
            with _bounded(self.timeout):
                self._activate_now(record)
        except BaseException as exc:  # noqa: BLE001 - sys.exit, an interrupt, a hang: named, never fatal
            self._deactivate(record)
            record.error = _failure(exc, self.timeout)

    def _activate_now(self, record: PluginRecord) -> None:
        """The plugin's import (once) and its ``register_*`` hooks."""
        if record.plugin is None:
            assert record.loader is not None
            plugin = record.loader()
            self.manager.register(plugin, name=record.name)
            try:
                self.manager.check_pending()  # a misspelt hook name is an error, not silence
            except pluggy.PluginValidationError:
                self.manager.unregister(plugin)
                raise
            record.plugin = plugin
        others = [p for p in self.manager.get_plugins() if p is not record.plugin]
        for hook in HOOK_NAMES:
            caller = self.manager.subset_hook_caller(hook, remove_plugins=others)
            if hook == "register_hooks":
                self._call_register_hooks(record, caller)
            else:
                caller(register=self._register(hook, record))

    def _deactivate(self, record: PluginRecord) -> None:
        for registration in reversed(record.registered):
            registration.undo()
        record.registered.clear()

    def failure_line(self, record: PluginRecord) -> str:
        return (f"ipyagent: plugin {record.name!r} ({record.source}) failed to load and is off: {record.error} "
                "(the extension works without it; %agent plugins lists the plugins)")

    @staticmethod
    def replacement_lines(record: PluginRecord) -> list[str]:
        return [f"ipyagent: plugin {record.name!r} ({record.source}) puts its {r.kind} {r.name!r} in place of "
                f"{r.replaced}'s (Agent.disabled_plugins = [{record.name!r}] gives it back)"
                for r in record.replacements()]

    # ---- turning one off and on --------------------------------------------------------------

    def set_disabled(self, names: Iterable[str]) -> list[str]:
        """Apply a new ``Agent.disabled_plugins``: one line per plugin turned off or on."""
        off = set(names)
        lines = []
        for record in list(self.records.values()):
            wanted = record.name in off or bool(record.distribution and record.distribution in off)
            if wanted and not record.disabled:
                what = record.summary()
                self._deactivate(record)
                record.disabled = True
                lines.append(f"ipyagent: plugin {record.name!r} turned off (it had added {what})")
            elif not wanted and record.disabled and record.loader is not None:
                record.disabled = False
                self._activate(record)
                lines.append(self.failure_line(record) if record.error else
                             f"ipyagent: plugin {record.name!r} turned on: {record.summary()}")
                lines.extend(self.replacement_lines(record))
        return lines

    # ---- what a plugin registers -------------------------------------------------------------

    def _register(self, hook: str, record: PluginRecord) -> Callable[..., Any]:
        if hook == "register_tools":
            return lambda item, **options: self._add_tool(record, item, **options)
        if hook == "register_providers":
            return lambda name, factory: self._add_provider(record, name, factory)
        if hook == "register_commands":
            return lambda name, function, parser=None: self._add_command(record, name, function, parser)
        return lambda transport, *args, **options: self._add_transport(record, transport, *args, **options)

    def _add_tool(self, record: PluginRecord, item: Any, **options: Any) -> Any:
        tool = as_tool(item, **options)
        self._keep_undo(record, "tool", tool.name, tool, self.tools.add(tool),
                        current=self.tools.find, put=self.tools.add, remove=self.tools.remove)
        return item

    def _add_provider(self, record: PluginRecord, name: str, factory: Callable[..., Any]) -> None:
        def put(value: Callable[..., Any]) -> Any:
            return self.providers.register(name, value)

        self._keep_undo(record, "provider", name, factory, put(factory),
                        current=self.providers.registered, put=put, remove=self.providers.unregister)

    def _owner(self, kind: str, name: str, record: PluginRecord) -> str:
        """Whose entry ``kind`` ``name`` is, other than ``record`` (a plugin's name, else "a user")."""
        for other in self.records.values():
            if other is not record and any(r.kind == kind and r.name == name for r in other.registered):
                return other.name
        return "an earlier registration"

    def _keep_undo(self, record: PluginRecord, kind: str, name: str, value: Any, previous: Any, *,
                   current: Callable[[str], Any], put: Callable[[Any], Any],
                   remove: Callable[[str], Any]) -> None:
        """Record how to take back one entry a plugin put in a table (tools, providers, MCP
        transports): the entry it replaced comes back, unless someone replaced it since. One that
        took another's place says whose."""
        replaced = self._owner(kind, name, record) if previous is not None and previous is not value \
            and not record.builtin else ""
        if record.builtin:
            previous = None  # its own registration at import: turned off, the entry is gone

        def undo() -> None:
            if current(name) is value:
                if previous is not None:
                    put(previous)
                else:
                    remove(name)

        record.registered.append(Registration(kind, name, undo, replaced))

    def _add_command(self, record: PluginRecord, name: str, function: Callable[..., Any],
                     parser: argparse.ArgumentParser | None) -> None:
        if not isinstance(name, str) or not COMMAND_NAME.match(name):
            raise ValueError(f"command name {name!r}: use a lowercase word (letters, digits, '-', '_')")
        if name in self.reserved_commands:
            raise ValueError(f"%agent {name} is a built-in command; choose another name")
        if name in self.commands:
            raise ValueError(f"%agent {name} is registered already by the plugin {self.commands[name].plugin!r}")
        if not callable(function):
            raise TypeError(f"%agent {name}: the function must be callable, got {function!r}")
        if parser is not None and not isinstance(parser, argparse.ArgumentParser):
            raise TypeError(f"%agent {name}: the parser must be an argparse.ArgumentParser, got {parser!r}")
        if parser is not None:
            parser.prog = f"agent {name}"  # its usage reads as typed (the help writes the "%")
        command = self.commands[name] = PluginCommand(name, function, parser, record.name)

        def undo() -> None:
            if self.commands.get(name) is command:
                del self.commands[name]

        record.registered.append(Registration("command", name, undo))

    def _call_register_hooks(self, record: PluginRecord, caller: Any) -> None:
        before = {event: list(self.hooks.handlers.get(event, [])) for event in SESSION_HOOKS}
        try:
            caller(hooks=self.hooks)
        finally:  # what it added before failing is taken back with the rest
            for event in SESSION_HOOKS:
                for handler in self.hooks.handlers.get(event, []):
                    if handler not in before[event]:
                        record.registered.append(Registration("hook", event, self._unhook(event, handler)))

    def _unhook(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        return lambda: self.hooks.off(event, handler)

    def _add_transport(self, record: PluginRecord, item: Any, *args: Any, **options: Any) -> None:
        transport = item if isinstance(item, mcp_transports.McpTransport) else \
            mcp_transports.McpTransport(item, *args, **options)
        self._keep_undo(record, "MCP transport", transport.name, transport,
                        mcp_transports.register_transport(transport),
                        current=mcp_transports.transport_for, put=mcp_transports.register_transport,
                        remove=mcp_transports.unregister_transport)

    # ---- reading -----------------------------------------------------------------------------

    def listing(self) -> str:
        """``%agent plugins``: each plugin, where it comes from, and what it added (or why not)."""
        if not self.records:
            return "no plugins loaded (the extension loads them at %load_ext ipyagent)"
        width = max(len(name) for name in self.records)
        lines = [f"{r.name:<{width}}  [{r.state}] {r.source}: {r.summary()}" for r in self.records.values()]
        lines.append("Turn one off with %config Agent.disabled_plugins = ['NAME']; docs/extending.md writes one.")
        return "\n".join(lines)
