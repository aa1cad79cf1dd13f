"""Model strings ``provider:model``, and the registries of the providers they name.

A :class:`ProviderRegistry` holds the providers by name (factories, and the providers made from
them, kept for their connections) and what is known of their models: the model table with its
overrides and learned windows (``models.py``) and what the servers said (``window_discovery.py``).
The kernel's registry belongs to its plugin manager (``plugins/manager.py``): the built-ins
(``builtin.py``, a plugin) and every plugin's providers register into it (``register_providers``),
and the runtime passes it to each run. Outside a kernel, :func:`default_registry` makes one with
the built-ins.

A user's own provider goes through :func:`register_provider`::

    from ipyagent.providers import register_provider, OpenAIChatProvider
    register_provider("together", lambda **cfg: OpenAIChatProvider(
        name="together", label="Together", default_base_url="https://api.together.xyz/v1",
        key_env="TOGETHER_API_KEY", **cfg))

It lands in :data:`USER_PROVIDERS`, the one registry of the process made for what a user
registers or sets by hand (``register_provider``, ``set_override``, ``learn_window``): they may
run before ``%load_ext ipyagent``, so they cannot reach a runtime. Every registry made with
``user=USER_PROVIDERS`` (the kernel's, :func:`default_registry`'s) looks there first. Nothing of
ipyagent writes into it but those functions.

``config`` maps a provider name to keyword arguments for its factory (``api_key``, ``base_url``,
``headers``, ``timeout``…); they win over the environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ipyagent.providers.apis.openai_responses import responses_only
from ipyagent.providers.builtin import RESPONSES
from ipyagent.providers.builtin import register_providers as _register_builtins
from ipyagent.providers.models import ModelInfo, ModelTable
from ipyagent.providers.provider import Provider
from ipyagent.providers.window_discovery import WindowDiscovery

__all__ = ["PROVIDER_ENV", "USER_PROVIDERS", "ProviderFactory", "ProviderRegistry", "context_window",
           "default_registry", "learn_from_error", "learn_window", "model_info", "parse_model_string",
           "provider_configured", "register_provider", "resolve_provider", "set_override", "unregister_provider"]

ProviderFactory = Callable[..., Provider]

# provider name -> environment variables whose presence means "configured" (read-only)
PROVIDER_ENV: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
})


class ProviderRegistry:
    """Providers by name and what is known of their models (see the module docstring). With
    ``user``, that registry's providers win over these and its model overrides and learned windows
    apply where these have none."""

    def __init__(self, *, user: ProviderRegistry | None = None) -> None:
        self.user = user
        self.models: ModelTable = ModelTable(base=user.models if user is not None else None)
        self.discovery = WindowDiscovery()
        self._factories: dict[str, ProviderFactory] = {}
        self._instances: dict[tuple[str, str], tuple[ProviderFactory, Provider]] = {}
        self._lock = threading.Lock()

    @classmethod
    def builtin(cls, *, user: ProviderRegistry | None = None) -> ProviderRegistry:
        """A registry holding the built-in providers (their plugin's hook, ``builtin.py``)."""
        registry = cls(user=user)
        _register_builtins(registry.register)
        return registry

    # ---- by name -----------------------------------------------------------------------------

    def register(self, name: str, factory: ProviderFactory) -> ProviderFactory | None:
        """Make ``name:model`` strings resolve through ``factory(**config)``; replaces an earlier
        one, which it returns."""
        if not isinstance(name, str) or not name or ":" in name or name != name.strip():
            raise ValueError(f"a provider name is a word without ':' (it is the prefix of 'name:model'), got {name!r}")
        if not callable(factory):
            raise TypeError(f"provider {name!r}: the factory must be callable, got {factory!r}")
        with self._lock:
            previous = self._factories.get(name)
            self._factories[name] = factory
        return previous

    def unregister(self, name: str) -> None:
        with self._lock:
            self._factories.pop(name, None)

    def registered(self, name: str) -> ProviderFactory | None:
        """This registry's own factory of ``name`` (not the user's laid over it)."""
        with self._lock:
            return self._factories.get(name)

    def factory(self, name: str) -> ProviderFactory | None:
        """The factory of ``name``: the user's registry's, else this one's."""
        found = self.user.factory(name) if self.user is not None else None
        if found is None:
            with self._lock:
                found = self._factories.get(name)
        return found

    def names(self) -> list[str]:
        with self._lock:
            mine = set(self._factories)
        return sorted(mine | set(self.user.names() if self.user is not None else ()))

    # ---- model strings -----------------------------------------------------------------------

    def parse(self, model_string: str) -> tuple[str, str]:
        """``"openai:gpt-4.1"`` → ``("openai", "gpt-4.1")``. Without a registered prefix the provider
        is guessed (``claude*`` → anthropic, else openai), so ``qwen2.5-coder:7b`` stays one model
        id. OpenAI models that only the Responses API serves (``gpt-5-codex``…) go to
        ``openai-responses`` whether written with ``openai:`` or without a prefix."""
        prefix, sep, rest = model_string.strip().partition(":")
        if sep and self.factory(prefix) is not None:
            if not rest.strip():
                raise ValueError(f"no model after the provider in {model_string!r}; expected e.g. '{prefix}:<model>'")
            name, model = prefix, rest.strip()
        else:
            model = model_string.strip()
            if not model:
                raise ValueError("empty model string; expected 'provider:model', e.g. 'openai:gpt-4.1-mini'")
            name = "anthropic" if model.startswith("claude") else "openai"
        if name == "openai" and responses_only(model) and self.factory(RESPONSES) is not None:
            name = RESPONSES
        return name, model

    def resolve(self, model_string: str, config: Mapping[str, Mapping[str, Any]] | None = None
                ) -> tuple[Provider, str]:
        """The provider for ``model_string`` (created once per factory and configuration and reused,
        so its HTTP connections are kept alive) and the bare model id to put in
        ``ModelRequest.model``."""
        name, model = self.parse(model_string)
        factory = self.factory(name)
        if factory is None:
            raise ValueError(f"unknown provider {name!r} in {model_string!r}; registered: {', '.join(self.names())}")
        config = config or {}
        # the Responses API is OpenAI's: without options of its own it uses the openai ones (key, URL)
        options = dict(config.get(name) or (config.get("openai") if name == RESPONSES else None) or {})
        key = (name, repr(sorted(options.items(), key=lambda kv: kv[0])))
        with self._lock:
            made = self._instances.get(key)
            if made is None or made[0] is not factory:
                try:
                    made = self._instances[key] = (factory, factory(**options))
                except TypeError as exc:  # a misspelt option; the message never echoes the values
                    raise ValueError(f"invalid options {sorted(options)} for provider {name!r}: {exc}") from None
        return made[1], model

    def info(self, model_string: str) -> ModelInfo | None:
        """What is known of ``model_string``'s model (the table, overrides, learned windows)."""
        return self.models.info(*self.parse(model_string))

    def configured(self, model: str, provider_options: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
        """Whether ``model``'s provider has credentials or an endpoint (local servers need no key)."""
        if not model:
            return False
        name, _ = self.parse(model)
        options = (provider_options or {}).get(name) or {}
        if name == RESPONSES and not options:  # it uses the openai options (resolve)
            options = (provider_options or {}).get("openai") or {}
        if options.get("api_key") or options.get("base_url"):
            return True
        names = PROVIDER_ENV.get(name)
        if names is None:
            return True  # ollama, llama.cpp, a registered test provider…: nothing to look for
        return any(os.environ.get(n) for n in names)


USER_PROVIDERS = ProviderRegistry()
"""What this process's user registers and sets by hand (see the module docstring)."""


def default_registry() -> ProviderRegistry:
    """A new registry of the built-in providers, the user's laid over them: what code outside a
    kernel uses (a script's ``Agent``, ``ipyagent`` commands)."""
    return ProviderRegistry.builtin(user=USER_PROVIDERS)


def register_provider(name: str, factory: ProviderFactory) -> ProviderFactory | None:
    """Register a user's provider in :data:`USER_PROVIDERS` (every registry made with it finds it);
    returns the factory it replaced there."""
    return USER_PROVIDERS.register(name, factory)


def unregister_provider(name: str) -> None:
    """Take a provider :func:`register_provider` registered back."""
    USER_PROVIDERS.unregister(name)


def set_override(provider: str, model: str, **fields: Any) -> None:
    """The window, output limit, reasoning or vision flag to use for ``provider:model`` whatever
    the model table says, in every registry made with :data:`USER_PROVIDERS`
    (:meth:`ModelTable.set_override`)."""
    USER_PROVIDERS.models.set_override(provider, model, **fields)


def learn_window(provider: str, model: str, n: int) -> None:
    """Say by hand what an overflow error would have revealed (:meth:`ModelTable.learn_window`)."""
    USER_PROVIDERS.models.learn_window(provider, model, n)


def learn_from_error(provider: str, model: str, error: BaseException) -> int | None:
    return USER_PROVIDERS.models.learn_from_error(provider, model, error)


def model_info(provider: str, model: str) -> ModelInfo | None:
    """What is known of ``provider:model`` outside a kernel (the table and what the user set)."""
    return USER_PROVIDERS.models.info(provider, model)


def context_window(provider: str, model: str) -> int | None:
    return USER_PROVIDERS.models.context_window(provider, model)


def parse_model_string(model_string: str) -> tuple[str, str]:
    """:meth:`ProviderRegistry.parse` with the built-in providers and the user's."""
    return default_registry().parse(model_string)


def resolve_provider(model_string: str, config: Mapping[str, Mapping[str, Any]] | None = None
                     ) -> tuple[Provider, str]:
    """:meth:`ProviderRegistry.resolve` with the built-in providers and the user's: a new provider
    each call (keep a :class:`ProviderRegistry` to reuse one)."""
    return default_registry().resolve(model_string, config)


def provider_configured(model: str, provider_options: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """:meth:`ProviderRegistry.configured` with the built-in providers and the user's."""
    return default_registry().configured(model, provider_options)
