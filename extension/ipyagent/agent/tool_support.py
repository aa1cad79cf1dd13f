"""Did the server pass the tool definitions to the model, or drop them?

llama-cpp-python's server without a function-calling chat format accepts a request with tools,
leaves them out of the prompt and answers as if there were none; a reply then may say it ran a
tool it never saw. The server's own count of the prompt tells: :class:`ToolSupportCheck` reads it
once, from the first reply to a request that offered tools, and says so in a notice when the count
is nearer the request without the tools than with them (:func:`tools_left_out`).

A server whose streamed replies carry no usage gets one request with tools whole (not streamed):
whole answers carry usage. Once judged, requests stream again.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from ipyagent.agent.budget import tool_dicts
from ipyagent.providers.provider import ModelRequest, Provider
from ipyagent.providers.window_discovery import Discovery
from ipyagent.session.messages import Message, tool_calls_of
from ipyagent.session.tokens import message_chars, usage_tokens
from ipyagent.text import chars4

__all__ = ["ToolSupportCheck", "tools_left_out", "tools_left_out_message"]

TOOLS_SHARE_TO_JUDGE = 0.5  # tool definitions at least half the rest of the request: tokenizers differ less


def tools_left_out(reported: int, system_prompt: str, tool_specs: Iterable[Any], messages: Iterable[Message],
                   ratio: float = 1.0) -> tuple[bool, int, int]:
    """Whether a server's reported prompt tokens say it left the tool definitions out of the
    prompt (llama-cpp-python without a function-calling chat format does, silently): the count is
    nearer the request without the tools than the request with them. Judged only when the
    definitions are a large share of the request, so that a tokenizer counting differently from
    chars/4 cannot pass for missing tools. Returns (left out?, the request's estimate, the tools')."""
    specs = tool_dicts(tool_specs)
    tools = chars4(specs) if specs else 0
    rest = chars4(system_prompt or "") + sum(math.ceil(message_chars(m) / 4) for m in messages)
    whole = math.ceil((rest + tools) * ratio)
    if not tools or reported <= 0 or tools < TOOLS_SHARE_TO_JUDGE * rest:
        return False, whole, math.ceil(tools * ratio)
    return reported < (rest + tools / 2) * ratio, whole, math.ceil(tools * ratio)


def tools_left_out_message(reported: int, whole: int, tools: int, count: int) -> str:
    return (f"The server left the tool definitions out of the prompt: it counted {reported:,} prompt tokens, where "
            f"the request holds about {whole:,} with the {count} tool definitions (about {tools:,} of them). The "
            "model cannot call a tool this way; a reply that says it ran one made it up. For tools, start "
            "llama-cpp-python's server with --chat_format chatml-function-calling, or use a model and server that "
            "support tool calls (Ollama, llama.cpp's llama-server --jinja, vLLM --enable-auto-tool-choice); "
            "without tools, run the cells with %%agent --no-tools.")


class ToolSupportCheck:
    """Judges once (per agent) whether the server passed the tools on; see the module docstring."""

    def __init__(self) -> None:
        self.judged = False  # the server's count of a prompt with tools was read (left out or not)
        self.streamed_without_usage = False  # a streamed reply to one came without usage

    def prepare(self, provider: Provider, request: ModelRequest, server: Discovery | None) -> ModelRequest:
        """``request``, or the same not streamed when its reply must carry usage to be judged: a
        request with tools to a server whose streams carry no usage (llama-cpp-python, known by
        its model listing ``server``, or any whose streamed reply came without usage)."""
        if not request.tools or self.judged or "stream" in request.options \
                or not getattr(provider, "streaming", False):
            return request
        if not (self.streamed_without_usage or (server is not None and server.server == "llama-cpp-python")):
            return request
        return dataclasses.replace(request, options={**request.options, "stream": False})

    def judge(self, request: ModelRequest, message: Message, ratio: float) -> str | None:
        """The notice to give when the server's count of ``request``'s prompt (in ``message``'s
        usage) shows it left the tool definitions out; None otherwise. ``ratio``: the server's
        tokens per chars/4-estimated token."""
        if not request.tools or self.judged:
            return None
        usage = message.get("usage") or {}
        reported = usage_tokens(usage) - int(usage.get("output") or 0)
        if reported <= 0:
            self.streamed_without_usage = request.options.get("stream") is not False
            return None
        self.judged = True
        if tool_calls_of(message):
            return None
        left_out, whole, tools = tools_left_out(reported, request.system_prompt, request.tools, request.messages,
                                                ratio)
        return tools_left_out_message(reported, whole, tools, len(request.tools)) if left_out else None
