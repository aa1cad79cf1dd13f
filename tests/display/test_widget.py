"""The budget widget's facts and views, and the run renderer (throttling, tool blocks, errors)."""

from __future__ import annotations

import pytest

from ipyagent.agent import run_events as ev
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.core import Session
from ipyagent.display.budget_widget import BudgetFacts, BudgetWidget, budget_facts, static_bundle
from ipyagent.display.stream import RunRenderer, error_bundle, tool_bundle
from ipyagent.providers.provider import TextDelta


def _session(turns: int = 6, with_compaction: bool = False) -> Session:
    s = Session()
    for i in range(turns):
        s.append_message({"role": "user", "content": f"question {i} " + "x" * 400, "timestamp": 1})
        s.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " + "y" * 400}],
                          "usage": {"input": 100 * (i + 1), "output": 100, "cacheRead": 50 * i, "cacheWrite": 7},
                          "stopReason": "stop", "timestamp": 2})
    if with_compaction:
        kept = s.entries[-4]["id"]
        s.append({"type": "compaction", "summary": "## Goal\nThe goal.", "firstKeptEntryId": kept,
                  "tokensBefore": 1234})
    return s


def test_facts_split_the_window_into_parts():
    config = RunConfig(model="openai:m", context_window=8000, compaction=CompactionSettings(1000, 300))
    facts = budget_facts(_session(), config, window=8000, session_name="s")
    assert facts.threshold == 7000 and facts.reserve == 1000
    assert facts.parts["system"] > 0 and facts.parts["history"] > 0 and 0 < facts.parts["tail"] <= 400
    assert facts.parts["summary"] == 0 and facts.compactions == 0
    assert facts.cache_read == 250 and facts.cache_write == 7
    assert facts.total == 600 + 100 + 250 + 7  # the last reply's usage: input, output, cache read, write
    assert abs(sum(facts.parts.values()) - facts.total) <= 4  # the bar's parts add up to the total


def test_facts_after_a_compaction_show_the_summary():
    config = RunConfig(model="openai:m", compaction=CompactionSettings(1000, 300))
    facts = budget_facts(_session(with_compaction=True), config, window=None)
    assert facts.compactions == 1 and facts.latest_summary.startswith("## Goal")
    assert facts.parts["summary"] > 0 and facts.threshold is None


def test_right_after_a_compaction_the_total_includes_the_system_prompt_and_tools():
    """The kept assistant messages' usage predates the compaction, so it does not count; the
    total is then the estimates, which must include the system prompt and the tool definitions."""
    config = RunConfig(model="openai:m", compaction=CompactionSettings(1000, 300))
    session = _session(with_compaction=True)
    facts = budget_facts(session, config, window=8000)
    from ipyagent.display.budget_widget import system_tools_tokens

    system = system_tools_tokens(config, ())
    assert facts.total == session.context_tokens() + system
    assert facts.parts["system"] == system  # not scaled down to a stale provider count
    assert abs(sum(facts.parts.values()) - facts.total) <= 4


@pytest.mark.parametrize("window", [1024, 2048, 4096, 6000, 32_000, 128_000])
def test_with_no_budget_set_the_details_say_the_budgets_were_scaled_and_no_threshold_is_negative(window):
    config = RunConfig(model="openai:m", context_window=window)  # a user who set only the window
    facts = budget_facts(_session(), config, window=window)
    assert facts.threshold is not None and facts.threshold > 0
    for view in static_bundle(facts).values():
        assert "compacts above -" not in view and "above -" not in view
    plain = static_bundle(facts)["text/plain"]
    if window < 65_536:
        expected = (f"compacts above {window - window // 4:,} · reserve {window // 4:,} (scaled to the {window:,}-token "
                    "window) · keep-recent")
        assert expected in plain
    else:
        assert "compacts above 111,616 (reserve 16,384)" in plain


def test_set_budgets_that_cannot_fit_are_shown_replaced():
    config = RunConfig(model="openai:m", context_window=2048, compaction=CompactionSettings(16384, 20000))
    facts = budget_facts(_session(), config, window=2048)
    plain = static_bundle(facts)["text/plain"]
    assert facts.threshold == 1536 and "compacts above 1,536 · reserve 512 (the value set does not fit" in plain


