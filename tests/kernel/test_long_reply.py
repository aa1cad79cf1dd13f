"""A long streamed reply in a real kernel costs each update of the page a bounded size: 400 KB
without a newline (before, every update resent all of it, as text, Markdown and HTML: 2.8 GB and
200 s of the kernel's CPU; tests/benchmarks/long_reply.py measures it). While it streams the page
shows its start, a line saying how much is not shown yet, and its newest part; when it ends, all
of it."""

from __future__ import annotations

import pytest

from ipyagent.display.stream import LIVE_CHARS
from ipyagent.testing.specs import Reply
from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

SETUP = "%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n%config Agent.show_widget = False"
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit "


def test_each_update_of_a_long_reply_is_bounded_and_the_last_holds_all_of_it(tmp_path):
    text = (WORDS * 8_000)[:400_000] + " THE END"
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend="page") as k:
        k.run(SETUP, "setup")
        server.enqueue(Reply(text=text, chunk_size=16))
        seen = k.count_iopub()
        cell = k.run("%%agent\nWrite a lot.", "long")
        assert cell.status == "ok", outputs_text(cell.outputs)[-300:]
    updates = [size for kind, size in seen if kind == "update_display_data"]
    assert len(updates) >= 2  # streamed: the reply grew in place
    assert max(updates[:-1]) < 4 * LIVE_CHARS, sorted(updates)[-3:]  # each live update, whatever the length
    assert updates[-1] > 2 * len(text)  # the last: all of it, as text and as HTML
    [reply] = [o["data"] for o in cell.outputs if "ipyagent-reply" in (o.get("data") or {}).get("text/html", "")]
    assert reply["text/plain"] == text and "THE END" in reply["text/html"]
    assert "not shown while the reply streams" not in reply["text/html"]
