"""Model strings ``provider:model`` and the providers they name.

Built-in providers (``builtin.py``, a plugin) are registered exactly as a plugin's
(``register_providers``) or a user's own::

    from ipyagent.providers import register_provider, OpenAIChatProvider
    register_provider("together", lambda **cfg: OpenAIChatProvider(
        name="together", label="Together", default_base_url="https://api.together.xyz/v1",
        key_env="TOGETHER_API_KEY", **cfg))

``config`` maps a provider name to keyword arguments for its factory (``api_key``, ``base_url``,
``headers``, ``timeout``…); they win over the environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ipyagent.providers.apis.openai_responses import responses_only
from ipyagent.providers.builtin import RESPONSES
from ipyagent.providers.builtin import register_providers as _register_builtins
from ipyagent.providers.provider import Provider

ProviderFactory = Callable[..., Provider]

_factories: dict[str, ProviderFactory] = {}
_instances: dict[tuple[str, str], Provider] = {}
_lock = threading.Lock()


def register_provider(name: str, factory: ProviderFactory) -> ProviderFactory | None:
    """Make ``name:model`` strings resolve through ``factory(**config)``; replaces an earlier one,
    which it returns."""
    if not isinstance(name, str) or not name or ":" in name or name != name.strip():
        raise ValueError(f"a provider name is a word without ':' (it is the prefix of 'name:model'), got {name!r}")
    if not callable(factory):
        raise TypeError(f"provider {name!r}: the factory must be callable, got {factory!r}")
    with _lock:
        previous = _factories.get(name)
        _factories[name] = factory
        for key in [k for k in _instances if k[0] == name]:
            del _instances[key]
    return previous


def unregister_provider(name: str) -> None:
    with _lock:
        _factories.pop(name, None)
        for key in [k for k in _instances if k[0] == name]:
            del _instances[key]


def provider_factory(name: str) -> ProviderFactory | None:
    return _factories.get(name)


def registered_providers() -> list[str]:
    return sorted(_factories)


def parse_model_string(model_string: str) -> tuple[str, str]:
    """``"openai:gpt-4.1"`` → ``("openai", "gpt-4.1")``. Without a known prefix the provider is
    guessed (``claude*`` → anthropic, else openai), so ``qwen2.5-coder:7b`` stays one model id.
    OpenAI models that only the Responses API serves (``gpt-5-codex``…) go to ``openai-responses``
    whether written with ``openai:`` or without a prefix."""
    prefix, sep, rest = model_string.strip().partition(":")
    if sep and prefix in _factories:
        if not rest.strip():
            raise ValueError(f"no model after the provider in {model_string!r}; expected e.g. '{prefix}:<model>'")
        name, model = prefix, rest.strip()
    else:
        model = model_string.strip()
        if not model:
            raise ValueError("empty model string; expected 'provider:model', e.g. 'openai:gpt-4.1-mini'")
        name = "anthropic" if model.startswith("claude") else "openai"
    if name == "openai" and responses_only(model) and RESPONSES in _factories:
        name = RESPONSES
    return name, model


def resolve_provider(model_string: str, config: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[Provider, str]:
    """The provider for ``model_string`` (created once per configuration and reused, so its HTTP
    connections are kept alive) and the bare model id to put in ``ModelRequest.model``."""
    name, model = parse_model_string(model_string)
    factory = _factories.get(name)
    if factory is None:
        raise ValueError(f"unknown provider {name!r} in {model_string!r}; "
                         f"registered: {', '.join(registered_providers())}")
    config = config or {}
    # the Responses API is OpenAI's: without options of its own it uses the openai ones (key, URL)
    options = dict(config.get(name) or (config.get("openai") if name == RESPONSES else None) or {})
    key = (name, repr(sorted(options.items(), key=lambda kv: kv[0])))
    with _lock:
        provider = _instances.get(key)
        if provider is None:
            try:
                provider = _instances[key] = factory(**options)
            except TypeError as exc:  # a misspelt option; the message never echoes the values
                raise ValueError(f"invalid options {sorted(options)} for provider {name!r}: {exc}") from None
    return provider, model


_register_builtins(register_provider)


# provider name -> environment variables whose presence means "configured"
PROVIDER_ENV = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-responses": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
}


def provider_configured(model: str, provider_options: dict[str, dict[str, Any]] | None = None) -> bool:
    """Whether ``model``'s provider has credentials or an endpoint (local servers need no key)."""
    if not model:
        return False
    name, _ = parse_model_string(model)
    options = (provider_options or {}).get(name) or {}
    if name == "openai-responses" and not options:  # it uses the openai options (resolve_provider)
        options = (provider_options or {}).get("openai") or {}
    if options.get("api_key") or options.get("base_url"):
        return True
    names = PROVIDER_ENV.get(name)
    if names is None:
        return True  # ollama, llama.cpp, a registered test provider…: nothing to look for
    return any(os.environ.get(n) for n in names)
