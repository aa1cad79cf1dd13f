"""Images in the history reach only models that accept images (the model table's vision flag);
for the others each image becomes a short note, on both wire protocols."""

from __future__ import annotations

import pytest

from ipyagent.providers.apis.anthropic import to_anthropic_messages
from ipyagent.providers.apis.openai_chat import to_openai_messages
from ipyagent.providers.models import ModelTable
from ipyagent.providers.provider import ModelRequest

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE]},
    {"role": "assistant", "api": "x", "provider": "x", "model": "x", "stopReason": "toolUse",
     "content": [{"type": "toolCall", "id": "call_1", "name": "python", "arguments": {"code": "plot()"}}]},
    {"role": "toolResult", "toolCallId": "call_1", "toolName": "python", "isError": False,
     "content": [{"type": "text", "text": "<Figure>"}, IMAGE]},
]


@pytest.mark.parametrize("provider, model, vision", [
    ("openai", "gpt-4.1-mini", True), ("openai", "gpt-4o-2024-08-06", True), ("openai", "o4-mini", True),
    ("openai", "o3-mini", False), ("openai", "gpt-oss-20b", False), ("anthropic", "claude-sonnet-4-5-20250929", True),
    ("anthropic", "claude-3-5-haiku", False), ("openai", "anthropic/claude-sonnet-4.5", True),
    ("openai", "qwen2.5-coder:7b", False), ("openai", "some-unknown-model", False),
])
def test_the_model_table_marks_vision(provider, model, vision):
    info = ModelTable().info(provider, model)
    assert bool(info and info.vision) is vision


def test_an_override_turns_vision_on_for_an_unknown_model():
    """The override reaches the provider with the request: the registry's knowledge of the model
    (``ModelRequest.model_info``), not a table of the process."""
    models = ModelTable()
    models.set_override("openai", "my-local-vlm", vision=True)
    without = to_openai_messages(ModelRequest(model="my-local-vlm", messages=HISTORY), "openai", "openai-completions")
    assert "image_url" not in str(without)  # the bundled table alone does not know it
    request = ModelRequest(model="my-local-vlm", messages=HISTORY, model_info=models.info("openai", "my-local-vlm"))
    wire = to_openai_messages(request, "openai", "openai-completions")
    assert wire[-1]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_openai_chat_without_vision_gets_notes():
    wire = to_openai_messages(ModelRequest(model="gpt-oss-20b", messages=HISTORY), "openai", "openai-completions")
    note = "(an image was left out here: openai:gpt-oss-20b does not accept images)"
    assert wire[0] == {"role": "user", "content": "look\n" + note}
    assert wire[2] == {"role": "tool", "tool_call_id": "call_1", "content": "<Figure>\n" + note}
    assert len(wire) == 3  # no user message with image parts after the tool message


def test_openai_chat_with_vision_sends_the_tool_images_in_a_user_message():
    wire = to_openai_messages(ModelRequest(model="gpt-4.1-mini", messages=HISTORY), "openai", "openai-completions")
    assert wire[2] == {"role": "tool", "tool_call_id": "call_1", "content": "<Figure>"}
    assert wire[3]["role"] == "user" and wire[3]["content"][1]["type"] == "image_url"


def test_anthropic_with_and_without_vision():
    request = ModelRequest(model="claude-sonnet-4-5", messages=HISTORY)
    wire = to_anthropic_messages(request, "anthropic", "anthropic-messages", cache=None)
    result = wire[-1]["content"][0]
    assert result["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                 "data": "iVBORw0KGgo="}}
    old = to_anthropic_messages(ModelRequest(model="claude-3-5-haiku", messages=HISTORY), "anthropic",
                                "anthropic-messages", cache=None)
    assert old[-1]["content"][0]["content"] == [
        {"type": "text", "text": "<Figure>"},
        {"type": "text", "text": "(an image was left out here: anthropic:claude-3-5-haiku does not accept images)"}]
    assert "image" not in str(old[0]["content"][1]["type"])
