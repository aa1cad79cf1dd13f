"""What a user registers by hand reaches the kernel's runtime, in a real kernel against the fake
provider: a tool (``register_tool``, as a decorator, before ``%load_ext`` and after it), a provider
(``register_provider``) and a model override (``set_override``). They go into the process's one
registry for them (``USER_TOOLS``, ``USER_PROVIDERS``), which the runtime's registries (its plugin
manager's) lay over their own; the runtime's own tables stay the plugins'."""

from __future__ import annotations

import pytest

from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

BEFORE_LOAD = """\
import os
from ipyagent.agent.tools import register_tool, read_only
from ipyagent.providers import OpenAIChatProvider, register_provider, set_override

@register_tool
@read_only
def shout_back(text: str) -> str:
    \"\"\"Say a text back, loudly.

    Args:
        text: what to say back
    \"\"\"
    return text.upper() + "!"

register_provider("mine", lambda **options: OpenAIChatProvider(
    name="mine", base_url=os.environ["OPENAI_BASE_URL"], key_env="OPENAI_API_KEY", **options))
set_override("mine", "small-model", context_window=6000)
"""

AFTER_LOAD = """\
from ipyagent.agent.tools import register_tool, read_only

@register_tool
@read_only
def count_words(text: str) -> int:
    \"\"\"Count the words of a text.\"\"\"
    return len(text.split())
"""


def _tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def test_a_users_tool_provider_and_override_reach_the_runtime(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        assert k.run(BEFORE_LOAD, "before").status == "ok"
        loaded = k.run("%load_ext ipyagent\n%config Agent.model = 'mine:small-model'", "load")
        assert loaded.status == "ok", outputs_text(loaded.outputs)

        server.enqueue_tool_call("shout_back", {"text": "hello"})
        server.enqueue_text("It said HELLO!")
        cell = k.run("%%agent\nSay hello back, loudly.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        first = server.requests[0]
        assert first.body["model"] == "small-model"  # through the user's provider "mine"
        names = _tool_names(first)
        assert names[-1] == "shout_back" and "read" in names and "python" in names  # the built-ins first
        results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
        assert results[0]["content"] == "HELLO!" and k.prompts == []  # read-only: no approval question

        runtime = "__import__('ipyagent.kernel.extension', fromlist=['x']).get_runtime(get_ipython())"
        window = k.evaluate(f"{runtime}.budget_for().window_info().describe()")
        assert window == "window from config (set_override)"
        # the runtime's own registries hold the plugins' (here the built-ins'); the user's lie over them
        assert k.evaluate(f"[{runtime}.plugins.tools.find('shout_back') is None, "
                          f"{runtime}.plugins.providers.registered('mine') is None]") == [True, True]

        assert k.run(AFTER_LOAD, "after").status == "ok"
        server.enqueue_text("Two words.")
        k.run("%%agent\nHow many words in 'two words'?", "c2")
        assert _tool_names(server.requests[-1])[-2:] == ["shout_back", "count_words"]
