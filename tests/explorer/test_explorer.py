"""The compaction explorer (issue 12 §3): its plan is ``prepare_compaction``'s, its summariser
input is what compaction sends, the timeline's boxes keep every boundary exact, untrusted text is
escaped, the widget re-plans on a slider move, "compact now" asks first, ``explore()`` reads saved
notebooks and Pi files, and ``%agent explore`` works in a real kernel (compacting through the
fake provider)."""

from __future__ import annotations

import json
import re
import warnings

import pytest

from ipyagent.compaction.prepare import prepare_compaction
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.core import Session
from ipyagent.explorer.html import static_bundle, timeline_html
from ipyagent.explorer.plan import ENTRY_BOX_LIMIT, ExplorerModel, ExploreSettings
from ipyagent.explorer.widget import CompactionExplorer, explore
from ipyagent.hooks import HookRegistry
from ipyagent.session.tokens import make_estimator
from kernel_support import SETUP, LiveKernel, fake_provider
from support.builders import assistant, call, new_session, tool_result, turn, user
from support.hostile import HOSTILE, HOSTILE_NAME, PAYLOADS, audit_html
from support.outputs import outputs_text
from support.sessiongen import generate_session, write_jsonl


def four_turns() -> Session:
    s = new_session()
    for k in range(4):
        turn(s, f"prompt {k}", size=400, tools=2)
    return s


def model_of(session, keep=600, reserve=2000, window=8000, **kwargs) -> ExplorerModel:
    return ExplorerModel(session, ExploreSettings(window, reserve, keep), **kwargs)


def fates(x) -> list[str]:
    """Each path entry's fate, read back from the boxes (per-entry mode)."""
    out = []
    for box in x.boxes:
        out += [box.fate] * box.entries
    return out


def cut_of(html: str) -> str:
    match = re.search(r'class="ipyagent-explore-cut" data-cut-index="(\d+)"', html)
    assert match, html[:2000]
    return match.group(1)


# ---- the plan is prepare_compaction's ----------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"p_compaction": 0.0, "p_compaction_midturn": 0.0, "p_overflow": 0.0}],
                         ids=["pi-mix", "never-compacted"])
def test_the_plan_is_prepare_compactions_for_every_setting(options):
    header, entries = generate_session(7, 700, end="turn_end", **options)
    session = Session(header, entries, hooks=HookRegistry())
    model = model_of(session)
    seen = set()
    for keep in (0, 300, 1_000, 3_000, 8_000, 20_000, 60_000):
        for reserve in (1_000, 16_384):
            x = model.update(keep_recent_tokens=keep, reserve_tokens=reserve)
            expected = session.prepare_compaction(CompactionSettings(reserve, keep))
            if expected is None:
                assert x.plan is None and x.cut_index is None and x.reason
                continue
            assert x.plan.first_kept_entry_id == expected.first_kept_entry_id
            assert x.plan.summarized_entry_ids == expected.summarized_entry_ids
            assert x.plan.turn_prefix_entry_ids == expected.turn_prefix_entry_ids
            assert x.plan.is_split_turn == expected.is_split_turn
            assert x.tokens_before == expected.tokens_before == session.context_tokens()
            assert x.kept_tokens == session.compaction_planner().kept_tokens(expected)
            assert x.estimated_before == session.compaction_planner().estimated_tokens()
            seen.add(x.cut_index)
    assert len(seen) >= 3, "the cut should move across these settings"


def test_fates_follow_the_plan_of_a_split_turn():
    s = four_turns()
    path = s.path()
    x = model_of(s, keep=600).update()
    plan = x.plan
    assert plan.is_split_turn and x.grouping == "entry" and len(x.boxes) == len(path)
    got = fates(x)
    ids = [e["id"] for e in path]
    assert [i for i, f in zip(ids, got) if f == "summarised"] == plan.summarized_entry_ids
    assert [i for i, f in zip(ids, got) if f == "prefix"] == plan.turn_prefix_entry_ids
    assert got[plan.first_kept_index:] == ["kept"] * (len(path) - plan.first_kept_index)
    assert x.cut_index == plan.first_kept_index and x.turn_start_index == plan.turn_start_index
    assert x.counts == {"earlier": 0, "summarised": 12, "prefix": 5, "kept": 7}
    assert x.tokens["kept"] == x.kept_tokens == s.compaction_planner().kept_tokens(plan)
    # two requests, each the model's output limit clamped to the window (Pi 1.6): 8,000 − 4,096 margin
    assert x.summary_max_tokens == 2 * (8000 - 4096)


