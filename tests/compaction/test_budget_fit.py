"""The budgets compaction derives from the window when the user sets none (compaction/settings.py
``fit_budget``): Pi's values for large windows, scaled down for small ones so that a compaction can
always bring the context under the threshold; values the user sets kept, unless they cannot fit."""

from __future__ import annotations

import pytest

from ipyagent.compaction.settings import (
    FULL_BUDGET_WINDOW,
    PI_KEEP_RECENT_TOKENS,
    PI_RESERVE_TOKENS,
    CompactionSettings,
    compaction_threshold,
    fit_budget,
    should_compact,
)
from ipyagent.compaction.summarizer import ScriptedSummarizer
from support.builders import assistant, new_session, user

# 1,024 … 2,000,000 tokens, with the edges of the rule and the windows users run (Ollama's 4,096…)
WINDOWS = sorted({1024, 1500, 2048, 3000, 4096, 6000, 8192, 16_384, 32_000, 32_768, 50_000, 65_535, 65_536,
                  100_000, 128_000, 200_000, 400_000, 1_000_000, 1_048_576, 2_000_000}
                 | {int(1024 * 1.37 ** k) for k in range(25) if 1024 * 1.37 ** k <= 2_000_000})


@pytest.mark.parametrize("window", [65_536, 128_000, 200_000, 1_000_000, 2_000_000])
def test_pi_values_are_kept_for_large_windows(window):
    budget = fit_budget(CompactionSettings(), window)
    assert (budget.reserve_tokens, budget.keep_recent_tokens) == (PI_RESERVE_TOKENS, PI_KEEP_RECENT_TOKENS)
    assert (budget.reserve_from, budget.keep_from, budget.problem) == ("default", "default", "")
    assert budget.threshold == window - 16384
    assert budget.reserve_text() == "reserve 16,384"


def test_an_unknown_window_keeps_pi_values_and_has_no_threshold():
    budget = fit_budget(CompactionSettings(), None)
    assert (budget.reserve_tokens, budget.keep_recent_tokens, budget.threshold) == (16384, 20000, None)
    assert CompactionSettings().to_pi() == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}


@pytest.mark.parametrize("window", WINDOWS)
def test_derived_budgets_fit_every_window(window):
    budget = fit_budget(CompactionSettings(), window)
    assert budget.problem == ""
    assert 0 < budget.reserve_tokens <= window // 4
    assert 0 < budget.keep_recent_tokens <= 0.31 * window
    assert budget.reserve_tokens + budget.keep_recent_tokens <= 0.56 * window  # ≥ 44 % left for the rest
    assert budget.threshold is not None and budget.threshold >= 0.75 * window
    if window < FULL_BUDGET_WINDOW:
        assert (budget.reserve_from, budget.keep_from) == ("scaled", "scaled")


def test_the_scaled_reserve_says_so():
    budget = fit_budget(CompactionSettings(), 2048)
    assert (budget.reserve_tokens, budget.keep_recent_tokens, budget.threshold) == (512, 625, 1536)
    assert budget.reserve_text() == "reserve 512 (scaled to the 2,048-token window)"
    assert budget.keep_text() == "keep-recent 625 (scaled too)"


@pytest.mark.parametrize("window", WINDOWS)
def test_a_compaction_brings_the_context_under_the_threshold(window):
    # A session well over its threshold: turns of ~4 % of the window each, a system prompt of
    # ~10 % of it, and a summary of ~10 % of it. One compaction with the derived budgets must
    # leave the whole request (system prompt, summary, kept tail) under the threshold.
    unit = max(8, window // 50)  # tokens of a prompt; its answer is as long
    system = "s" * (4 * (window // 10))
    session = new_session()
    session.append_message({"role": "system", "content": system, "timestamp": 1})
    settings = CompactionSettings().fitted(window)
    threshold = compaction_threshold(window, settings)
    i = 0
    while session.context_tokens() <= threshold + unit:
        session.append_message(user(f"prompt {i} " + "p" * (4 * unit)))
        session.append_message(assistant(f"answer {i} " + "a" * (4 * unit)))
        i += 1
    assert should_compact(session.context_tokens(), window, settings)
    summary = "## Goal\n" + "g" * (4 * (window // 10))
    session.compact(ScriptedSummarizer(fn=lambda request: summary), settings)
    after = session.context_tokens()
    assert after <= threshold, (window, after, threshold)
    assert not should_compact(after, window, settings)


def test_values_the_user_sets_are_kept():
    budget = fit_budget(CompactionSettings(reserve_tokens=600, keep_recent_tokens=350), 2048)
    assert (budget.reserve_tokens, budget.keep_recent_tokens, budget.problem) == (600, 350, "")
    assert (budget.reserve_from, budget.keep_from) == ("set", "set")
    # one set, the other derived
    budget = fit_budget(CompactionSettings(reserve_tokens=1000), 8192)
    assert (budget.reserve_tokens, budget.keep_recent_tokens) == (1000, 2500)
    assert (budget.reserve_from, budget.keep_from) == ("set", "scaled")


def test_set_values_that_cannot_fit_the_window_are_replaced_and_said():
    budget = fit_budget(CompactionSettings(reserve_tokens=16384, keep_recent_tokens=20000), 2048)
    assert (budget.reserve_tokens, budget.keep_recent_tokens) == (512, 625)
    assert (budget.reserve_from, budget.keep_from) == ("replaced", "replaced")
    assert budget.threshold == 1536
    assert ("Agent.reserve_tokens = 16,384 and Agent.keep_recent_tokens = 20,000 cannot work with a 2,048-token "
            "window") in budget.problem
    assert "reserve 512 and keep-recent 625" in budget.problem
    # only the value that is too large is replaced
    budget = fit_budget(CompactionSettings(reserve_tokens=300, keep_recent_tokens=6000), 6000)
    assert (budget.reserve_tokens, budget.keep_recent_tokens) == (300, 1831)
    assert (budget.reserve_from, budget.keep_from) == ("set", "replaced") and budget.problem
    # the trigger uses the replacement: no negative threshold, no compaction on every request
    settings = CompactionSettings(reserve_tokens=6000, keep_recent_tokens=100)
    assert compaction_threshold(6000, settings) == 4500
    assert not should_compact(4500, 6000, settings) and should_compact(4501, 6000, settings)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("reserve,keep", [(16384, 20000), (16384, None), (None, 20000), (0, 10**7), (10**7, 0)])
def test_no_threshold_is_ever_negative(window, reserve, keep):
    budget = fit_budget(CompactionSettings(reserve, keep), window)
    assert budget.threshold is not None and budget.threshold > 0
    assert budget.reserve_tokens + budget.keep_recent_tokens < window
