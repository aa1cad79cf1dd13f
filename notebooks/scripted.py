"""What the "model" says while ``build.py`` executes a teaching notebook: each ``%%agent`` cell's
scripted :class:`Turn`, and :class:`Scripted`, the fake provider's policy that answers chat
requests from those turns and writes six-section summaries for summariser requests out of what
the summarised turns say a summary should remember."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ipyagent.agent.probe.probe_prompts import probe_request_kind
from ipyagent.compaction.ledger import split_appendix
from ipyagent.testing import ProbeScript, Reply, ToolCallSpec
from ipyagent.testing.accounting import default_summary_detector

# a tool call's arguments: fixed, or read off the request's messages (e.g. an entry id in a summary)
Arguments = dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]]


@dataclass
class Step:
    """One reply of the model: its text and the tool calls it makes."""

    text: str = ""
    calls: list[tuple[str, Arguments]] = field(default_factory=list)


@dataclass
class Turn:
    """The model's side of one ``%%agent`` cell: ``steps`` in order (each a reply; the last has no
    calls), and what a summariser should remember about the turn (goal, done, decisions…)."""

    prompt: str
    steps: list[Step]
    goal: str = ""
    done: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # kept only when a focus asks for them
    constraints: list[str] = field(default_factory=list)
    next: list[str] = field(default_factory=list)
    match: str = ""  # for a prompt with {…} interpolations: a part of the filled-in text that identifies it
    key: str = field(init=False, default="")  # the head of the prompt: names the turn's tool calls

    def __post_init__(self) -> None:
        self.prompt = textwrap.dedent(self.prompt).strip()
        self.key = re.sub(r"[^a-z0-9]+", "_", self.prompt.lower())[:24].strip("_")

    def answers(self, text: str) -> bool:
        """Whether a user message's text is this turn's prompt (after the notebook-activity block
        that may come before it, or with its interpolations filled in)."""
        if self.match:
            return self.match in text and "[ipyagent filled in" in text
        return text == self.prompt or text.endswith("\n" + self.prompt)


SECTIONS = ["Goal", "Constraints & Preferences", "Done", "In Progress", "Blocked", "Key Decisions", "Next Steps",
            "Critical Context"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _parse_summary(text: str) -> dict[str, list[str]]:
    """Bullets of each section of a six-section summary (used to update a previous summary)."""
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    text = split_appendix(text)[0].split("\n\n---\n\n**Turn Context")[0]  # without file lists and ledger
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#{2,3} (.+)$", line.strip())
        if heading:
            current = heading.group(1).strip()
            if current == "Progress":
                current = None
            continue
        if current in sections and line.strip() and not line.startswith("<"):
            item = re.sub(r"^(- \[[ x]\] |- |\d+\. )", "", line.strip())
            if item and item not in ("(none)",):
                sections[current].append(item)
    return sections


class Scripted:
    """The fake provider's policy: answers chat requests from the notebook's turns (cell id →
    turn, in cell order) and writes summaries for summariser requests."""

    def __init__(self, turns: dict[str, Turn], probe: list[dict[str, Any]] | None = None):
        self.turns = turns
        self.probe = ProbeScript(probe) if probe else None  # %agent probe: questions, answers, grades
        self.by_call_id: dict[str, tuple[str, int]] = {}  # tool-call id → (cell id, step)
        self.summary_models: list[str] = []
        self.summary_kinds: list[str] = []
        self.unanswered: list[str] = []

    # -- chat --

    def _turn_of(self, messages: list[dict[str, Any]]) -> str | None:
        """The cell whose turn is being answered: the latest user message that is a scripted prompt,
        or, when the prompt itself was compacted away (split turn), the latest prompt quoted in the
        summary."""
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            text = _text_of(message.get("content")).strip()
            for cell_id, turn in self.turns.items():
                if turn.answers(text):
                    return cell_id
            if "<summary>" in text:
                found = [cell_id for cell_id, turn in self.turns.items() if turn.prompt[:60] in text]
                if found:
                    return found[-1]
        return None

    def chat(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        cell_id = self._turn_of(messages)
        if cell_id is None:
            self.unanswered.append(json.dumps(messages[-1])[:200] if messages else "(no messages)")
            return Reply(text="(The build script has no scripted answer for this prompt.)")
        turn = self.turns[cell_id]
        step = 0
        for message in messages:  # how far the turn got: the latest of its scripted calls seen
            for call in message.get("tool_calls") or []:
                where = self.by_call_id.get(call.get("id"))
                if where and where[0] == cell_id:
                    step = max(step, where[1] + 1)
        step = min(step, len(turn.steps) - 1)
        spec = turn.steps[step]
        calls = []
        for j, (name, arguments) in enumerate(spec.calls):
            if callable(arguments):  # arguments the "model" reads off its context (e.g. an entry id)
                arguments = arguments(messages)
            call_id = f"call_{turn.key}_{step}_{j}"[:40]
            self.by_call_id[call_id] = (cell_id, step)
            calls.append(ToolCallSpec(name, arguments, call_id))
        return Reply(text=spec.text, tool_calls=calls, chunk_size=24)

    # -- summaries --

    def _turns_in(self, text: str) -> list[Turn]:
        return [t for t in self.turns.values() if t.prompt[:60] in text]

    def summary(self, body: dict[str, Any]) -> Reply:
        self.summary_models.append(str(body.get("model")))
        prompt = _text_of((body.get("messages") or [{}])[-1].get("content"))
        prefix = prompt.startswith("# Conversation\n")  # a turn prefix: Pi 1.6's layout
        conversation = prompt.split("\n\n# Instructions\n")[0] if prefix else prompt.split("</conversation>")[0]
        previous = None
        if "<previous-summary>" in prompt:
            previous = prompt.split("<previous-summary>", 1)[1].split("</previous-summary>", 1)[0]
        focus = ""
        if "Additional focus:" in prompt:
            focus = prompt.split("Additional focus:", 1)[1].strip()
        turns = self._turns_in(conversation)
        if prefix:
            self.summary_kinds.append("turn_prefix")
            return Reply(text=self._turn_prefix(conversation, turns))
        self.summary_kinds.append("update" if previous else "initial")
        return Reply(text=self._six_sections(turns, previous, focus))

    @staticmethod
    def _turn_prefix(conversation: str, turns: list[Turn]) -> str:
        turn = turns[-1] if turns else None
        calls = re.findall(r"\[Assistant tool calls\]: (.+)", conversation)
        early = [f"- Ran `{c[:90]}{'…' if len(c) > 90 else ''}`" for c in calls] or ["- (no tool calls yet)"]
        suffix = [f"- {c}" for c in (turn.context if turn else [])] or ["- (none)"]
        return "\n".join(["## Original Request", turn.prompt if turn else "(unknown)", "",
                          "## Progress So Far", *early, "", "## Context Needed to Continue", *suffix])

    @staticmethod
    def _six_sections(turns: list[Turn], previous: str | None, focus: str) -> str:
        old = _parse_summary(previous) if previous else {name: [] for name in SECTIONS}
        words = re.findall(r"[a-zA-Zø]{5,}", focus.lower())

        def merged(section: str, new: list[str]) -> list[str]:
            out = list(old[section])
            out += [item for item in new if item not in out]
            return out

        def focused(items: list[str]) -> list[str]:
            hits = [i for i in items if any(w in i.lower() for w in words)]
            return hits + [i for i in items if i not in hits]

        goals = merged("Goal", [t.goal for t in turns if t.goal])
        constraints = merged("Constraints & Preferences", [c for t in turns for c in t.constraints])
        done = merged("Done", [d for t in turns for d in t.done])
        decisions = merged("Key Decisions", [d for t in turns for d in t.decisions])
        context = merged("Critical Context", [c for t in turns for c in t.context])
        if words:
            context += [d for t in turns for d in t.details if any(w in d.lower() for w in words) and d not in context]
        nxt = next((t.next for t in reversed(turns) if t.next), None) or old["Next Steps"] or [
            "Wait for the user's next request."]
        lines = ["## Goal", *(f"- {g}" for g in goals), "",
                 "## Constraints & Preferences", *(f"- {c}" for c in constraints or ["(none)"]), "",
                 "## Progress", "### Done", *(f"- [x] {d}" for d in done), "",
                 "### In Progress", "- [ ] (none)", "",
                 "### Blocked", "- (none)", "",
                 "## Key Decisions", *(f"- {d}" for d in focused(decisions) or ["(none)"]), "",
                 "## Next Steps", *(f"{i}. {s}" for i, s in enumerate(nxt, 1)), "",
                 "## Critical Context", *(f"- {c}" for c in focused(context) or ["(none)"])]
        return "\n".join(lines)

    # -- the policy --

    def __call__(self, body: dict[str, Any]) -> Reply | str | None:
        if self.probe is not None and probe_request_kind(body):
            return self.probe(body)
        if default_summary_detector(body):
            return self.summary(body)
        return self.chat(body)
