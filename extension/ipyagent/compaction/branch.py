"""Branch summaries: what an abandoned branch did, carried to where the user went (Pi §7)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ipyagent.compaction import prompts
from ipyagent.compaction.file_ops import FileOps, format_file_lists
from ipyagent.compaction.serialize import serialize_conversation
from ipyagent.compaction.summarizer import Summarizer, SummaryRequest
from ipyagent.session.entries import Entry
from ipyagent.session.messages import Message, compaction_summary_message, entry_to_message

DEFAULT_BRANCH_RESERVE = 16384
NO_CONTENT = "No content to summarize"


@dataclass
class BranchSpan:
    common_ancestor_id: str | None
    entries: list[Entry]  # the abandoned entries, oldest first


def collect_branch_entries(old_path: Sequence[Entry], target_path: Sequence[Entry]) -> BranchSpan:
    """The entries from the old leaf back to (not including) the deepest shared ancestor."""
    target_ids = {e["id"] for e in target_path}
    ancestor_index = -1
    for i in range(len(old_path) - 1, -1, -1):
        if old_path[i]["id"] in target_ids:
            ancestor_index = i
            break
    ancestor = old_path[ancestor_index]["id"] if ancestor_index >= 0 else None
    return BranchSpan(ancestor, list(old_path[ancestor_index + 1:]))


def _branch_message(entry: Entry) -> Message | None:
    kind = entry.get("type")
    if kind == "message":
        message = entry["message"]
        return None if message.get("role") == "toolResult" else message  # calls are enough here
    if kind == "compaction":
        return compaction_summary_message(entry)
    if kind in ("custom_message", "branch_summary"):
        return entry_to_message(entry)
    return None


def prepare_branch_entries(entries: Sequence[Entry], budget_tokens: int,
                           estimate: Callable[[Message], int]) -> tuple[list[Message], FileOps]:
    """Newest first, keep messages while they fit the budget; summaries may overshoot a little."""
    file_ops = FileOps()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            file_ops.add_details(entry.get("details"))
    kept: list[Message] = []
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        tokens = estimate(message)
        if total + tokens > budget_tokens:
            if entry.get("type") in ("compaction", "branch_summary") and total < 0.9 * budget_tokens:
                kept.insert(0, message)
            break
        kept.insert(0, message)
        total += tokens
    file_ops.add_tool_calls(kept)
    return kept, file_ops


def generate_branch_summary(entries: Sequence[Entry], summarizer: Summarizer, *, context_window: int | None,
                            estimate: Callable[[Message], int], focus: str | None = None,
                            replace_instructions: bool = False,
                            reserve_tokens: int = DEFAULT_BRANCH_RESERVE) -> tuple[str, dict[str, list[str]]]:
    """(summary text with preamble and file lists, details)."""
    budget = (context_window or 128000) - reserve_tokens
    messages, file_ops = prepare_branch_entries(entries, budget, estimate)
    read_files, modified_files = file_ops.lists()
    details = {"readFiles": read_files, "modifiedFiles": modified_files}
    if not messages:
        return NO_CONTENT, details
    if replace_instructions and focus:
        instructions = focus
    else:
        instructions = prompts.with_focus(prompts.BRANCH_PROMPT, focus)
    response = summarizer.summarize(SummaryRequest(
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompts.summary_request_text(serialize_conversation(messages), instructions),
        kind="branch",
    ))
    summary = prompts.BRANCH_SUMMARY_PREAMBLE + response.text.strip() + format_file_lists(read_files, modified_files)
    return summary, details
