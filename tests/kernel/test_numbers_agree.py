"""One session, every place that shows its size (issue 28, item 5): the widget, ``%agent status``,
``%agent context``, the mask message, ``%compact``'s message and ``ipyagent inspect`` of the saved
notebook all give the budget's one count (``RequestBudget.request_tokens``: the server's count of the
last request plus estimates since, system prompt and tools included), and "system + tools" is
the agent's one fixed part wherever it is shown."""

from __future__ import annotations

import json
import re

from IPython.utils.capture import capture_output

from ipyagent.cli import main as cli_main
from ipyagent.display.run_view import facts_for
from ipyagent.store.ipynb import new_notebook, save_session_to_notebook_file, write_notebook
from support.shell import run, runtime_of


def _tokens(pattern: str, text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(pattern, text)]


def _command(ip, line: str) -> str:
    with capture_output() as captured:
        ip.run_line_magic("agent", line)
    return "\n".join(o.data.get("text/plain", "") for o in captured.outputs) + captured.stdout


def _inspect(tmp_path, session, capsys) -> dict:
    write_notebook(tmp_path / "empty.ipynb", new_notebook())
    save_session_to_notebook_file(session, tmp_path / "empty.ipynb", tmp_path / "saved.ipynb")
    capsys.readouterr()
    assert cli_main(["inspect", str(tmp_path / "saved.ipynb"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_figure_of_the_context_is_the_budgets_one_count(ip, server, tmp_path, capsys):
    ip.run_line_magic("config", "Agent.context_window = 8192")  # a local model's window, as the README sets it
    ip.run_line_magic("config", "Agent.tool_approval = 'auto'")
    for k in range(3):
        server.enqueue_tool_call("python", {"code": f"print('{k}' * 3000)"})
        server.enqueue_text(f"Printed {k}. " * 40)
        cap = run(ip, "", f"print line {k}")
    runtime = runtime_of(ip)
    budget = runtime.budget_for()  # outside a run: no agent set up for it
    count = budget.request_tokens()
    assert runtime.slot().agent.budget.request_tokens() == count  # the loop's own count, after its run
    widget = [o.data["text/plain"] for o in cap.outputs if o.data.get("text/plain", "").startswith("Context")][-1]
    assert _tokens(r"\] ([\d,]+) / 8,192 tokens", widget) == [count]  # the cell's last widget view
    assert _tokens(r"\] ([\d,]+) / 8,192 tokens", _command(ip, "status")) == [count]
    assert _tokens(r"the budget counts ([\d,]+) tokens", _command(ip, "context")) == [count]
    facts = facts_for(budget, "default")
    assert facts.total == count and facts.parts["system"] == budget.fixed_tokens()
    assert _inspect(tmp_path, runtime.slot().session, capsys)["context_tokens"] == count

    server.enqueue_summary("## Goal\nPrint long lines.")
    with capture_output() as captured:
        ip.run_line_magic("compact", "")
    said = "\n".join(o.data.get("text/plain", "") for o in captured.outputs)
    [(compacted_from, compacted_to)] = re.findall(r"Compacted: ([\d,]+) → ([\d,]+) tokens", said)
    assert int(compacted_from.replace(",", "")) == count
    now = runtime.budget_for().request_tokens()
    assert int(compacted_to.replace(",", "")) == now < count
    assert _tokens(r"\] ([\d,]+) / 8,192 tokens", _command(ip, "status")) == [now]
    assert facts_for(runtime.budget_for(), "default").parts["system"] == budget.fixed_tokens()  # the same fixed part
    assert _inspect(tmp_path, runtime.slot().session, capsys)["context_tokens"] == now  # estimated: no usage since

    masked = _command(ip, "mask --tool-results-before 0")
    [(before, after)] = [(int(a.replace(",", "")), int(b.replace(",", "")))
                         for a, b in re.findall(r"context ([\d,]+) → ([\d,]+) tokens", masked)]
    assert before == now and after < now, masked
    assert _tokens(r"\] ([\d,]+) / 8,192 tokens", _command(ip, "status")) == [after]
    assert _inspect(tmp_path, runtime.slot().session, capsys)["context_tokens"] == after


def test_after_a_cell_without_tools_the_figures_count_no_tools(ip, server):
    """A user running ``%%agent --no-tools`` (a local model without tool calls) sees, outside the
    run, the context the next such cell sends: without the ~1,500 tokens of tool definitions."""
    ip.run_line_magic("config", "Agent.context_window = 4096")
    server.enqueue_text("An answer without tools. " * 10)
    cap = run(ip, "--no-tools", "What is a median?")
    widget = [o.data["text/plain"] for o in cap.outputs if o.data.get("text/plain", "").startswith("Context")][-1]
    [shown] = _tokens(r"\] ([\d,]+) / 4,096 tokens", widget)
    assert server.requests[-1].body.get("tools") in (None, [])  # what was sent: no tool definitions
    status = _command(ip, "status")
    assert _tokens(r"\] ([\d,]+) / 4,096 tokens", status) == [shown]
    context = _command(ip, "context")
    assert _tokens(r"the budget counts ([\d,]+) tokens", context) == [shown]
    assert "no tools: the last cell ran with --no-tools" in context and "tools (0)" in context
    [estimate] = _tokens(r"≈([\d,]+) tokens by the chars/4 estimates", context)
    assert estimate < shown + 200, context[:300]  # (with the ten definitions it was ≈1,690)
    server.enqueue_text("Now with tools.")
    cap = run(ip, "", "And a mean?")
    assert server.requests[-1].body["tools"]
    with_tools = _tokens(r"the budget counts ([\d,]+) tokens", _command(ip, "context"))
    assert with_tools[0] > shown + 1000  # the definitions count again