def test_after_a_compaction_earlier_entries_and_the_latest_summary():
    s = four_turns()
    s.compact(ScriptedSummarizer(["## Goal\nfirst summary", "## Original Request\nprefix"]), CompactionSettings(keep_recent_tokens=600))
    turn(s, "prompt 4", size=400, tools=2)
    turn(s, "prompt 5", size=400, tools=2)
    x = model_of(s, keep=600).update()
    path = s.path()
    compaction = next(i for i, e in enumerate(path) if e["type"] == "compaction")
    boundary = next(i for i, e in enumerate(path) if e["id"] == path[compaction]["firstKeptEntryId"])
    got = fates(x)
    assert x.boundary == boundary == x.plan.boundary_start
    assert got[:boundary] == ["earlier"] * boundary
    assert got[compaction] == "summary" and x.counts["summary"] == 1
    assert x.tokens["summary"] == s.estimate_entry(path[compaction], {"role": "compactionSummary",
                                                                      "summary": path[compaction]["summary"]})
    assert x.plan.previous_summary.startswith("## Goal")
    # nothing but the latest compaction is drawn as a summary; nothing before the boundary is summarised
    assert "summarised" not in got[:boundary] and got.count("summary") == 1


def test_no_plan_says_why():
    s = four_turns()
    x = model_of(s, keep=100_000).update()
    assert x.plan is None and x.cut_index is None
    assert "fits in keep-recent (100,000)" in x.reason
    assert set(fates(x)) == {"kept"}
    s.compact(ScriptedSummarizer(["## Goal\nsummary", "prefix"]), CompactionSettings(keep_recent_tokens=600))
    x = model_of(s, keep=600).update()
    assert x.plan is None and "just compacted" in x.reason
    assert model_of(new_session()).update().reason.startswith("The session is empty")


