"""The built-in providers, a plugin like any other (``ipyagent/plugins``): :func:`register_providers`
is its hook, which ``registry.py`` also calls on import so that ``provider:model`` strings resolve
without a kernel."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ipyagent.plugin_markers import hookimpl
from ipyagent.providers.apis.anthropic import AnthropicProvider
from ipyagent.providers.apis.openai_chat import OpenAIChatProvider
from ipyagent.providers.apis.openai_responses import OpenAIResponsesProvider

PLUGIN_NAME = "builtin-providers"
RESPONSES = "openai-responses"


def compatible(name: str, label: str, base_url: str, key_env: str = "", base_url_env: str = "") -> Callable[..., Any]:
    """A factory for an OpenAI-compatible server (Chat Completions at ``base_url``)."""
    return functools.partial(OpenAIChatProvider, name=name, label=label, default_base_url=base_url,
                             key_env=key_env, base_url_env=base_url_env)


@hookimpl
def register_providers(register: Callable[[str, Callable[..., Any]], Any]) -> None:
    register("openai", OpenAIChatProvider)
    register(RESPONSES, OpenAIResponsesProvider)
    register("anthropic", AnthropicProvider)
    register("ollama", compatible("ollama", "Ollama", "http://localhost:11434/v1", "", "OLLAMA_BASE_URL"))
    register("llamacpp", compatible("llamacpp", "llama.cpp", "http://localhost:8080/v1", "", "LLAMACPP_BASE_URL"))
    register("openrouter", compatible("openrouter", "OpenRouter", "https://openrouter.ai/api/v1",
                                      "OPENROUTER_API_KEY"))
    register("deepseek", compatible("deepseek", "DeepSeek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"))
    register("groq", compatible("groq", "Groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"))
