""":class:`AgentSettings`: the traitlets configurable behind ``%config Agent.…`` and ``c.Agent.…`` in
``ipython_config.py`` (its config section, and its class name as ``%config`` sees it, is ``Agent``).

Every setting the notebook layer reads comes from here; :meth:`AgentSettings.run_config` turns the
traits into the agent loop's plain :class:`~ipyagent.agent.run_config.RunConfig`. What is saved with
a session is :meth:`RunConfig.saved_settings` — never ``provider_options`` (which may hold keys).
"""

from __future__ import annotations

import os
from typing import Any

import traitlets
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode, default, validate
from traitlets.config import Configurable

from ipyagent.agent.mcp.server_definitions import check_user_servers
from ipyagent.agent.prompt.instructions import INSTRUCTION_NAMES
from ipyagent.agent.run_config import DEFAULT_MODEL_ENV, SYSTEM_PROMPT, RunConfig
from ipyagent.compaction.settings import CompactionSettings, checked_model_overrides
from ipyagent.providers.transport.http import strip_url_credentials
from ipyagent.store.validation import strip_secrets

__all__ = ["SETTING_NAMES", "AgentSettings", "ShownWithoutSecrets"]


def _masked(value: Any) -> Any:
    """``value`` for display: secrets under secret-looking names or with secret-looking values
    become ``***``, URLs lose their ``user:password@``."""
    if isinstance(value, dict):
        kept = strip_secrets(value)
        return {k: _masked(v) if k in kept else "***" for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_masked(v) for v in value)
    return strip_url_credentials(value) if isinstance(value, str) else value


class ShownWithoutSecrets(dict[str, Any]):
    """A dict whose repr masks its secrets. ``%config Agent`` lists every trait with ``repr``, and
    ``%config Agent.provider_options`` displays the value, so the keys in ``provider_options``
    must not show there. The nested dicts are of this class too."""

    def __repr__(self) -> str:
        return repr(_masked(self))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("{...}" if cycle else repr(self))


def _shown_without_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return ShownWithoutSecrets({k: _shown_without_secrets(v) for k, v in value.items()})
    return value


