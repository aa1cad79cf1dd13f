"""Shared test helpers: tiny builders for Pi messages and sessions (kept deliberately small), the
fixtures several modules use (``server``, ``ip``, ``fresh_windows``, ``registry``), and the
markers' hooks (support/markers.py).

``tests/`` is on ``sys.path`` (pytest's rootdir conftest), so ``from support.sessiongen import …``
and ``from conftest import …`` work in every test module, whichever folder of tests/ it is in.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer

# the markers' hooks (folder markers, the check that only tests marked `kernel` start kernels)
from support.markers import pytest_collection_modifyitems, pytest_runtest_makereport, pytest_runtest_protocol  # noqa: F401
from support.shell import extension_shell

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (some shells set it): pytest keeps
# its rewritten test modules, and the kernels and commands the tests start keep ipyagent compiled,
# instead of rewriting and compiling them again in every process of every run (about 10 CPU
# seconds of each worker's collection). __pycache__ is ignored by git.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

REPO = Path(__file__).resolve().parents[1]  # the repository, whichever folder of tests/ asks
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


@pytest.fixture
def fresh_windows():
    """No window known from an earlier test: the server discovery cache and the learned or
    overridden windows are emptied before and after."""
    from ipyagent.providers import models
    from ipyagent.providers import window_discovery as discovery

    discovery.clear()
    models.clear_overrides()
    yield
    discovery.clear()
    models.clear_overrides()


@pytest.fixture
def registry() -> HookRegistry:
    return HookRegistry()


@pytest.fixture
def server(monkeypatch):
    """The fake provider, with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` pointing at it (modules
    that talk to it another way define their own ``server``)."""
    with FakeProviderServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        yield srv


@pytest.fixture
def ip(monkeypatch, tmp_path):
    """The in-process shell with the extension loaded (support/shell.py), in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with extension_shell() as (shell, runtime):
        yield shell
    assert runtime is not None


@dataclass
class Approver:
    """A tool-approval callback that answers ``answer`` and records what it was asked."""

    answer: bool
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, arguments: dict[str, Any]) -> bool:
        self.asked.append((name, arguments))
        return self.answer
