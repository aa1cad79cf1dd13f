"""Builders for Pi messages and sessions, shared by the tests of every folder (kept deliberately
small): ``user``, ``assistant``, ``call``, ``tool_result``, ``usage``, ``new_session``, ``turn``,
``chain``, ``ids_of``, and the recording ``Approver``.

    from support.builders import assistant, call, new_session, tool_result, user
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipyagent.core import Session
from ipyagent.hooks import HookRegistry

REPO = Path(__file__).resolve().parents[2]  # the repository, whichever folder of tests/ asks
_clock = itertools.count(1_767_225_600_000, 1000)


def ms() -> int:
    return next(_clock)


def user(text: Any = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ms()}


def usage(total: int = 0, *, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0) -> dict:
    return {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def call(call_id: str, name: str = "read", **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def assistant(text: str = "ok", *calls: dict, thinking: str | None = None, total: int = 0,
              stop: str | None = None, **extra: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking})
    if text:
        content.append({"type": "text", "text": text})
    content.extend(calls)
    return {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-sonnet-4-5", "usage": usage(total),
            "stopReason": stop or ("toolUse" if calls else "stop"), "timestamp": ms(), **extra}


def tool_result(call_id: str, text: str = "result", name: str = "read", is_error: bool = False) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name,
            "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": ms()}


def new_session(*messages: dict[str, Any], **kwargs: Any) -> Session:
    """A session with its own (empty) hook registry, holding ``messages`` as message entries."""
    kwargs.setdefault("hooks", HookRegistry())
    session = Session(**kwargs)
    for message in messages:
        session.append_message(message)
    return session


def turn(session: Session, prompt: str, *, size: int = 400, tools: int = 1, total: int = 0,
         path: str = "src/app.py", tool: str = "read") -> list[str]:
    """Append one agent turn (a prompt, ``tools`` tool round trips, a final answer); return the ids."""
    ids = [session.append_message(user(prompt))["id"]]
    for k in range(tools):
        cid = f"call_{len(session)}_{k}"
        ids.append(session.append_message(assistant("x" * size, call(cid, tool, path=path)))["id"])
        ids.append(session.append_message(tool_result(cid, "r" * size, name=tool))["id"])
    ids.append(session.append_message(assistant("done " + "y" * size, total=total))["id"])
    return ids


def ids_of(entries) -> list[str]:
    return [e["id"] for e in entries]


def chain(n: int, start: int = 0, parent: str | None = None, day: int = 1) -> list[dict]:
    """``n`` user-message entries, each the child of the one before."""
    out = []
    for i in range(start, start + n):
        entry = {"type": "message", "id": f"{i:08x}", "parentId": parent,
                 "timestamp": f"2026-01-{day:02d}T00:00:{i % 60:02d}.000Z",
                 "message": {"role": "user", "content": f"prompt {i}", "timestamp": i}}
        out.append(entry)
        parent = entry["id"]
    return out


@dataclass
class Approver:
    """A tool-approval callback that answers ``answer`` and records what it was asked."""

    answer: bool
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, arguments: dict[str, Any]) -> bool:
        self.asked.append((name, arguments))
        return self.answer
