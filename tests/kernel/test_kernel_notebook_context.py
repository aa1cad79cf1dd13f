"""The agent sees and writes into the notebook, in REAL kernels against the fake provider: the
notebook-activity block (cells, values, errors, printed output, namespace diff), interpolation,
AGENTS.md and pins in the system prompt through a compaction and a kernel restart."""

from __future__ import annotations

import json

import pytest

from kernel_support import SETUP, LiveKernel, fake_provider
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel  # every test here starts a kernel


def _last_user_text(request) -> str:
    content = request.body["messages"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def _system(request) -> str:
    first = request.body["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def test_a_failed_cell_and_its_output_reach_the_next_prompt(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")
        k.run("rate = 3\nprint('loaded 12 rows')", "load")
        k.run("from IPython.display import display\ndisplay('a displayed note')", "show")
        failed = k.run("def per_month(total):\n    return total / (rate - 3)\nper_month(36)", "fail")
        assert failed.status == "error"
        server.enqueue_text("rate - 3 is zero.")
        cell = k.run("%%agent\nwhy did the cell above fail?", "ask")
        assert cell.status == "ok", outputs_text(cell.outputs)
        sent = _last_user_text(server.requests[-1])
        block, prompt = sent.split("</notebook-activity>")
        assert prompt.strip() == "why did the cell above fail?"
        assert "def per_month(total):\n    return total / (rate - 3)\nper_month(36)" in block
        assert "Error: ZeroDivisionError: division by zero" in block
        assert "return total / (rate - 3)" in block.split("Traceback (last frames):")[1]
        assert "loaded 12 rows" in block and "[display] 'a displayed note'" in block
        assert block.index("per_month(36)") < block.index("loaded 12 rows")  # newest first
        assert "%load_ext" not in block  # ipyagent's own cells are not activity

        # the next prompt carries only what happened since this one
        k.run("rows = [4, 5, 6]", "more")
        server.enqueue_text("ok")
        k.run("%%agent\nand now?", "ask-2")
        sent = _last_user_text(server.requests[-1])
        assert "per_month" not in sent and "rows = [4, 5, 6]" in sent
        assert "- added: rows (list, len 3)" in sent

        # nothing happened in between: no block at all
        server.enqueue_text("still ok")
        k.run("%%agent\nanything else?", "ask-3")
        assert _last_user_text(server.requests[-1]) == "anything else?"

        stored = [e["message"] for e in k.metadata["sessions"]["default"]["entries"]
                  if e["type"] == "message" and e["message"]["role"] == "user"]
        assert stored[0]["cellPrompt"] == "why did the cell above fail?"
        assert "notebook-activity" in json.dumps(stored[0]["content"])


def test_namespace_diff_no_context_and_the_context_command(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")
        k.run("counts = [3, 1, 2]\nlabel = 'x'", "a")
        server.enqueue_text("fine")
        k.run("%%agent --no-context\njust answer", "q1")
        assert _last_user_text(server.requests[-1]) == "just answer"

        k.run("counts = sorted(counts)\ndel label\nextra = {'k': 1}", "b")
        cell = k.run("%agent context", "ctx")
        shown = outputs_text(cell.outputs)
        assert "notebook activity (goes before the next %%agent prompt)" in shown
        assert "- rebound: counts (list, len 3)" in shown and "- removed: label" in shown
        assert "- added: extra (dict, len 1)" in shown
        assert "system prompt: environment" in shown and str(tmp_path) in shown

        k.run("%config Agent.notebook_context = False", "off")
        server.enqueue_text("fine")
        k.run("%%agent\nagain", "q2")
        assert _last_user_text(server.requests[-1]) == "again"


def test_interpolation_in_a_kernel(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")  # [1]
        k.run("temps = [12.5, 14.0, 13.25]\nmax(temps)", "v")  # [2]
        k.run("temps['first']", "e")  # [3]
        server.enqueue_text("explained")
        cell = k.run("%%agent --no-context\nCell {In[2]} gave {Out[2]}, then {Err[3]}. temps is {temps}; {{temps}} stays.",
                     "q")
        assert cell.status == "ok", outputs_text(cell.outputs)
        sent = _last_user_text(server.requests[-1])
        assert "```python\ntemps = [12.5, 14.0, 13.25]\nmax(temps)\n```" in sent
        assert "gave 14.0, then" in sent
        assert "TypeError: list indices must be integers or slices, not str" in sent
        assert "Cell In[3], line 1" in sent
        assert "temps is [12.5, 14.0, 13.25]; {temps} stays." in sent
        assert "{In[2]} = the source of cell [2]" in sent
        assert "filled in {In[2]}" in outputs_text(cell.outputs)


def test_agents_md_and_pins_in_the_system_prompt_through_compaction_and_restart(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Project rule: report every number with its unit.")
    small = ("%config Agent.context_window = 4000\n%config Agent.reserve_tokens = 1200\n"
             "%config Agent.keep_recent_tokens = 600\n")
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + small, "setup")
        cell = k.run("%agent pin Answer in British English.", "pin")
        assert "pinned #1" in outputs_text(cell.outputs)
        assert "already pinned" in outputs_text(k.run("%agent pin Answer in British English.", "pin-2").outputs)
        for i in range(6):
            server.enqueue_text(f"Answer {i}: " + "the readings look plausible and consistent " * 30)
            cell = k.run(f"%%agent\nQuestion {i}: " + "what do the readings tell us " * 12, f"q{i}")
            assert cell.status == "ok", outputs_text(cell.outputs)
        entries = k.metadata["sessions"]["default"]["entries"]
        assert any(e["type"] == "compaction" for e in entries), "the scenario must compact"
        chats = [r for r in server.requests if r.kind == "chat"]
        summaries = [i for i, r in enumerate(server.requests) if r.kind == "summary"]
        first_after = next(r for r in server.requests[summaries[0]:] if r.kind == "chat")
        for request in [chats[0], first_after]:
            system = _system(request)
            assert "Project rule: report every number with its unit." in system
            assert str(tmp_path / "AGENTS.md") in system
            assert "1. Answer in British English." in system
        for i in summaries:
            assert "British English" not in json.dumps(server.requests[i].body)
        assert [e["customType"] for e in entries if e["type"] == "custom"] == ["ipyagent.pin"]

        cell = k.run("%agent context", "ctx")
        shown = outputs_text(cell.outputs)
        assert "system prompt: pinned instructions (1)" in shown
        assert f"system prompt: instruction files ({tmp_path / 'AGENTS.md'})" in shown

        # the pin is a session entry: after a restart (the frontend pushes the metadata) it is back
        k.restart()
        k.run(SETUP, "setup-again")
        assert "1. Answer in British English." in outputs_text(k.run("%agent pins", "pins").outputs)
        k.run(f"%agent export -o {tmp_path / 'session.jsonl'}", "export")
        exported = [json.loads(line) for line in (tmp_path / "session.jsonl").read_text().splitlines()]
        assert any(e.get("customType") == "ipyagent.pin" for e in exported)
        k.run("%agent unpin 1", "unpin")
        server.enqueue_text("Understood.")
        k.run("%%agent\nand without the pin?", "q-last")
        system = _system(server.requests[-1])
        assert "British English" not in system and "report every number with its unit" in system
