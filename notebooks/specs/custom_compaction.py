"""The custom-compaction notebook: a cheaper summary model, a ``session_before_compact`` hook
that writes the summary itself, one that cancels automatic compactions, and ``%agent probe``. It
runs the tour's conversation in the tour's tiny window, so the same moments fill it."""

from __future__ import annotations

import json
from typing import Any

from ipyagent.testing import FakeProviderServer
from nbspec import Notebook, agent, code, md, provenance
from scripted import Scripted

from .how_compaction_works import OSLO_RAIN, READINGS_CODE
from .how_compaction_works import TURNS as TOUR_TURNS

# the tour's first seven turns (its eighth, the recall of Oslo's rain, is not asked here)
TURNS = {f"cc-a{n}": TOUR_TURNS[f"tour-a{n}"] for n in range(1, 8)}

HOOK_CODE = '''
from ipyagent.hooks import SessionBeforeCompactResult, SuppliedCompaction, hooks


def _text(content):
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def notes_summary(call):
    """No model at all: the previous summary, plus notes on the prompts and tool calls being compacted."""
    plan = call.preparation            # what the default compaction would do (a CompactionPlan)
    notes = []
    for message in plan.messages_to_summarize + plan.turn_prefix_messages:
        if message.get("role") == "user":
            notes.append(f"- User asked: {_text(message.get('content'))}")
        elif message.get("role") == "assistant":
            for block in message.get("content") or []:
                if block.get("type") == "toolCall":
                    code = " ".join(str(block["arguments"].get("code", block["arguments"])).split())
                    notes.append(f"- Ran {block['name']}: `{code[:80]}`")
    previous = plan.previous_summary or "(no earlier summary)"
    # Returning a compaction replaces the summariser; the plan's cut point and token count are kept.
    return SessionBeforeCompactResult(compaction=SuppliedCompaction(
        previous + "\\n\\n## Notes since then (written by a hook, no model)\\n" + "\\n".join(notes)))


hooks.on("session_before_compact", notes_summary)
print("session_before_compact hooks:", [h.__name__ for h in hooks.handlers["session_before_compact"]])
'''

CANCEL_CODE = '''
def no_automatic_compaction(call):
    """Cancel compactions the budget triggers; a manual %compact still goes ahead."""
    if call.reason == "threshold":
        print(f"hook: automatic compaction cancelled ({call.preparation.tokens_before:,} tokens)")
        return SessionBeforeCompactResult(cancel=True)


hooks.on("session_before_compact", no_automatic_compaction)
print("session_before_compact hooks:", [h.__name__ for h in hooks.handlers["session_before_compact"]])
'''

# %agent probe: one question of each kind, with the reference answer and what recall would search for
PROBE = [
    {"kind": "recall", "question": "Without day 3, how much rain did Oslo get per day on average?",
     "answer": f"{round(sum(OSLO_RAIN[:-1]) / 9, 1)} mm/day", "query": "without day 3"},
    {"kind": "artifact", "question": "Which kernel variable holds the readings without the Tromsø glitch?",
     "answer": "`clean`", "query": "clean readings"},
    {"kind": "continuation", "question": "What did the user want once each station's readings were listed?",
     "answer": "the coldest reading overall", "query": "coldest reading overall"},
    {"kind": "decision", "question": "Why was Oslo's 85 mm on day 3 kept rather than dropped?",
     "answer": "possible but extreme", "query": "possible but extreme"},
]


def _check(nb: dict[str, Any], policy: Scripted, server: FakeProviderServer) -> None:
    assert policy.summary_models and set(policy.summary_models) == {"scripted-mini"}, policy.summary_models
    session = nb["metadata"]["ipyagent"]["sessions"]["default"]
    compactions = [e for e in session["entries"] if e["type"] == "compaction"]
    assert [bool(c.get("fromHook")) for c in compactions] == [False, True, False], compactions
    text = json.dumps(nb)
    assert "automatic compaction cancelled" in text
    [probe] = [e for e in session["entries"] if e["type"] == "custom" and e["customType"] == "ipyagent.probe"]
    items = probe["data"]["items"]
    assert [i["kind"] for i in items] == ["recall", "artifact", "continuation", "decision"]
    assert all(a["score"] is not None for i in items for a in i["answers"].values()), items
    assert all(i["answers"]["recall"]["score"] == 5 for i in items), items


