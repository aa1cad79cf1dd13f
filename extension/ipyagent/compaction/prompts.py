"""The summariser's prompts: Pi's structure and section headings, in ipyagent's own words."""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are a context summarization assistant. You read a conversation between a user and an AI "
    "assistant and write a structured summary of it, following the exact format you are given.\n\n"
    "Do NOT continue the conversation. Do NOT answer questions asked in the conversation. "
    "ONLY output the structured summary."
)

_SECTIONS = """## Goal
[What the user is trying to accomplish. List several goals if the session covered several tasks.]

## Constraints & Preferences
- [Requirements, constraints or preferences the user stated, or "(none)"]

## Progress
### Done
- [x] [Completed tasks and changes]

### In Progress
- [ ] [Work under way]

### Blocked
- [Problems preventing progress, if any]

## Key Decisions
- **[Decision]**: [Short rationale]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, examples, references or results needed to continue, or "(none)"]"""

_CLOSING = "Keep every section brief. Keep file paths, function names, commands and error messages exactly as written."

INITIAL_PROMPT = f"""The messages above are a conversation to summarize. Write a structured context checkpoint that another LLM will use to continue the work.

Use this EXACT format:

{_SECTIONS}

{_CLOSING}"""

UPDATE_PROMPT = f"""The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with the new information. RULES:
- PRESERVE all information from the previous summary that still matters
- ADD the new progress, decisions and context
- UPDATE Progress: move items from "In Progress" to "Done" once they are completed
- UPDATE "Next Steps" to reflect what was accomplished
- PRESERVE exact file paths, function names and error messages
- You may drop items that are clearly no longer relevant

Use this EXACT format (keep the existing goals and add new ones; Done lists earlier and newly completed items; drop resolved blockers; keep all earlier decisions and add new ones):

{_SECTIONS}

{_CLOSING}"""

TURN_PREFIX_PROMPT = """The messages above are the earlier part of a conversation that is still going on. The later messages are kept separately; do not try to reconstruct them.

Write a short checkpoint of what the user asked for and of the progress shown above. It will sit in front of the later messages so that the conversation can go on with the context it needs.

## Original Request
[What the user asked for]

## Progress So Far
- [Decisions taken and work done in these messages]

## Context Needed to Continue
- [What from these messages is needed to understand the later work]

Summarize only what is stated above. Do not guess at or invent the later messages."""

BRANCH_PROMPT = f"""Write a structured summary of this conversation branch, for context when returning to it later.

Use this EXACT format:

## Goal
[What the user was trying to accomplish in this branch]

## Constraints & Preferences
- [Requirements or preferences stated, or "(none)"]

## Progress
### Done
- [x] [Completed work]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Problems, if any]

## Key Decisions
- **[Decision]**: [Short rationale]

## Next Steps
1. [What should happen next to continue this work]

{_CLOSING}"""

BRANCH_SUMMARY_PREAMBLE = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"

SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"

NO_PRIOR_HISTORY = "No prior history."


def with_focus(prompt: str, focus: str | None) -> str:
    focus = (focus or "").strip()
    return f"{prompt}\n\nAdditional focus: {focus}" if focus else prompt


def turn_prefix_request_text(conversation: str, instructions: str) -> str:
    """The turn prefix's request (Pi 1.6's layout): the conversation under a heading, then the
    instructions (with any focus last)."""
    return f"# Conversation\n{conversation}\n\n# Instructions\n{instructions}"


def summary_request_text(conversation: str, instructions: str, previous_summary: str | None = None) -> str:
    """Conversation first, then the previous summary, then the instructions (last, as Pi does)."""
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary is not None:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return text + instructions
