"""A scripted model for ``ipyagent probe`` on the fake provider: question writer, answerer, judge.

    script = ProbeScript([{"kind": "recall", "question": "Which port did the server use?",
                           "answer": "8042"}, …])
    with FakeProviderServer(policy=script) as server:
        …   # ipyagent probe NB --model openai:fake … with OPENAI_BASE_URL=server.openai_base_url

It answers the probe's requests (recognised by :func:`probe_request_kind`, either wire protocol)
and passes every other request to ``fallback`` (another policy, or None for the server's own
behaviour). By default the answerer behaves like a careful model: it answers with the reference
answer when its context holds it, calls ``recall`` when it can and has not yet, answers from
what ``recall`` returned, and otherwise says it does not know. The judge gives 5 when the
reference answer is in the candidate answer, 0 for "I do not know", else 1. ``answer`` and
``grade`` replace either behaviour; ``seen`` keeps what each role was asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipyagent.agent.probe.probe_prompts import probe_request_kind
from ipyagent.testing.specs import Reply, ToolCallSpec

QUESTION_PREFIX = "Probe question about this session: "


@dataclass
class AnswerRequest:
    question: str
    context: str  # every text before the question (summary, messages, tool calls and results)
    can_recall: bool  # the recall tool was offered
    recalled: list[str]  # what recall (or another tool) returned after the question
    reference: str | None  # the scripted reference answer of this question, when known
    query: str | None  # the scripted recall query of this question, when given


def _texts(value: Any) -> list[str]:
    """Every string under ``text``/``content``/``arguments`` keys of a wire message, in order."""
    out: list[str] = []
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            out += _texts(item)
    elif isinstance(value, dict):
        for key in ("text", "content", "input", "arguments", "function", "tool_calls"):
            if key in value:
                inner = value[key]
                out += [json.dumps(inner)] if key == "input" else _texts(inner)
    return out


def _is_tool_output(message: dict[str, Any]) -> bool:
    if message.get("role") == "tool":
        return True
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


class ProbeScript:
    def __init__(self, questions: list[dict[str, Any]], *,
                 answer: Callable[[AnswerRequest], Reply | str] | None = None,
                 grade: Callable[[str, str, str], int | tuple[int, str]] | None = None,
                 fallback: Callable[[dict[str, Any]], Any] | None = None):
        self.questions = questions
        self.answer = answer or self.careful_answer
        self.grade = grade or self.default_grade
        self.fallback = fallback
        self.seen: dict[str, list[Any]] = {"questions": [], "answer": [], "judge": []}
        self._references = {q["question"]: q for q in questions}

    def __call__(self, body: dict[str, Any]) -> Reply | str | None:
        kind = probe_request_kind(body)
        if kind is None:
            return self.fallback(body) if self.fallback is not None else None
        if kind == "questions":
            self.seen["questions"].append(" ".join(_texts(body.get("messages"))))
            return Reply(text=json.dumps([{k: q[k] for k in ("kind", "question", "answer")} for q in self.questions]))
        if kind == "judge":
            text = " ".join(_texts(body.get("messages")))
            question = text.split("<question>\n", 1)[1].split("\n</question>", 1)[0]
            reference = text.split("<reference-answer>\n", 1)[1].split("\n</reference-answer>", 1)[0]
            candidate = text.split("<candidate-answer>\n", 1)[1].split("\n</candidate-answer>", 1)[0]
            self.seen["judge"].append((question, reference, candidate))
            result = self.grade(question, reference, candidate)
            score, reason = result if isinstance(result, tuple) else (result, "scripted grade")
            return Reply(text=json.dumps({"score": score, "reason": reason}))
        request = self._answer_request(body)
        self.seen["answer"].append(request)
        return self.answer(request)

    def _answer_request(self, body: dict[str, Any]) -> AnswerRequest:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") != "system"]
        at = max(i for i, m in enumerate(messages)
                 if m.get("role") == "user" and any(t.startswith(QUESTION_PREFIX) for t in _texts(m.get("content"))))
        question = next(t for t in _texts(messages[at].get("content")) if t.startswith(QUESTION_PREFIX))
        question = question[len(QUESTION_PREFIX):]
        tools = [t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or []]
        recalled = [" ".join(_texts(m.get("content"))) for m in messages[at + 1:] if _is_tool_output(m)]
        scripted = self._references.get(question) or {}
        return AnswerRequest(question, "\n".join(t for m in messages[:at] for t in _texts(m)), "recall" in tools,
                             recalled, scripted.get("answer"), scripted.get("query"))

    @staticmethod
    def careful_answer(request: AnswerRequest) -> Reply:
        reference = request.reference or ""
        if reference and reference.lower() in request.context.lower():
            return Reply(text=f"It was {reference}.")
        if request.recalled:
            found = reference and any(reference.lower() in r.lower() for r in request.recalled)
            return Reply(text=f"It was {reference}." if found else "I do not know.")
        if request.can_recall:
            return Reply(tool_calls=[ToolCallSpec("recall", {"query": request.query or reference})])
        return Reply(text="I do not know.")

    @staticmethod
    def default_grade(question: str, reference: str, answer: str) -> tuple[int, str]:
        if reference.lower() in answer.lower():
            return 5, "matches the reference"
        if "do not know" in answer.lower():
            return 0, "no answer"
        return 1, "does not match the reference"
