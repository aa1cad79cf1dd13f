"""Every prompt of ``ipyagent probe``, in one place, with the parsers for what comes back.

A probe measures what a compaction lost. Three kinds of model call, each with its own system
prompt (its first words identify it, see :func:`probe_request_kind`):

1. **Questions** (the judge model): reads the summarised-away part of the session as a transcript
   inside ``<session-history>`` tags and writes questions of four kinds, each with a reference
   answer taken from the transcript, as a JSON list.
2. **Answers** (the session's model), three ways per question: after the full history, after the
   compacted context, and after the compacted context with the ``recall`` tool. The question is
   the last user message; the session's other tools are offered (a request with tool calls in
   its history needs them) but not run.
3. **Grades** (the judge model): the question, the reference answer and one candidate answer; a
   score from 0 to 5 and a reason, as JSON. Each answer is graded on its own, without knowing
   which way produced it.

The four kinds follow Factory's evaluation of context compression (Dec 2025): recall (a fact),
artifact (files, variables, commands: what exists or changed), continuation (what comes next),
decision (why something was chosen).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

KINDS = ("recall", "artifact", "continuation", "decision")

KIND_GUIDE = {
    "recall": "a specific fact stated or observed in the session: a number, a name, an exact message or value",
    "artifact": "what the work created or changed: files read or modified, kernel variables (name, type, "
                "shape), commands run, errors met",
    "continuation": "what was planned next or left unfinished, so the work could go on without asking",
    "decision": "why something was chosen, rejected or ruled out, and on what evidence",
}

QUESTIONS_SYSTEM = (
    "You write probe questions that test whether a summary of an AI coding session kept what "
    "matters. You read the part of the session that was summarised and ask about details a "
    "later step would need. Every question must be answerable from the transcript alone, with "
    "one short, checkable answer. Reply with JSON only."
)

ANSWER_SYSTEM = (
    "You answer a probe question about the coding session in this conversation. Answer from what "
    "the conversation shows: be specific and exact (names, numbers, paths, messages), in one to "
    "three sentences. If the conversation does not tell you, say you do not know; do not guess. "
    "The other tools are not available during the probe."
)

ANSWER_SYSTEM_RECALL = ANSWER_SYSTEM + (
    " The `recall` tool is available: it searches the earlier part of the session that was "
    "summarised away, word for word. Use it when the summary is not specific enough."
)

JUDGE_SYSTEM = (
    "You grade answers to probe questions about a coding session. You get the question, the "
    "reference answer taken from the session, and a candidate answer. Grade only against the "
    "reference: 5 = fully correct and specific; 4 = correct, a minor detail missing; 3 = partly "
    "correct; 2 = vague or mostly missing; 1 = wrong; 0 = no answer or says it does not know. "
    'Reply with JSON only: {"score": <0-5>, "reason": "<one sentence>"}.'
)

NOT_AVAILABLE = "Not available during a probe: answer from what the conversation shows."

_MARKERS = {
    "questions": "You write probe questions",
    "answer": "You answer a probe question",
    "judge": "You grade answers to probe questions",
}


def questions_prompt(history: str, per_kind: int) -> str:
    guide = "\n".join(f"- {kind}: {KIND_GUIDE[kind]}" for kind in KINDS)
    return (f"<session-history>\n{history}\n</session-history>\n\n"
            f"Write {per_kind} question(s) of each of these kinds about the session history above:\n{guide}\n\n"
            "Prefer details a summary tends to drop. Reply with a JSON list only, one object per question: "
            '[{"kind": "recall", "question": "…", "answer": "…"}, …]')


def answer_prompt(question: str) -> str:
    return f"Probe question about this session: {question}"


def judge_prompt(question: str, reference: str, answer: str) -> str:
    return (f"<question>\n{question}\n</question>\n\n<reference-answer>\n{reference}\n</reference-answer>\n\n"
            f"<candidate-answer>\n{answer}\n</candidate-answer>\n\nGrade the candidate answer.")


def probe_request_kind(body: dict[str, Any]) -> str | None:
    """"questions", "answer" or "judge" for a probe request's wire body (OpenAI Chat or Anthropic
    Messages), None for any other request. For scripting a fake provider."""
    system = body.get("system")
    if isinstance(system, list):
        system = " ".join(b.get("text", "") for b in system if isinstance(b, dict))
    messages = body.get("messages") or []
    if not system and messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        system = messages[0].get("content")
    if not isinstance(system, str):
        return None
    for kind, marker in _MARKERS.items():
        if system.startswith(marker):
            return kind
    return None


# ---- reading the replies -----------------------------------------------------------------------


@dataclass
class Question:
    kind: str
    question: str
    reference: str


def _json_in(text: str, opener: str) -> Any:
    """The first JSON value that starts with ``opener`` in ``text`` (code fences and prose around it allowed)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(re.escape(opener), text):
        try:
            value, _ = decoder.raw_decode(text[match.start():])
        except ValueError:
            continue
        return value
    return None


def parse_questions(text: str, per_kind: int) -> list[Question]:
    """The questions in a reply: known kinds only, at most ``per_kind`` each, in the order given."""
    value = _json_in(text, "[")
    if isinstance(value, dict):
        value = value.get("questions")
    out: list[Question] = []
    counts = {kind: 0 for kind in KINDS}
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("kind", "")).strip().lower()
        question, answer = item.get("question"), item.get("answer")
        if kind in counts and isinstance(question, str) and question.strip() and isinstance(answer, (str, int, float)) \
                and counts[kind] < per_kind:
            counts[kind] += 1
            out.append(Question(kind, question.strip()[:2000], str(answer).strip()[:2000]))
    return out


def parse_grade(text: str) -> tuple[int | None, str]:
    """(score 0–5 or None when the reply holds none, reason)."""
    value = _json_in(text, "{")
    if isinstance(value, dict) and isinstance(value.get("score"), (int, float)) and not isinstance(value.get("score"), bool):
        return max(0, min(5, round(value["score"]))), str(value.get("reason") or "").strip()[:500]
    match = re.search(r"score\W{0,3}([0-5])\b", text, re.IGNORECASE)
    if match:
        return int(match.group(1)), text.strip()[:500]
    return None, text.strip()[:500]