def test_the_fixed_part_is_the_same_at_every_turn_whatever_the_usage_says():
    # The provider's usage counts the real tokens; its ratio to the estimates changes from turn
    # to turn. The "system + tools" part is the estimate of the system prompt and tools (times
    # the token factor) every time; only the message parts absorb the difference.
    from ipyagent.display.budget_widget import system_tools_tokens

    config = RunConfig(model="openai:m", context_window=8000, compaction=CompactionSettings(1000, 300))
    session, shown = Session(), set()
    for i, reported in enumerate([900, 1500, 1700, 2600, 2700]):
        session.append_message({"role": "user", "content": f"question {i} " + "x" * (200 + 300 * i), "timestamp": 1})
        session.append_message({"role": "assistant", "content": [{"type": "text", "text": "y" * 100}],
                                "usage": {"input": reported, "output": 30, "cacheRead": 0, "cacheWrite": 0},
                                "stopReason": "stop", "timestamp": 2})
        for factor in (1.0, 1.25):
            facts = budget_facts(session, config, window=8000, token_factor=factor)
            assert abs(sum(facts.parts.values()) - facts.total) <= 4
            shown.add((factor, facts.parts["system"]))
    system = system_tools_tokens(config, ())
    assert shown == {(1.0, system), (1.25, -(-system * 5 // 4))}


def test_static_views_carry_the_same_facts():
    facts = BudgetFacts(session_name="main", model="openai:m", window=10000, reserve=2000, total=4321,
                        parts={"system": 500, "summary": 300, "history": 2500, "tail": 1021}, compactions=2,
                        cache_read=4000, cache_write=10, latest_summary="## Goal\nSummary text <b>")
    bundle = static_bundle(facts)
    assert set(bundle) == {"text/plain", "text/html", "text/markdown"}
    for view in bundle.values():
        assert "4,321" in view and "10,000" in view and "2 compactions" in view
    assert "left:80.00%" in bundle["text/html"]  # the threshold marker at window − reserve
    assert "&lt;b&gt;" in bundle["text/html"] and "<details>" in bundle["text/html"]
    assert "|" in bundle["text/plain"].splitlines()[1]
    assert "cache read 4,000 / write 10" in bundle["text/markdown"]


def test_live_widget_updates_and_bundle():
    widget = BudgetWidget(BudgetFacts(window=1000, reserve=100, total=10))
    widget.update(BudgetFacts(window=1000, reserve=100, total=900, latest_summary="S"))
    data = widget.bundle()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "900" in data["text/html"] and "900" in data["text/markdown"]
    widget.start_ticker("Compacting 84,312 tokens…", interval=0.01)
    assert "Compacting 84,312 tokens…" in widget.facts.status
    widget.stop_ticker()
    assert " s" in widget.facts.status


class _Handle:
    def __init__(self, log):
        self.log = log

    def update(self, data, **kwargs):
        self.log.append(("update", data))


def test_renderer_throttles_streaming_updates():
    log: list = []
    now = [0.0]

    def display(data, **kwargs):
        log.append(("display", data))
        return _Handle(log)

    renderer = RunRenderer(display_func=display, clock=lambda: now[0], max_updates_per_second=10)
    for i in range(100):  # 100 deltas within one second
        now[0] = i * 0.01
        renderer(TextDelta(f"w{i} "))
    renderer(ev.AgentEnd([]))
    assert 9 <= renderer.updates <= 12
    final = log[-1][1]["text/plain"]
    assert final.endswith("w99 ")  # the last update always goes out


def test_renderer_tool_blocks_and_errors():
    log: list = []

    def display(data, **kwargs):
        log.append(("display", data))
        return _Handle(log)

    renderer = RunRenderer(display_func=display)
    renderer(ev.ToolExecutionStart("c1", "python", {"code": "1 + 1"}))
    result = {"role": "toolResult", "toolCallId": "c1", "toolName": "python",
              "content": [{"type": "text", "text": "2"}], "isError": False}
    renderer(ev.ToolExecutionEnd("c1", "python", result))
    assert log[0][0] == "display" and "running" in log[0][1]["text/plain"]
    assert log[1][0] == "update" and "<details" in log[1][1]["text/html"] and "✓" in log[1][1]["text/plain"]
    renderer(ev.AgentError("OpenAI (HTTP 500): server error"))
    assert "Model error" in log[-1][1]["text/plain"] and "Traceback" not in log[-1][1]["text/plain"]
    bundle = tool_bundle("bash", {"command": "ls"}, {"content": [{"type": "text", "text": "boom"}], "isError": True})
    assert "✗" in bundle["text/plain"] and "boom" in bundle["text/html"]
    assert "<b>x</b>" in error_bundle("<oops>", title="x")["text/html"] and "&lt;oops&gt;" in error_bundle(
        "<oops>", title="x")["text/html"]


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.kernel
def test_every_finished_run_leaves_only_the_static_view_and_no_widget_model(tmp_path):
    """In a real kernel, with a frontend that applies display updates (as JupyterLab does): the
    widget is live while its run goes on; when the run ends its output is the static view alone
    and its models are closed, so a restarted or reopened notebook shows no dead widget."""
    from kernel_support import SETUP, LiveKernel, fake_provider

    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP, "setup")
        runs = [("%%agent\nFirst question.", "a1"), ("%%agent\nSecond question.", "a2"),
                ("%%agent --session other\nA question elsewhere.", "b1"), ("%compact", "a3"),
                ("%agent status", "s1")]
        server.enqueue_summary("## Goal\nAnswer questions.")
        for source, cell_id in runs:
            server.enqueue_text(f"An answer to {cell_id}.")
            cell = k.run(source, cell_id)
            assert cell.status == "ok", cell.outputs
        k.drain(0.5)
        budget = {c.cell_id: [o for o in c.outputs if "ipyagent-budget" in str((o.get("data") or {}).get("text/html"))]
                  for c in k.cells if c.cell_id in ("a1", "a2", "b1", "a3", "s1")}
        assert all(len(views) == 1 for views in budget.values()), budget
        for cell_id, views in budget.items():
            data = views[0]["data"]
            assert WIDGET_VIEW not in data, cell_id
            assert set(data) == {"text/plain", "text/html", "text/markdown"}
            assert "tokens" in data["text/plain"]
        # every run's widget models are closed: nothing in the kernel for a dead view to point at
        open_models = k.evaluate("sorted(w.model_id for w in __import__('ipywidgets.widgets.widget', "
                                 "fromlist=['x'])._instances.values() if type(w).__name__ == 'VBox')")
        assert open_models == []
