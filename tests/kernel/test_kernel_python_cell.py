"""The python tool runs like a cell, in a REAL kernel against the fake provider: magics and
``!cmd`` work, a matplotlib figure reaches the model as an image (Anthropic: an image block in the
tool result; OpenAI Chat: an image part in a user message after the tool message) and shows in the
tool block, and nothing the code shows or raises leaks into the ``%%agent`` cell's outputs."""

from __future__ import annotations

import contextlib
import json

import pytest

from ipyagent.bridge.headless import kernel_environment
from kernel_support import LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('agent plot')"
SETUP = ("%load_ext ipyagent\n%config Agent.model = {model!r}\n%config Agent.tool_approval = 'auto'\n"
         "%config Agent.show_widget = False")


@pytest.fixture
def anthropic_env():
    """The kernel also reaches the fake server as Anthropic (it inherits the environment)."""
    with contextlib.ExitStack() as stack:
        yield lambda server: stack.enter_context(kernel_environment(
            ANTHROPIC_BASE_URL=server.anthropic_base_url, ANTHROPIC_API_KEY="sk-ant-ipyagent-test"))


def _tool_results(k):
    return [e["message"] for e in k.metadata["sessions"]["default"]["entries"]
            if e["type"] == "message" and e["message"]["role"] == "toolResult"]


def _tool_block(cell):
    blocks = [o["data"] for o in cell.outputs if "ipyagent-tool" in (o.get("data") or {}).get("text/html", "")]
    assert len(blocks) == 1, cell.outputs
    return blocks[0]


