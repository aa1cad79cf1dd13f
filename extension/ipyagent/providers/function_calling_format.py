"""llama-cpp-python's ``chatml-function-calling`` chat format, and what ipyagent undoes of it.

That format (llama-cpp-python 0.3.36, ``llama_chat_format.py``) is the server's only way to
offer tools to a model of any family, and the way docs/context-windows.md starts it. Its Jinja
template renders the conversation with HTML autoescape and knows three roles:

* every text the model reads is HTML-escaped: ``'`` as ``&#39;``, ``"`` as ``&#34;``, ``&`` as
  ``&amp;``, ``<`` as ``&lt;``. The model copies what it reads, so a ``python`` call that quotes a
  column arrives as ``print(sales[&#39;units&#39;])`` and fails with a SyntaxError;
* ``role: "tool"`` messages are left out (only system, user and assistant are rendered): the model
  never reads a tool's result, and calls the tool again.

Its tool calls are known by their ids, ``call__<i>_<tool>_cmpl-<completion id>``. ipyagent undoes
the escaping in the arguments of such a call (their strings, HTML-unescaped once) and, for the
model that made such calls, sends tool results as user messages, which the template renders.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

_CALL_ID = re.compile(r"call__\d+_(?P<name>.+)_cmpl-[0-9a-f-]+")

NOTE = ("The server formats the conversation with llama-cpp-python's chatml-function-calling template, "
        "which shows the model every text HTML-escaped (' as &#39;) and leaves tool results out of its "
        "prompt: ipyagent undoes the escaping in the model's tool-call arguments and sends tool results "
        "to this model as user messages.")


def made_by_the_format(call_id: str, name: str) -> bool:
    """Whether a tool call with this id and name was written by that format's handler."""
    found = _CALL_ID.fullmatch(call_id or "")
    return found is not None and found.group("name") == name


def unescaped(value: Any) -> Any:
    """``value`` (a call's parsed arguments) with every string HTML-unescaped once."""
    if isinstance(value, str):
        return html.unescape(value)
    if isinstance(value, list):
        return [unescaped(v) for v in value]
    if isinstance(value, dict):
        return {k: unescaped(v) for k, v in value.items()}
    return value


def calls_of_the_format(messages: Sequence[Mapping[str, Any]], provider: str, model: str) -> bool:
    """Whether this model, on this provider, made a call through that format in ``messages``."""
    for message in messages:
        if message.get("role") != "assistant" or message.get("provider") != provider \
                or message.get("model") != model:
            continue
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall" \
                    and made_by_the_format(str(block.get("id") or ""), str(block.get("name") or "")):
                return True
    return False


def result_as_user_text(name: str, text: str) -> str:
    """A tool's result as that format's model can read it: a user message in its own words
    (its prompt writes calls as ``functions.<name>:``)."""
    return f"Result of functions.{name}:\n{text}"
