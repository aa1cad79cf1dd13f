"""Compaction settings and the trigger: strict ``>``, never with an unknown or zero window (pi.md §1.1–1.2)."""

from __future__ import annotations

import pytest

from ipyagent.compaction.settings import (
    CompactionSettings,
    compaction_threshold,
    should_compact,
)
from support.builders import assistant, new_session, user


def test_pi_defaults():
    s = CompactionSettings()  # nothing set: the budgets are derived from the window, Pi's for large ones
    assert (s.reserve_tokens, s.keep_recent_tokens, s.enabled) == (None, None, True)
    assert s.to_pi(200_000) == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}


def test_from_dict_accepts_pi_and_python_names_and_ignores_others():
    s = CompactionSettings.from_dict({"reserveTokens": 1000, "keep_recent_tokens": 500, "enabled": False, "x": 1})
    assert (s.reserve_tokens, s.keep_recent_tokens, s.enabled) == (1000, 500, False)
    assert CompactionSettings.from_dict(s.to_dict()) == s


def test_threshold_for_a_200k_model_is_183616():
    assert compaction_threshold(200_000, CompactionSettings()) == 183_616


def test_strictly_greater_than_threshold():
    s = CompactionSettings()
    assert not should_compact(183_616, 200_000, s)
    assert should_compact(183_617, 200_000, s)
    assert not should_compact(0, 200_000, s)


@pytest.mark.parametrize("window", [None, 0, -5])
def test_never_with_unknown_or_zero_window(window):
    assert not should_compact(10**9, window, CompactionSettings())


def test_disabled_never_compacts():
    assert not should_compact(10**9, 200_000, CompactionSettings(enabled=False))


def test_small_window_custom_reserve():
    s = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=200)
    assert not should_compact(3000, 4000, s)
    assert should_compact(3001, 4000, s)


def test_session_should_compact_uses_its_context_tokens():
    session = new_session(user("x"), assistant("a", total=3001))
    settings = CompactionSettings(reserve_tokens=1000)
    assert session.should_compact(4000, settings)
    assert not session.should_compact(4001, settings)
    assert not session.should_compact(None, settings)
    assert not session.should_compact(0)