def test_shell_escapes_and_magics_run_in_the_python_tool(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP.format(model="openai:fake-model") + "\nseen_cells = []\n"
              "get_ipython().events.register('post_run_cell', lambda r: seen_cells.append(r.info.cell_id))", "setup")
        code = "!echo hello-from-the-shell\n%timeit -n1 -r1 sum(range(100))\nn = !ls\nlen(n)"
        (tmp_path / "a.txt").write_text("x")
        server.enqueue_tool_call("python", {"code": code})
        server.enqueue_text("Done.")
        cell = k.run("%%agent\nTry the shell and timeit.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        result = _tool_results(k)[0]
        text = result["content"][0]["text"]
        assert not result["isError"], text
        lines = text.splitlines()
        assert lines[0] == "hello-from-the-shell"
        assert "per loop" in lines[1]
        assert lines[-1] == "1"  # the value of the last expression, as Out[] would show it
        # what the tool printed went to the model, not into the agent cell's output area
        assert not [o for o in cell.outputs if o.get("output_type") == "stream"]
        sent = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
        assert sent[0]["content"] == text
        # cell-event listeners see the tool's run marked as the agent's, inside the user's cell c1
        assert k.evaluate("seen_cells") == ["setup", "ipyagent-python-tool", "c1"]


def test_an_exception_is_the_tools_error_not_the_cells(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP.format(model="openai:fake-model"), "setup")
        server.enqueue_tool_call("python", {"code": "import os\nos.system('echo from-a-subprocess')\n1 / 0"})
        server.enqueue_text("It failed.")
        cell = k.run("%%agent\nDivide.", "c1")
        assert cell.status == "ok" and cell.error is None, outputs_text(cell.outputs)
        assert not [o for o in cell.outputs if o.get("output_type") in ("error", "stream")], cell.outputs
        result = _tool_results(k)[0]
        text = result["content"][0]["text"]
        assert result["isError"]
        assert text.startswith("from-a-subprocess\n")  # fd-level output (os.system) is captured too
        assert "ZeroDivisionError: division by zero" in text and "\x1b[" not in text
        # the kernel's state is the usual one afterwards: prints and errors of user cells show
        after = k.run("print('a user cell prints')\nraise ValueError('a user error')", "c2")
        assert "a user cell prints" in outputs_text(after.outputs) and after.error["ename"] == "ValueError"


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_figure_reaches_the_model_as_an_image_and_shows_in_the_tool_block(tmp_path, protocol, anthropic_env):
    model = "anthropic:claude-sonnet-4-5" if protocol == "anthropic" else "openai:gpt-4.1-mini"
    with fake_provider() as server:
        anthropic_env(server)
        with LiveKernel(cwd=str(tmp_path)) as k:
            k.run(SETUP.format(model=model), "setup")
            server.enqueue_tool_call("python", {"code": PLOT})
            server.enqueue_text("A line that goes up and down.")
            cell = k.run("%%agent\nPlot something.", "c1")
            assert cell.status == "ok", outputs_text(cell.outputs)

            stored = _tool_results(k)[0]["content"]
            assert [b["type"] for b in stored] == ["text", "image"]
            image = stored[1]
            assert image["mimeType"] == "image/png" and set(image) == {"type", "data", "mimeType"}
            assert "<Figure size" in stored[0]["text"]

            messages = server.requests[-1].body["messages"]
            if protocol == "anthropic":
                result = messages[-1]["content"][0]
                assert result["type"] == "tool_result"
                assert result["content"][1]["type"] == "image"
                assert result["content"][1]["source"] == {"type": "base64", "media_type": "image/png",
                                                          "data": image["data"]}
            else:
                tool = next(i for i, m in enumerate(messages) if m["role"] == "tool")
                follow = messages[tool + 1]
                assert follow["role"] == "user"
                assert follow["content"][1] == {"type": "image_url",
                                                "image_url": {"url": "data:image/png;base64," + image["data"]}}

            block = _tool_block(cell)
            assert f'<img src="data:image/png;base64,{image["data"]}"' in block["text/html"]
            assert "[1 image]" in block["text/plain"]
            # the figure went to the model and the tool block, not as a plot in the agent cell
            assert not [o for o in cell.outputs if "image/png" in (o.get("data") or {})]


def test_a_model_without_vision_gets_a_note_instead_of_the_image(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP.format(model="openai:gpt-oss-20b"), "setup")
        server.enqueue_tool_call("python", {"code": PLOT})
        server.enqueue_text("ok")
        k.run("%%agent\nPlot.", "c1")
        assert _tool_results(k)[0]["content"][1]["type"] == "image"  # kept in the session
        sent = json.dumps(server.requests[-1].body["messages"])
        assert "image_url" not in sent
        assert "an image was left out here: openai:gpt-oss-20b does not accept images" in sent


def test_an_interrupted_tool_leaves_the_kernel_and_session_usable(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP.format(model="openai:fake-model"), "setup")
        marker = tmp_path / "started"
        code = (f"import pathlib, time\nprint('before the wait')\npathlib.Path({str(marker)!r}).touch()\n"
                "for _ in range(600): time.sleep(0.1)")
        server.enqueue_tool_call("python", {"code": code})
        msg_id = k.send_execute("%%agent\nWait.", "c1")
        cell = k.interrupt_when(marker.exists, msg_id)
        assert cell.error["ename"] == "KeyboardInterrupt"
        assert "before the wait" not in outputs_text(cell.outputs)  # captured, never shown in the cell
        result = _tool_results(k)[0]
        assert result["isError"] and "Interrupted by the user" in result["content"][0]["text"]

        server.enqueue_tool_call("python", {"code": "print('works again')\n40 + 2"})
        server.enqueue_text("Fine.")
        cell = k.run("%%agent\nAgain.", "c2")
        assert cell.status == "ok", outputs_text(cell.outputs)
        assert _tool_results(k)[-1]["content"][0]["text"] == "works again\n42"
        plain = k.run("print('plain cell output')\n7", "c3")
        assert "plain cell output" in outputs_text(plain.outputs)
        assert any(o.get("output_type") == "execute_result" for o in plain.outputs)


PEAK_MB = "__import__('resource').getrusage(__import__('resource').RUSAGE_SELF).ru_maxrss // 1024"


def test_a_call_that_prints_a_lot_costs_the_kernel_no_memory_and_says_what_it_left_out(tmp_path):
    """300,000 lines of 100 characters (30 MB) printed by one call: the kernel keeps a head and a
    tail of them (its peak memory grows by less than half of what was printed; all of it in
    memory cost several times the output), and the result counts every line and says the middle
    was not kept."""
    lines = 300_000
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP.format(model="openai:fake-model"), "setup")
        server.enqueue_tool_call("python", {"code": "print('warm up')"})  # the first run's imports
        server.enqueue_text("Ready.")
        assert k.run("%%agent\nWarm up.", "c0").status == "ok"
        before = k.evaluate(PEAK_MB)
        server.enqueue_tool_call("python", {"code": f"for i in range({lines}):\n    print(f'{{i:09d}}' + 'x' * 90)"})
        server.enqueue_text("Done.")
        cell = k.run("%%agent\nPrint the lines.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        grown = k.evaluate(PEAK_MB) - before
        assert grown < lines * 100 / 2**20 / 2, f"the kernel's peak memory grew by {grown} MB"
        text = _tool_results(k)[-1]["content"][0]["text"]
        assert text.splitlines()[-3] == f"{lines - 1:09d}" + "x" * 90  # the end is there, whole
        notice = text.splitlines()[-1]
        assert notice.startswith(f"[Showing lines {lines - 511}-{lines} of {lines} (50.0KB limit). "
                                 "The start and end of the output (the middle was not kept): "), notice
        with open(notice.rsplit(": ", 1)[1].rstrip("]")) as f:
            kept = f.read().splitlines()
        assert kept[0] == "000000000" + "x" * 90 and kept[-1] == text.splitlines()[-3]  # its head and its tail
        markers = [line for line in kept if line.startswith("[... ")]
        assert len(markers) == 1 and markers[0].endswith(" characters) left out here: not kept ...]"), markers
        left_out = int(markers[0].split()[1].replace(",", ""))
        assert len(kept) - 1 + left_out == lines  # every line printed is kept or counted