def test_another_estimator_plans_with_it_and_leaves_the_session_alone():
    s = four_turns()
    cache_before = dict(s._estimates)
    model = model_of(s, keep=700)
    for name in ("chars4x1.2", "tiktoken"):
        x = model.update(estimator=name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tiktoken without internet counts with its offline copy
            estimator = make_estimator(name.split("x")[0], safety_factor=1.2 if name == "chars4x1.2" else None)
        expected = prepare_compaction(s.path(), CompactionSettings(2000, 700), estimator=estimator)
        assert x.estimator_name.startswith(name.split("x")[0])
        assert x.plan.first_kept_entry_id == expected.first_kept_entry_id
        assert x.plan.tokens_before == expected.tokens_before
    assert s.estimator.name == "chars4" and s._estimates == cache_before
    assert model.update(estimator="chars4").plan.first_kept_entry_id == s.prepare_compaction(
        CompactionSettings(2000, 700)).first_kept_entry_id
    with pytest.raises(ValueError, match="unknown estimator"):
        model.update(estimator="words")


def test_the_session_growing_is_picked_up():
    s = four_turns()
    model = model_of(s)
    first = model.update()
    turn(s, "prompt 4", size=400, tools=1)
    second = model.update()
    assert second.path_length == first.path_length + 4
    assert second.plan.first_kept_entry_id == s.prepare_compaction(CompactionSettings(2000, 600)).first_kept_entry_id


def test_the_widget_follows_a_growing_session():
    s = four_turns()
    explorer = CompactionExplorer(model_of(s, keep=600))
    top = explorer.keep.max
    for k in range(4, 12):
        turn(s, f"prompt {k}", size=400, tools=2)
    x = explorer.refresh()
    assert x.path_length == len(s.path()) and explorer.keep.max > top
    assert cut_of(explorer.numbers.value) == str(s.prepare_compaction(CompactionSettings(2000, 600)).first_kept_index)


# ---- boxes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [900, 6000])
def test_boxes_group_turns_and_never_straddle_a_boundary(size):
    header, entries = generate_session(3, size, end="turn_end")
    session = Session(header, entries, hooks=HookRegistry())
    model = model_of(session, keep=4000, reserve=16384, window=200_000)
    x = model.update()
    tokens = model.path_tokens()
    assert x.path_length > ENTRY_BOX_LIMIT and x.grouping != "entry"
    assert len(x.boxes) <= 400
    assert x.boxes[0].start == 0 and x.boxes[-1].end == x.path_length
    assert all(a.end == b.start for a, b in zip(x.boxes, x.boxes[1:]))
    assert sum(b.tokens for b in x.boxes) == tokens.box_tokens(0, x.path_length)
    edges = {b.start for b in x.boxes}
    assert x.cut_index in edges and x.boundary in edges
    if x.turn_start_index is not None:
        assert x.turn_start_index in edges
    # every box has one fate: the fate of each of its entries by the plan's ranges
    for box in x.boxes:
        if box.fate == "summary":
            assert box.entries == 1 and box.start == x.previous_index
        elif box.fate == "earlier":
            assert box.end <= x.boundary
        elif box.fate == "kept":
            assert box.start >= x.cut_index
        else:
            assert x.boundary <= box.start and box.end <= x.cut_index


# ---- the summariser's input --------------------------------------------------------------------


def _compacted_requests(session, settings, focus=None, input_tokens=None):
    summarizer = ScriptedSummarizer(["## Goal\nsummary one", "## Original Request\nprefix"])
    session.compact(summarizer, settings, focus=focus, summary_input_tokens=input_tokens)
    return summarizer.requests


def test_the_summariser_input_is_what_compaction_sends():
    s = four_turns()
    s.compact(ScriptedSummarizer(["## Goal\nthe first summary", "prefix"]), CompactionSettings(keep_recent_tokens=600))
    for k in range(4, 7):
        turn(s, f"prompt {k}", size=400, tools=2)
    model = model_of(s, keep=600)
    model.update(focus="keep the file names")
    shown = model.requests()
    assert [r.kind for r, _ in shown] == ["history", "turn_prefix"]
    assert "<previous-summary>\n## Goal\nthe first summary" in shown[0][0].prompt
    assert "Additional focus: keep the file names" in shown[0][0].prompt
    sent = _compacted_requests(s, CompactionSettings(2000, 600), focus="keep the file names")
    assert [(r.system_prompt, r.prompt, r.max_tokens, r.kind) for r, _ in shown] == \
           [(r.system_prompt, r.prompt, r.max_tokens, r.kind) for r in sent]


def test_the_summariser_input_drops_what_compaction_drops():
    big = new_session()
    for k in range(12):
        turn(big, f"prompt {k}", size=2000, tools=2)
    model = ExplorerModel(big, ExploreSettings(6000, 2000, 1500), model="openai:gpt-4.1-mini")
    model.update()
    budget = model.summary_input_tokens()
    assert budget == min(max(1024, 6000 - int(0.8 * 2000) - 512), 6000 * 45 // 100)  # a small window: under half
    shown = model.requests()
    assert shown[0][1] > 0, "this history cannot fit the summary model: its oldest messages are dropped"
    assert "earlier messages omitted to fit" in shown[0][0].prompt
    sent = _compacted_requests(big, CompactionSettings(2000, 1500), input_tokens=budget)
    assert [r.prompt for r, _ in shown] == [r.prompt for r in sent]


# ---- HTML --------------------------------------------------------------------------------------

OWN_TAGS = {"b", "details", "div", "i", "pre", "span", "summary"}  # what the explorer's own HTML uses


def test_untrusted_text_is_escaped_everywhere():
    s = new_session(user(HOSTILE), assistant(HOSTILE, call("c1", "read", path=HOSTILE), thinking=HOSTILE),
                    tool_result("c1", HOSTILE * 5), assistant("done " + HOSTILE))
    for k in range(3):
        turn(s, f"prompt {k} {HOSTILE_NAME}", size=300, tools=1)
    model = model_of(s, keep=200, name=HOSTILE_NAME, source=HOSTILE_NAME)
    model.update(focus=HOSTILE)
    x = model.current
    requests = model.requests()
    assert PAYLOADS["script"] in requests[0][0].prompt  # the summariser gets the text as it is…
    bundle = static_bundle(x, requests)
    # …a page only ever shows it as text: no element, handler or URL of its own
    for fragment in (bundle["text/html"], timeline_html(x)):
        assert not audit_html(fragment, OWN_TAGS), audit_html(fragment, OWN_TAGS)
    explorer = CompactionExplorer(model, compactor=lambda settings, plan: HOSTILE)
    explorer.accordion.selected_index = 0
    explorer.compact_button.click()
    live = [explorer.title.value, explorer.numbers.value, explorer.timeline.value, explorer.input.value,
            explorer.confirm_text.value]
    explorer.confirm_yes.click()
    live.append(explorer.status.value)
    for value in live:
        assert not audit_html(value, OWN_TAGS), audit_html(value, OWN_TAGS)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in explorer.status.value


def test_static_views_carry_the_cut_and_the_settings():
    s = four_turns()
    explorer = CompactionExplorer(model_of(s, keep=600))
    bundle = explorer.bundle()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert 'class="ipyagent-explore"' in html and cut_of(html) == "17"
    assert "keep-recent 600" in html and "What the summariser would receive: 2 requests" in html
    assert "Cut point: entry 18 of 24" in bundle["text/plain"] and "|" in bundle["text/plain"]


# ---- the widget --------------------------------------------------------------------------------


def test_the_sliders_steps_pass_through_the_sessions_values():
    # issue 37, item 9: the page snaps a slider to min + k × step and sends that back; on steps
    # through 0 the explorer opened at 4,100 / 1,000 / 1,260 for a session's 4,096 / 1,024 / 1,250
    explorer = CompactionExplorer(model_of(four_turns(), keep=1250, reserve=1024, window=4096))
    for slider, value in ((explorer.window, 4096), (explorer.reserve, 1024), (explorer.keep, 1250)):
        assert slider.value == value and (value - slider.min) % slider.step == 0, (slider.min, slider.step)
        assert (slider.max - slider.min) % slider.step == 0 and slider.step > 1
    explorer.set(reserve=0, window=3001)  # set from Python: the steps move to pass through them
    assert (explorer.reserve.value, explorer.window.value) == (0, 3001)
    assert all((s.value - s.min) % s.step == 0 for s in (explorer.window, explorer.reserve, explorer.keep))


def test_moving_keep_recent_moves_the_cut():
    s = four_turns()
    explorer = CompactionExplorer(model_of(s, keep=600))
    assert cut_of(explorer.numbers.value) == "17"
    assert explorer.keep.min <= 600 <= explorer.keep.max and explorer.keep.step >= 1
    explorer.keep.value = 518  # exactly the last turn
    plan = s.prepare_compaction(CompactionSettings(2000, 518))
    assert cut_of(explorer.numbers.value) == str(plan.first_kept_index) != "17"
    assert "ipyagent-explore-cutmark" in explorer.timeline.value
    explorer.keep.value = explorer.keep.max
    assert "ipyagent-explore-cut\"" not in explorer.numbers.value and "No cut" in explorer.numbers.value
    explorer.reserve.value = 7000
    assert "it would compact automatically now" in explorer.numbers.value
    x = explorer.set(keep_recent=600, window=9000)
    assert cut_of(explorer.numbers.value) == "17" and x.settings.window == 9000
    with pytest.raises(TypeError, match="unknown setting"):
        explorer.set(keep=1)


def test_the_input_is_built_only_while_its_section_is_open():
    s = four_turns()
    explorer = CompactionExplorer(model_of(s, keep=600))
    explorer.keep.value = 700
    assert explorer.input.value == "" and not explorer.model.requests_ready()
    explorer.accordion.selected_index = 0
    assert "Request 1: the history" in explorer.input.value and "[User]: prompt 0" in explorer.input.value
    assert explorer.accordion.titles[0].startswith("What the summariser would receive: 2 requests")
    explorer.keep.value = 518
    assert "Request 2" not in explorer.input.value, "an open section follows the slider"
    assert [r.prompt for r in explorer.summarizer_requests()] == [
        r.prompt for r in _compacted_requests(s, CompactionSettings(2000, 518))]


def test_compact_now_is_offered_only_with_a_compactor_and_asks_first():
    s = four_turns()
    assert CompactionExplorer(model_of(s)).compact_button is None
    calls = []

    def compactor(settings, plan):
        calls.append((settings, plan.first_kept_entry_id))
        s.compact(ScriptedSummarizer(["## Goal\nsummary", "prefix"]), settings.compaction(), plan=plan)
        return "Compacted: done"

    explorer = CompactionExplorer(model_of(s, keep=600), compactor=compactor, compact_model="openai:fake")
    explorer.ask_to_compact()
    assert explorer.confirm.layout.display == "" and not calls
    assert "summarises 12 entries and a turn prefix of 5" in explorer.confirm_text.value
    explorer.confirm_no.click()
    assert explorer.confirm.layout.display == "none" and not calls and "unchanged" in explorer.status.value
    explorer.compact_now()  # never without a confirmation
    assert not calls
    explorer.compact_button.click()
    explorer.keep.value = 518  # the plan moves between the question and the answer: ask again
    explorer.confirm_yes.click()
    assert not calls and "confirm again" in explorer.status.value
    explorer.confirm_yes.click()
    assert len(calls) == 1 and calls[0][0].keep_recent_tokens == 518
    assert "Compacted: done" in explorer.status.value
    assert s.path()[-1]["type"] == "compaction" and "just compacted" in explorer.numbers.value


def test_a_failed_compaction_is_shown_and_changes_nothing():
    s = four_turns()
    before = len(s)

    def compactor(settings, plan):
        raise RuntimeError("the summary model said <no>")

    explorer = CompactionExplorer(model_of(s, keep=600), compactor=compactor)
    explorer.compact_button.click()
    explorer.confirm_yes.click()
    assert "Compaction failed" in explorer.status.value and "&lt;no&gt;" in explorer.status.value
    assert len(s) == before and not explorer.compact_button.disabled


# ---- explore(path) -----------------------------------------------------------------------------


def test_explore_a_pi_session_file(tmp_path):
    header, entries = generate_session(5, 300, end="turn_end")
    path = tmp_path / "run.jsonl"
    write_jsonl(path, header, entries)
    explorer = explore(path, keep_recent=3000)
    x = explorer.exploration
    session = Session.from_file(path)
    assert x.session_name == "run" and x.source == str(path) and x.path_length == len(session.path())
    assert x.plan.first_kept_entry_id == session.prepare_compaction(
        CompactionSettings(16384, 3000)).first_kept_entry_id
    assert not x.window_known and "assumed" in explorer.numbers.value
    assert explorer.compact_button is None


def test_explore_a_saved_notebook_with_its_settings(tmp_path):
    from ipyagent.store.ipynb import new_notebook, write_notebook, write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    s = four_turns()
    other = four_turns()
    settings = {"model": "openai:gpt-4.1-mini", "context_window": 9000,
                "compaction": {"reserve_tokens": 1500, "keep_recent_tokens": 518, "enabled": True}}
    stored = NotebookSessions.from_session("main", s, settings)
    stored.from_session("other", other, {})
    stored.active = "main"
    nb = write_sessions_into_notebook(new_notebook(), stored)
    path = tmp_path / "saved.ipynb"
    write_notebook(path, nb)
    explorer = explore(str(path))
    x = explorer.exploration
    assert (x.session_name, x.settings.window, x.settings.reserve_tokens, x.settings.keep_recent_tokens) == \
           ("main", 9000, 1500, 518)
    assert x.window_known and x.plan.first_kept_entry_id == s.prepare_compaction(
        CompactionSettings(1500, 518)).first_kept_entry_id
    assert explore(path, session="other").exploration.session_name == "other"
    with pytest.raises(ValueError, match="no session 'nope'"):
        explore(path, session="nope")
    empty = tmp_path / "empty.ipynb"
    write_notebook(empty, new_notebook())
    with pytest.raises(ValueError, match="holds no ipyagent session"):
        explore(empty)
    with pytest.raises(FileNotFoundError):
        explore(tmp_path / "missing.ipynb")
    with pytest.raises(TypeError):
        explore(42)
    import ipyagent

    assert ipyagent.explore is explore


@pytest.mark.parametrize("window", ["abc", [1], "1e9", 1e9, -5, True, 10**30, {"a": 1}])
def test_hostile_stored_settings_are_reported_not_raised(tmp_path, window):
    """The settings come from the notebook's metadata: a value that is no number of tokens is left
    out and the explorer says so, where it used to raise ValueError / TypeError (issue 19)."""
    import ipyagent
    from ipyagent.explorer.widget import ASSUMED_WINDOW
    from ipyagent.store.ipynb import new_notebook, write_notebook, write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    settings = {"model": ["not", "a", "name"], "context_window": window,
                "compaction": {"reserve_tokens": "lots", "keep_recent_tokens": 518}}
    nb = write_sessions_into_notebook(new_notebook(), NotebookSessions.from_session("main", four_turns(), settings))
    path = tmp_path / "hostile.ipynb"
    write_notebook(path, nb)
    explorer = ipyagent.explore(str(path))
    x = explorer.exploration
    assert (x.settings.window, x.settings.reserve_tokens, x.settings.keep_recent_tokens) == (ASSUMED_WINDOW, 16384, 518)
    assert not x.window_known
    assert any(n.startswith("The stored context_window ") and "is not a number of tokens" in n for n in x.notes)
    assert any(n.startswith("The stored reserve_tokens 'lots' is not a number of tokens") for n in x.notes)
    shown = static_bundle(x, [])["text/plain"]
    assert "The stored context_window" in shown


def test_the_widgets_and_the_saved_view_show_no_key_the_kernel_knows(ip, server, monkeypatch):
    """The widgets' values are synced to the page and saved with the notebook when the page saves
    widget state, and "Keep this view" rewrites the output from a button's click, outside any
    command: both are scrubbed like every output. Here the value became a secret after the
    session held it (the token was exported after the cells ran)."""
    import ipywidgets as widgets

    from ipyagent.explorer.widget import explorer_for_slot
    from support.shell import run, runtime_of

    token = "tok-warehouse-0123456789abcdef"
    for k in range(3):
        server.enqueue_text(f"Use the token {token} for part {k}. " * 20)
        run(ip, "--no-tools", f"which token for part {k}?")
    monkeypatch.setenv("WAREHOUSE_TOKEN", token)
    explorer = explorer_for_slot(runtime_of(ip), keep_recent=10)
    explorer.accordion.selected_index = 0  # the summariser's input, open
    explorer.keep.value = 20
    shown = {name: c.value for name, c in vars(explorer).items() if isinstance(c, widgets.HTML)}
    assert "Use the token ***" in shown["input"] and "Use the token ***" in shown["timeline"]
    assert not [name for name, value in shown.items() if token in value]
    explorer._handle = type("Handle", (), {"update": lambda self, data, raw: kept.append(data)})()
    kept: list[dict] = []
    explorer.keep_static_view()
    assert kept and token not in json.dumps(kept) and "***" in kept[0]["text/html"]


# ---- a real kernel -------------------------------------------------------------------------------


def _widget_outputs(cell):
    return [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {})]


@pytest.mark.kernel
def test_agent_explore_in_a_kernel_and_compact_now(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path)) as k:
        k.run(SETUP + "%config Agent.context_window = 8000\n%config Agent.reserve_tokens = 2000\n"
                      "%config Agent.keep_recent_tokens = 300", "setup")
        for i in range(3):
            server.enqueue_text(f"Answer {i}: " + "the numbers look consistent with the plan " * 12)
            cell = k.run(f"%%agent\nQuestion {i}: " + "what do the numbers say " * 10, f"agent-{i}")
            assert cell.status == "ok", outputs_text(cell.outputs)

        cell = k.run("%agent explore --keep-recent 300", "explore")
        assert cell.status == "ok", outputs_text(cell.outputs)
        shown = _widget_outputs(cell)
        assert len(shown) == 1
        data = shown[0]["data"]
        assert 'class="ipyagent-explore"' in data["text/html"] and "keep-recent 300" in data["text/html"]
        assert "Cut point: entry" in data["text/plain"]
        assert "window 8,000" in data["text/plain"]

        cell = k.run("%agent explore --session nope", "explore-bad")
        assert cell.status == "error" and "no session 'nope'" in outputs_text(cell.outputs)

        # the same explorer, driven from Python: ask, confirm, compact through the fake provider
        server.enqueue_summary("## Goal\nRead the numbers.\n\n## Progress\n- [x] three questions answered")
        cell = k.run(
            "import json\n"
            "from ipyagent.kernel.extension import get_runtime\n"
            "from ipyagent.explorer.widget import explorer_for_slot\n"
            "ex = explorer_for_slot(get_runtime(get_ipython()), keep_recent=300)\n"
            "plan = ex.exploration.plan\n"
            "shown = [r.prompt for r in ex.summarizer_requests()]\n"
            "ex.ask_to_compact()\n"
            "ex.confirm_yes.click()\n"
            "s = get_runtime(get_ipython()).slot().session\n"
            "print(json.dumps({'offered': ex.compact_button is not None, 'status': ex.status.value,\n"
            "                  'planned': plan.first_kept_entry_id, 'shown': shown,\n"
            "                  'last': s.path()[-1]['type'], 'kept': s.path()[-1].get('firstKeptEntryId')}))",
            "compact-now")
        assert cell.status == "ok", outputs_text(cell.outputs)
        result = json.loads(outputs_text(cell.outputs).strip().splitlines()[-1])
        assert result["offered"] and "Compacted:" in result["status"], result
        assert result["last"] == "compaction" and result["kept"] == result["planned"]
        summaries = [r for r in server.requests if r.kind == "summary"]
        assert len(summaries) == len(result["shown"]) >= 1
        for shown, request in zip(result["shown"], summaries):
            assert json.dumps(shown)[1:-1] in json.dumps(request.body), "the summariser got what the explorer showed"
        k.drain_until(lambda: [e["type"] for e in k.metadata["sessions"]["default"]["entries"]][-1:] == ["compaction"],
                      "the bridge saved the compaction entry")

        # without a provider there is no button
        cell = k.run(
            "import os\n"
            "for name in ('OPENAI_API_KEY', 'OPENAI_BASE_URL'):\n"
            "    os.environ.pop(name, None)\n"
            "print(explorer_for_slot(get_runtime(get_ipython())).compact_button is None)", "offline")
        assert outputs_text(cell.outputs).strip().endswith("True"), outputs_text(cell.outputs)


def test_a_prompt_is_labelled_with_what_the_user_typed():
    """Not with the notebook-activity block it carries for the model (issue 28, item 10)."""
    from ipyagent.explorer.plan import entry_label

    message = {"role": "user", "executionCount": 4, "cellPrompt": "plot the rain",
               "content": [{"type": "text", "text": "<notebook-activity>\nWhat happened…\n</notebook-activity>"},
                           {"type": "text", "text": "plot the rain"}]}
    assert entry_label({"type": "message", "id": "e1", "message": message}) == ("prompt [4]", "plot the rain")