NOTEBOOK = Notebook("custom-compaction", [
    md("cc-intro", provenance("Custom compaction: hooks and a cheaper summary model", """
        Compaction calls a model to write the summary. That call does not need your best (and most
        expensive) model, and sometimes you want no model at all, or no compaction right now.
        This notebook shows three ways to take control:

        1. `Agent.summary_model` — route summaries to a cheaper model;
        2. a `session_before_compact` hook that writes the summary itself;
        3. a `session_before_compact` hook that cancels automatic compactions;

        and then `%agent probe`, which measures what a summary lost.

        It uses the same tiny 4,900-token window and conversation as `how-compaction-works.ipynb`,
        so compaction comes quickly. Its reserve (1,400) and kept tail (460) are chosen by hand for
        the lesson; left unset, ipyagent would derive them from the window (1,225 and 1,495 here).""")),
    code("cc-setup", """
        %load_ext ipyagent
        %config Agent.context_window = 4900
        %config Agent.reserve_tokens = 1400
        %config Agent.keep_recent_tokens = 460
        %config Agent.tool_approval = "auto"
        %config Agent.notebook_context = False  # no notebook-activity block: the window is tiny"""),
    code("cc-data", READINGS_CODE),
    md("cc-model-md", """
        ## 1. A cheaper model for summaries

        `Agent.summary_model` names the model that writes compaction summaries (default: the session
        model). Pick a cheap, fast model with a large window — e.g. `openai:gpt-4.1-mini` under an
        `openai:gpt-4.1` session. Here the recording was made with the scripted models
        `scripted-model` (session) and `scripted-mini` (summaries)."""),
    code("cc-model", """
        %config Agent.summary_model = "openai:scripted-mini"
        %agent model"""),
    agent("cc-a1", TURNS),
    agent("cc-a2", TURNS),
    agent("cc-a3", TURNS),
    agent("cc-a4", TURNS),
    md("cc-model-after", """
        The last run crossed the threshold and compacted; the summary request went to
        `scripted-mini`, not to the session model. The same can be set for every notebook in
        `ipython_config.py`: `c.Agent.summary_model = "openai:gpt-4.1-mini"`."""),
    code("cc-summary1", "%agent summary"),
    md("cc-hook-md", """
        ## 2. A hook that writes the summary itself

        Session hooks are plain Python functions registered on `ipyagent.hooks.hooks`. A
        `session_before_compact` handler is called with a `SessionBeforeCompactCall`: its
        `preparation` is the plan the default compaction would follow (`messages_to_summarize`,
        `turn_prefix_messages`, `previous_summary`, `first_kept_entry_id`, `tokens_before`,
        `is_split_turn`), its `reason` is `"threshold"`, `"overflow"` or `"manual"`, and its
        `custom_instructions` the `%compact` focus.

        Returning a `SessionBeforeCompactResult` with a `SuppliedCompaction` replaces the summariser
        (a Pi-style dict, `{"compaction": {"summary": …}}`, does the same). This one calls no model at
        all: it keeps the previous summary and appends notes on the prompts and tool calls being
        compacted (cheap and deterministic, but much less useful to the model than a real summary; a
        real hook might call your own summarisation service or a local model). The entry is marked
        `fromHook`. Two more prompts, then `%compact`:"""),
    code("cc-hook", HOOK_CODE),
    agent("cc-a5", TURNS),
    agent("cc-a6", TURNS),
    code("cc-compact-hook", "%compact"),
    code("cc-hook-summary", """
        %agent summary
        hooks.off("session_before_compact", notes_summary)   # back to the summary model"""),
    md("cc-cancel-md", """
        ## 3. A hook that cancels

        Returning `SessionBeforeCompactResult(cancel=True)` (or `{"cancel": True}`) stops the
        compaction; the session is unchanged. This handler
        cancels every compaction the budget triggers (`reason == "threshold"`) — say, while you are
        reviewing a long result and want it kept word for word — but lets a manual `%compact` through.
        The next run crosses the threshold several times; each time the hook says no:"""),
    code("cc-cancel", CANCEL_CODE),
    agent("cc-a7", TURNS),
    md("cc-cancel-after", """
        Without compaction the context is now above the threshold (see the widget). A manual
        compaction is allowed by this hook, and goes to the summary model again:"""),
    code("cc-compact-manual", "%compact"),
    code("cc-off", """
        hooks.off("session_before_compact", no_automatic_compaction)
        print([h.__name__ for h in hooks.handlers["session_before_compact"]] or "no session_before_compact hooks left")"""),
    md("cc-probe-md", """
        ## 4. How much did a summary lose? `%agent probe`

        A summary is a bet on what the rest of the work will need. `%agent probe` checks the bet on
        your own session, with your own providers. From the part of the session the latest
        compaction summarised away, the judge model (`--judge`; default: the session model) writes
        questions of four kinds, each with a reference answer: **recall** (a fact), **artifact**
        (files, variables, commands), **continuation** (what comes next) and **decision** (why).
        The session's model answers every question three ways: from the full history, from the
        compacted context, and from the compacted context with the `recall` tool. The judge grades
        each answer from 0 to 5.

        From a shell: `ipyagent probe NOTEBOOK --model M --judge M2`. With `--recompact
        --summary-model S --focus TEXT` (and the budget options) it probes a fresh compaction of the
        same history instead, so summary models, focus texts and settings can be compared on equal
        terms. Here, one question of each kind about the compaction the last `%compact` made:"""),
    code("cc-probe", "%agent probe --questions 1 --judge openai:scripted-judge"),
    md("cc-probe-after", """
        The full history is the ceiling; the compacted column is what the summary (with its file
        lists and artifact ledger) kept; the last column is what `recall` wins back. The second
        table is what each way cost in tokens, and what writing the questions and grading cost.
        *Questions and answers* lists every question, reference answer, answer and grade. The report,
        with every model response, is stored in the session as a `custom` entry (Pi keeps those out
        of the context), so this cell replays offline like the `%%agent` cells. The prompts are in
        `ipyagent/agent/probe_prompts.py`."""),
    md("cc-packages", """
        ## Shipping session hooks in a package

        Besides `hooks.on(...)` in a notebook, a package can provide session hooks to every session
        as an ipyagent plugin: an entry point of the `ipyagent` group whose module has a
        `register_hooks` plugin hook (the same plugin can add tools, providers and `%agent` commands;
        `docs/extending.md`). ipyagent loads it at `%load_ext`, and `%agent plugins` lists it:

        ```toml
        # pyproject.toml of your package
        [project.entry-points.ipyagent]
        my-compaction = "my_package.plugin"
        ```

        ```python
        # my_package/plugin.py
        import ipyagent

        @ipyagent.hookimpl
        def register_hooks(hooks):
            hooks.on("session_before_compact", my_handler)
        ```

        Other session hooks: `session_compact` (after a compaction), `session_before_tree` / `session_tree`
        (branch navigation), `context` (rewrite the messages of a request), `before_provider_request`,
        `turn_end`, `agent_end`. A handler that raises is reported as a warning and never breaks
        the session."""),
], TURNS, check=_check, probe=PROBE)