def _plain(value: Any) -> Any:
    """Plain dicts again, for the providers (their cache keys are built with repr)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class ServersShownWithoutSecrets(dict[str, Any]):
    """``Agent.mcp_servers`` as ``%config`` shows it: every ``env`` and ``headers`` value is ``***``
    (whatever its name: a server's variables are its credentials), URLs lose their credentials."""

    def __repr__(self) -> str:
        return repr(servers_shown(self))

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("{...}" if cycle else repr(self))


def servers_shown(servers: Any) -> Any:
    """A copy of MCP server definitions with the secrets masked."""
    if not isinstance(servers, dict):
        return servers
    out = {}
    for name, spec in servers.items():
        if isinstance(spec, dict):
            spec = {k: ({kk: "***" for kk in v} if k in ("env", "headers") and isinstance(v, dict) else _masked(v))
                    for k, v in spec.items()}
        out[name] = spec
    return out


class _McpServers(Dict):
    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        if value is None:
            return None
        try:
            return ServersShownWithoutSecrets(check_user_servers(value))
        except ValueError as exc:
            raise traitlets.TraitError(str(exc)) from None


class _ProviderOptions(Dict):
    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        return None if value is None else _shown_without_secrets(value)


class _Share(Float):  # type: ignore[type-arg]
    """A share of the compaction threshold, 0 to 1: ``False`` is 0 (off), ``True`` the default."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            value = self.default_value if value else 0.0
        value = super().validate(obj, value)
        if not 0 <= value <= 1:
            raise traitlets.TraitError(f"Agent.{self.name} is a share of the compaction threshold (0 to 1, 0: off), "
                                       f"got {value}")
        return value


MCP_START_WAIT = 30.0  # seconds; Claude Code reads MCP_TIMEOUT (milliseconds) for the same wait


class AgentSettings(Configurable):
    """ipyagent's settings. ``%config Agent`` lists them; ``%config Agent.model = "openai:gpt-4.1-mini"``."""

    model = Unicode(help="The model, as provider:model (default: $IPYAGENT_MODEL).").tag(config=True)
    summary_model = Unicode(None, allow_none=True,
                            help="A (cheaper) model for compaction summaries; default: the session model."
                            ).tag(config=True)
    context_window = Int(None, allow_none=True,
                         help="The model's context window in tokens; default: the bundled model table."
                         ).tag(config=True)
    reserve_tokens = Int(None, allow_none=True,
                         help="Tokens kept free for the reply; compaction starts above window − reserve. None "
                              "(default): derived from the window, Pi's 16,384 from 65,536 tokens up, window / 4 "
                              "below.").tag(config=True)
    keep_recent_tokens = Int(None, allow_none=True,
                             help="Tokens of recent work kept verbatim by a compaction. None (default): derived "
                                  "from the window, Pi's 20,000 from 65,536 tokens up, about 30 % of it below."
                             ).tag(config=True)
    # becomes RunConfig.compaction.enabled (Pi's CompactionSettings.enabled)
    auto_compact = Bool(True, help="Compact automatically when the context passes the threshold.").tag(config=True)
    idle_compaction = _Share(0.85, help="Compact in the kernel's idle time: after a %%agent run, once the kernel "
                                       "has been idle for idle_compaction_delay seconds, when the context is above "
                                       "this share of the compaction threshold (the summary is made in a worker "
                                       "thread; ordinary cells run meanwhile, the next %%agent cell waits for it). "
                                       "0 or False: off (True: 0.85). Never in ipyagent run or a replay."
                            ).tag(config=True)
    idle_compaction_delay = Float(2.0, help="Seconds without an executing cell before an idle compaction starts."
                                  ).tag(config=True)
    auto_mask_turns = Int(None, allow_none=True,
                          help="Before compacting automatically, hide tool results older than the last N turns "
                               "behind placeholders (context edits: no model call; recall returns them) and "
                               "compact only if that is not enough. None (default): off, as in Pi."
                          ).tag(config=True)
    model_overrides = Dict(default_value={},
                           help='Per-model budgets, Pi\'s compaction.modelOverrides: {"provider/model": '
                                '{"reserveTokens": N, "keepRecentTokens": N}}; each falls back to reserve_tokens '
                                '/ keep_recent_tokens.').tag(config=True)
    tool_approval = CaselessStrEnum(["ask", "auto"], default_value="ask",
                                    help='"ask": tools that change files, run commands or code ask first; '
                                         '"auto": they run without asking.').tag(config=True)
    max_tool_rounds = Int(None, allow_none=True,
                          help="Stop a run after this many model turns with tool calls (None: no limit)."
                          ).tag(config=True)
    max_output_tokens = Int(None, allow_none=True, help="max_tokens for each reply.").tag(config=True)
    max_retries = Int(3, help="Retries of a rate-limited or failed request (429 / 5xx).").tag(config=True)
    retry_base_delay = Float(2.0, help="First retry delay in seconds (doubles each retry).").tag(config=True)
    reasoning = Unicode(None, allow_none=True, help='Reasoning effort: None, "low", "medium" or "high".'
                        ).tag(config=True)
    system_prompt = Unicode(SYSTEM_PROMPT, help="The system prompt.").tag(config=True)
    provider_options = _ProviderOptions(
        default_value=ShownWithoutSecrets(),
        help="Per-provider options such as {'openai': {'base_url': …}}; never saved, never shown (keys are masked)."
    ).tag(config=True)
    notebook_context = Bool(True, help="Send what happened in the notebook since the previous prompt (cells, "
                                       "values, errors, output, namespace changes) before each %%agent prompt "
                                       "(%%agent --no-context skips it once).").tag(config=True)
    notebook_context_tokens = Int(2000, help="The notebook-activity block's cap in tokens (newest cells first, "
                                             "older ones shortened).").tag(config=True)
    instruction_files = List(Unicode(), default_value=list(INSTRUCTION_NAMES),
                             help="Instruction files read from the notebook's folder and its parents (up to the "
                                  "repository root or home) into the system prompt; [] reads none."
                             ).tag(config=True)
    mcp_servers = _McpServers(
        default_value=ServersShownWithoutSecrets(),
        help='MCP servers, in the common mcpServers shape: {"NAME": {"command": ..., "args": [...], "env": {...}}} '
             '(stdio) or {"NAME": {"url": "http://.../mcp", "headers": {...}}} (Streamable HTTP); "disabled": true, '
             '"tools": [...] (only these). Needs pip install ipyagent[mcp]. env and headers are never saved or shown.'
    ).tag(config=True)
    mcp_project_files = Bool(True, help="Also read the servers of .mcp.json files from the notebook's folder up to "
                                        "the repository root; each starts only after you approve it once (never "
                                        "in a headless run).").tag(config=True)
    mcp_start_wait = Float(help="How long, at most, the first prompt after an MCP server is defined waits for it to "
                                "start, and a call to one of its tools while it still starts waits for it, with a "
                                "live line that Ctrl-C stops (Claude Code's MCP_TIMEOUT; default 30 s, or "
                                "$MCP_TIMEOUT in milliseconds). A slower server's tools join a later prompt."
                           ).tag(config=True)
    mcp_warn_share = Float(0.10, help="Warn when one MCP server's tool definitions take more than this share of "
                                      "the context window (enable only some with its \"tools\" list)."
                           ).tag(config=True)
    skills = Bool(True, help="Offer Agent Skills (<name>/SKILL.md in .agents/skills, .claude/skills or .pi/skills "
                             "from the notebook's folder up to the repository root, and ~/.agents/skills): their "
                             "names and descriptions in the system prompt, their bodies through the skill tool."
                  ).tag(config=True)
    disabled_plugins = List(Unicode(), default_value=[],
                            help="Plugins not to use, by name (as %agent plugins lists them) or package name; "
                                 "a plugin turned off here has what it added taken back at once "
                                 "(docs/extending.md).").tag(config=True)
    plugin_load_timeout = Float(30.0, help="Seconds one plugin may take to load at %load_ext (its import and its "
                                           "registrations); one that takes longer is stopped, named and left off. "
                                           "0: no limit.").tag(config=True)
    show_widget = Bool(True, help="Show the context-budget widget under each %%agent run.").tag(config=True)
    max_updates_per_second = Float(10.0, help="Streaming display updates per second, at most.").tag(config=True)
    notebook_path = Unicode(None, allow_none=True,
                            help="This notebook's path, to reload sessions from disk after a restart "
                                 "(default: found from the environment).").tag(config=True)
    hydrate = Bool(True, help="On load, read earlier sessions from the notebook file on disk.").tag(config=True)
    replay = CaselessStrEnum(["auto", "on", "off"], default_value="auto",
                             help='Replay recorded responses: "on" for every recorded cell, "auto" only when no '
                                  'provider is configured (no API key or base URL), "off" never. '
                                  "Default: $IPYAGENT_REPLAY or auto.").tag(config=True)
    code_cells = CaselessStrEnum(["off", "insert"], default_value="off",
                                 help='"insert": each successful python tool call of a %%agent run is also '
                                      "inserted as a code cell below it (marked # from ipyagent <entry id>), so "
                                      "Restart & Run All rebuilds the namespace; %%agent --cells does it for one "
                                      "run.").tag(config=True)
    replay_tools = Bool(False, help="While replaying, run recorded tool calls again and report results that "
                                    "differ (default: use the recorded results; $IPYAGENT_REPLAY_TOOLS)."
                        ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # the settings the user set (ipython_config.py, %config, %agent model…): a value a
        # notebook saved never replaces one of these (kernel/runtime.py restores the others)
        names = self.class_trait_names(config=True)
        section = self.config["Agent"] if "Agent" in self.config else {}
        self.user_set: set[str] = {name for name in names if name in section}
        self.observe(lambda change: self.user_set.add(change["name"]), names=names)

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get(DEFAULT_MODEL_ENV, "")

    @default("replay")
    def _default_replay(self) -> str:
        value = os.environ.get("IPYAGENT_REPLAY", "auto").strip().lower()
        return {"1": "on", "true": "on", "0": "off", "false": "off"}.get(value, value) \
            if value in ("auto", "on", "off", "1", "true", "0", "false") else "auto"

    @default("mcp_start_wait")
    def _default_mcp_start_wait(self) -> float:
        try:  # Claude Code's variable, in milliseconds
            return max(0.0, float(os.environ["MCP_TIMEOUT"]) / 1000)
        except (KeyError, ValueError):
            return MCP_START_WAIT

    @default("replay_tools")
    def _default_replay_tools(self) -> bool:
        return os.environ.get("IPYAGENT_REPLAY_TOOLS", "").strip().lower() in ("1", "true", "on", "yes")

    @validate("model_overrides")
    def _overrides(self, proposal: Any) -> Any:
        return checked_model_overrides(proposal["value"])

    @validate("context_window", "reserve_tokens", "keep_recent_tokens", "max_tool_rounds", "notebook_context_tokens",
              "auto_mask_turns")
    def _non_negative(self, proposal: Any) -> Any:
        value = proposal["value"]
        if value is not None and value < 0:
            raise ValueError(f"Agent.{proposal['trait'].name} must not be negative, got {value}")
        return value

    @validate("idle_compaction_delay")
    def _idle_delay(self, proposal: Any) -> Any:
        if proposal["value"] < 0:
            raise ValueError(f"Agent.idle_compaction_delay must not be negative, got {proposal['value']}")
        return proposal["value"]

    def run_config(self, **overrides: Any) -> RunConfig:
        """The agent loop's settings from the traits (``overrides`` win, e.g. ``model``)."""
        config = RunConfig(
            model=self.model,
            summary_model=self.summary_model or None,
            context_window=self.context_window or None,
            compaction=CompactionSettings(self.reserve_tokens, self.keep_recent_tokens, enabled=self.auto_compact),
            tool_approval=self.tool_approval,
            system_prompt=self.system_prompt,
            max_output_tokens=self.max_output_tokens,
            max_retries=self.max_retries,
            retry_base_delay=self.retry_base_delay,
            max_tool_rounds=self.max_tool_rounds,
            reasoning=self.reasoning or None,
            notebook_context=self.notebook_context,
            notebook_context_tokens=self.notebook_context_tokens,
            auto_mask_turns=self.auto_mask_turns,
            model_overrides={k: dict(v) for k, v in self.model_overrides.items()},
            provider_options={k: _plain(v) for k, v in self.provider_options.items()},
        )
        for key, value in overrides.items():
            if value is not None:
                setattr(config, key, value)
        return config

    def settings_table(self) -> list[tuple[str, Any, str]]:
        """(name, value, help) of every setting, for ``%agent config``; option values hidden."""
        rows = []
        for name in SETTING_NAMES:
            trait = self.traits()[name]
            value = getattr(self, name)
            if name == "mcp_servers":
                value = servers_shown(dict(value))
            elif name == "provider_options":
                value = {k: sorted(v) for k, v in value.items()}  # option names only: values may be keys
            elif name == "system_prompt":
                value = value if len(value) < 60 else value[:57] + "…"
            rows.append((name, value, trait.help or ""))
        return rows


# ``%config`` finds a configurable by its class's ``__name__``, and traitlets reads the config section
# from it: users write ``%config Agent.model`` and ``c.Agent.model``. In Python the class is
# ``AgentSettings``, so that ``Agent`` names one thing: these settings (the loop is ``AgentLoop``).
AgentSettings.__name__ = AgentSettings.__qualname__ = "Agent"

SETTING_NAMES = [name for name in AgentSettings.class_trait_names(config=True)]
