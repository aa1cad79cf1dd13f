"""The four prompts carry Pi's section headings (pi.md §3.2); request layout; focus; preamble."""

from __future__ import annotations

import pytest

from ipyagent.compaction import prompts

SIX = ["## Goal", "## Constraints & Preferences", "## Progress", "### Done", "### In Progress", "### Blocked",
       "## Key Decisions", "## Next Steps", "## Critical Context"]


def in_order(text, headings):
    positions = [text.index(h) for h in headings]
    return positions == sorted(positions)


def test_system_prompt():
    p = prompts.SYSTEM_PROMPT
    assert "context summarization assistant" in p and "an AI assistant" in p  # Pi 1.6: no longer "coding"
    assert "Do NOT continue the conversation" in p and "ONLY output the structured summary" in p


@pytest.mark.parametrize("prompt", [prompts.INITIAL_PROMPT, prompts.UPDATE_PROMPT])
def test_initial_and_update_prompts_have_the_six_sections_in_order(prompt):
    assert in_order(prompt, SIX)
    assert "Use this EXACT format" in prompt
    assert "- [x]" in prompt and "- [ ]" in prompt and "(none)" in prompt


def test_initial_prompt_opening():
    assert prompts.INITIAL_PROMPT.startswith("The messages above are a conversation to summarize.")


def test_update_prompt_rules():
    p = prompts.UPDATE_PROMPT
    assert "NEW conversation messages" in p and "<previous-summary>" in p
    for rule in ("PRESERVE", "ADD", "UPDATE Progress", 'UPDATE "Next Steps"'):
        assert rule in p
    assert '"In Progress"' in p and '"Done"' in p


def test_turn_prefix_prompt():
    p = prompts.TURN_PREFIX_PROMPT
    assert "earlier part of a conversation" in p and "do not try to reconstruct them" in p  # Pi 1.6's checkpoint
    assert in_order(p, ["## Original Request", "## Progress So Far", "## Context Needed to Continue"])
    assert "## Goal" not in p


def test_branch_prompt_has_no_critical_context():
    p = prompts.BRANCH_PROMPT
    assert in_order(p, SIX[:-1])
    assert "## Critical Context" not in p
    assert "in this branch" in p and "started but not finished" in p


def test_branch_preamble():
    assert prompts.BRANCH_SUMMARY_PREAMBLE == (
        "The user explored a different conversation branch before returning here.\n"
        "Summary of that exploration:\n\n")


def test_split_turn_separator():
    assert prompts.SPLIT_TURN_SEPARATOR == "\n\n---\n\n**Turn Context (split turn):**\n\n"
    assert prompts.NO_PRIOR_HISTORY == "No prior history."


def test_with_focus():
    assert prompts.with_focus("P", "  look at x  ") == "P\n\nAdditional focus: look at x"
    assert prompts.with_focus("P", None) == "P"
    assert prompts.with_focus("P", "   ") == "P"


def test_request_text_layout_instructions_last():
    assert prompts.summary_request_text("CONV", "INSTR") == "<conversation>\nCONV\n</conversation>\n\nINSTR"
    assert prompts.summary_request_text("CONV", "INSTR", "PREV") == (
        "<conversation>\nCONV\n</conversation>\n\n<previous-summary>\nPREV\n</previous-summary>\n\nINSTR")
