"""The example plugin (examples/ipyagent-example-plugin), installed with pip, in a real kernel
against the fake provider: its tool offered to and called by the model, its command, its hook,
``%agent plugins``; a plugin that raises at load named in one line while the extension loads; and
``Agent.disabled_plugins`` taking one away.

pip installs the example into a ``--target`` folder without build isolation (offline: hatchling is
in the test extra) and the kernel gets that folder on its PYTHONPATH; the failing plugin is a
distribution written into the same folder (its metadata and a module that raises)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_support import SETUP, LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ipyagent-example-plugin"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("plugins-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                    "--no-index", "--target", str(target), str(EXAMPLE)], check=True)
    (target / "broken_plugin.py").write_text("raise RuntimeError('the broken plugin cannot start')\n")
    info = target / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ipyagent]\nbroken = broken_plugin\n")
    return target


def _kernel(site: Path, cwd: Path) -> LiveKernel:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return LiveKernel(cwd=str(cwd), env={"PYTHONPATH": path})


def _tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def test_the_example_plugin_in_a_kernel(site, tmp_path):
    with fake_provider() as server, _kernel(site, tmp_path) as k:
        loaded = k.run(SETUP, "setup")
        assert loaded.status == "ok", outputs_text(loaded.outputs)
        text = outputs_text(loaded.outputs)
        # the failing plugin: named in one line; the extension loaded (its magics answer below)
        [line] = [line for line in text.splitlines() if "plugin 'broken'" in line]
        assert "broken-plugin 0.1" in line and "RuntimeError: the broken plugin cannot start" in line

        listing = outputs_text(k.run("%agent plugins", "plugins").outputs)
        [example] = [line for line in listing.splitlines() if line.startswith("example")]
        assert "[loaded] ipyagent-example-plugin 0.1.0" in example
        assert "tool word_count" in example and "command shout" in example and "hook turn_end" in example
        assert "[failed]" in [line for line in listing.splitlines() if line.startswith("broken")][0]
        assert "builtin-tools" in listing

        shout = k.run("%agent shout hello plugins", "shout")
        assert "HELLO PLUGINS!" in outputs_text(shout.outputs)
        helped = outputs_text(k.run("%agent help", "help").outputs)
        assert "From plugins" in helped and "%agent shout" in helped and "(plugin example)" in helped

        # the model is offered the tool, with the schema of its signature, calls it, and the
        # read-only tool runs without an approval question
        server.enqueue_tool_call("word_count", {"text": "one two two three", "unique": True})
        server.enqueue_text("It has three distinct words.")
        cell = k.run("%%agent\nHow many distinct words in 'one two two three'?", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        first = server.requests[0]
        assert "word_count" in _tool_names(first)
        [spec] = [t["function"] for t in first.body["tools"] if t["function"]["name"] == "word_count"]
        assert spec["description"] == "Count the words of a text."
        assert spec["parameters"]["properties"]["unique"] == {"type": "boolean",
                                                              "description": "count each distinct word once"}
        assert spec["parameters"]["required"] == ["text"]
        results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
        assert results[0]["content"] == "3"
        assert k.prompts == []
        # its hook fired at each turn's end: the tool turn (one result) and the answer (none)
        assert k.evaluate("__import__('ipyagent_example_plugin').TURNS") == [1, 0]

        # turned off: its tool, command and hook are gone at once
        off = k.run("%config Agent.disabled_plugins = ['example']", "off")
        assert "plugin 'example' turned off" in outputs_text(off.outputs)
        server.enqueue_text("No tool.")
        k.run("%%agent\nAnd now?", "c2")
        assert "word_count" not in _tool_names(server.requests[-1]) and "read" in _tool_names(server.requests[-1])
        assert k.evaluate("__import__('ipyagent_example_plugin').TURNS") == [1, 0]
        gone = k.run("%agent shout again", "gone")
        assert gone.status == "error" and "unknown command 'shout'" in outputs_text(gone.outputs)
        assert "[disabled]" in outputs_text(k.run("%agent plugins", "plugins-2").outputs)
