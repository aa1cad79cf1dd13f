"""Deterministic generator of realistic Pi v3 session files.

``generate_session(seed, n_entries, **options)`` returns ``(header, entries)``: the session header
and exactly ``n_entries`` entries in file order, the way Pi's SessionManager appends them — each
entry a child of the current leaf, so the leaf (Pi takes the last entry of the file) decides the
path. Sessions hold user prompts, assistant messages with text / thinking / toolCall blocks and
provider-like ``usage``, tool results (some of several KB), errors and aborts with zero usage,
``!cmd`` bash executions, extension ``custom`` / ``custom_message`` entries, model and thinking
level changes, labels, session names, branches (the leaf moved back, with or without a
``branch_summary``), and compaction entries (Pi-generated with ``details`` or ``fromHook``), some
after an overflow error mid-turn.

Same seed and options, same session, on any machine: only ``random.Random(seed)`` is used, and
the timestamps start from a fixed date. 16,000 entries take a fraction of a second.

``write_jsonl(path, header, entries)`` writes the file the way Pi does (``JSON.stringify`` per
line: compact separators, non-ASCII kept as is, ``\\n`` after each line).
"""

from __future__ import annotations

import gc
import json
import random
import re
import time
from pathlib import Path
from typing import Any

__all__ = ["DEFAULTS", "generate_session", "write_jsonl", "to_jsonl", "path_to_leaf"]

# Probabilities and knobs; every one can be overridden as a keyword of generate_session.
DEFAULTS: dict[str, Any] = {
    "p_settings": 0.15,          # per turn: model/thinking-level changes etc. before the prompt
    "p_meta_midturn": 0.02,      # per step: a label/custom entry in the middle of a turn
    "p_branch": 0.03,            # per turn: move the leaf back to an earlier prompt
    "p_branch_summary": 0.5,     # ... and append a branch_summary there
    "p_compaction": 0.03,        # per turn: a compaction entry between turns
    "p_compaction_midturn": 0.004,  # per step: a compaction inside a tool loop
    "p_overflow": 0.01,          # per step: an overflow error, then a compaction, then the turn goes on
    "p_from_hook": 0.15,         # a compaction supplied by an extension (fromHook)
    "p_error": 0.02,             # per step: a provider error ends the turn (zero usage)
    "p_aborted": 0.02,           # per step: the user aborts (zero usage, partial content)
    "p_bash_execution": 0.04,    # per turn: the turn starts with a user !cmd
    "p_custom_message": 0.04,    # per turn: the turn starts with an extension's custom_message
    "p_user_blocks": 0.3,        # user content as a list of blocks instead of a string
    "p_image": 0.02,             # an image block in a user message or a tool result
    "p_unicode": 0.1,            # text drawn from a corpus with non-ASCII and astral characters
    "p_zero_total": 0.05,        # usage.totalTokens = 0 (the sum of the parts is used)
    "p_zero_usage": 0.0,         # a successful assistant message whose usage is all zeros
    "p_float_args": 0.0,         # integer-valued floats in tool arguments (1.0 is "1" in JS)
    "p_odd": 0.01,               # odd but legal: firstKeptEntryId off the path, empty branch summary
    "p_lone_surrogate": 0.0,     # a grep result line cut at 500 UTF-16 units in the middle of an emoji,
                                 # as Pi's truncateLine does (a lone high surrogate in the text)
    # Pi 1.6's entries (all off by default, so the sessions above stay what they were)
    "p_system": 0.0,             # a full system message first; per turn: a section / tool patch
    "p_checkpoint": 0.0,         # a compaction records the replayed system message (systemMessage)
    "p_retain_none": 0.0,        # a compaction that keeps nothing (firstKeptEntryId = its own id)
    "p_context_edit": 0.0,       # per turn: hide (replacement null) or replace an earlier entry
    "p_recovery": 0.0,           # per step: an attempt Pi abandoned — the assistant and its results
                                 # hidden by context edits right after them
    "p_usage_entry": 0.0,        # per step: a `usage` entry (cache warming)
    "p_custom_role": 0.0,        # per turn: the turn starts with a role "custom" message
    "p_nested": 0.0,             # a tool result with codemode nestedCalls (and its own usage)
    "max_steps": 12,             # assistant steps per turn at most
    "size_scale": 1.0,           # multiplies every text size
    "big_results": 0.08,         # share of tool results that are large (8–50 KB)
    "end": None,                 # the last entry's kind: None (wherever the count stops), "compaction",
                                 # "settings", "user", "assistant", "toolResult", "turn_end",
                                 # "branch_summary", "custom_message", "label", "bash"
    "start_ms": 1_767_225_600_000,  # 2026-01-01T00:00:00Z
    "cwd": "/home/user/project",
}

_PATHS = [
    "src/app.py", "src/models.py", "src/utils/io.py", "src/utils/text.py", "README.md",
    "pyproject.toml", "tests/test_app.py", "tests/test_models.py", "docs/index.md",
    "package.json", "src/index.ts", "src/server/routes.ts", "src/server/db.ts", "Makefile",
    "/etc/hosts", "/home/user/project/setup.cfg", "./scripts/build.sh", "notebooks/tour.ipynb",
    "src/components/Button.tsx", "src/components/Card.tsx", "lib/parser.rs", "lib/lexer.rs",
    "config/settings.yaml", "data/sample.csv", "src/über/straße.py", "docs/日本語.md",
    "src/emoji_😀.txt", "CHANGELOG.md", ".github/workflows/ci.yml", "src/cli.py",
    "notes/😀.md", "notes/ｆｕｌｌ.md", "notes/plain.md",  # UTF-16 order differs from code point order here
]
_TOOLS = ["read", "read", "read", "bash", "bash", "edit", "edit", "write", "grep", "find", "ls"]
_MODELS = [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4.1-mini"), ("anthropic", "claude-opus-4-1"),
           ("google", "gemini-2.5-pro"), ("openai", "qwen2.5-coder")]
_APIS = {"anthropic": "anthropic-messages", "openai": "openai-completions", "google": "google-generative-ai"}
_LEVELS = ["off", "minimal", "low", "medium", "high"]
_ERRORS = ["429 Too Many Requests: rate limit exceeded", "prompt is too long: 213462 tokens > 200000 maximum",
           "Overloaded", "fetch failed", "500 Internal server error"]

_WORDS = ("the a function class return value import from def self data file path test error result "
          "list dict string int None True False config parse token context window summary session "
          "entry message user assistant tool call read write edit bash grep find compact cut point "
          "kept history turn split prefix model usage cache input output if else for while try except "
          "raise async await yield lambda with as print len range open json yaml http request").split()
_UNICODE_WORDS = ["é", "naïve", "straße", "→", "✓", "日本語", "中文", "Ωmega", "😀", "🚀", "𝔘𝔫𝔦", "👩‍💻", "—", "…"]


def _build_corpus(unicode: bool) -> str:
    rng = random.Random(12345 if unicode else 54321)
    words = _WORDS + (_UNICODE_WORDS * 3 if unicode else [])
    out: list[str] = []
    line: list[str] = []
    for _ in range(40_000):
        line.append(rng.choice(words))
        if rng.random() < 0.12:
            indent = " " * (4 * rng.randrange(4))
            out.append(indent + " ".join(line))
            line = []
    out.append(" ".join(line))
    text = "\n".join(out)
    return text + "\n" + text  # doubled so that any slice of up to half its length fits


_CORPUS = {False: _build_corpus(False), True: _build_corpus(True)}
_HALF = {k: len(v) // 2 for k, v in _CORPUS.items()}


_day_cache: dict[int, str] = {}


def _iso(ms: int) -> str:
    """JavaScript's Date.toISOString for a time in ms."""
    sec = ms // 1000
    day, rem = divmod(sec, 86400)
    prefix = _day_cache.get(day)
    if prefix is None:
        t = time.gmtime(day * 86400)
        prefix = _day_cache[day] = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
    h, rem = divmod(rem, 3600)
    return f"{prefix}{h:02d}:{rem // 60:02d}:{rem % 60:02d}.{ms % 1000:03d}Z"


class _Gen:
    def __init__(self, seed: int, n_entries: int, opts: dict[str, Any]):
        self.rng = random.Random(seed)
        self.n = n_entries
        self.o = opts
        self.entries: list[dict[str, Any]] = []
        self.ids: set[str] = set()
        self.path: list[dict[str, Any]] = []      # root -> leaf
        self.tok: list[int] = []                  # rough token size per path entry
        self.leaf: str | None = None
        self.ms = int(opts["start_ms"])
        self.ctx = 0                              # rough context tokens, for usage numbers
        self.model = self.rng.choice(_MODELS)
        self.boundary = 0                         # path index where the last compaction's kept part starts
        self.call_n = 0
        self.rnd = self.rng.random                # hot paths: bound once
        self.scale = float(opts["size_scale"])
        self.p_unicode = float(opts["p_unicode"])
        self.system: list[dict[str, Any]] = []    # system messages on the path (for checkpoints)

    # ---- small helpers --------------------------------------------------------------------------
    def chance(self, key: str) -> bool:
        p = self.o[key]
        return p > 0 and self.rnd() < p

    def new_id(self) -> str:
        while True:
            i = f"{self.rng.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def randint(self, lo: int, hi: int) -> int:
        return lo + int(self.rnd() * (hi - lo + 1))

    def iso(self) -> str:
        return _iso(self.ms)

    def text(self, lo: int, hi: int) -> str:
        rnd = self.rnd
        n = int((lo + int(rnd() * (hi - lo + 1))) * self.scale)
        if n <= 0:
            return ""
        uni = self.p_unicode > 0 and rnd() < self.p_unicode
        half = _HALF[uni]
        if n > half:
            n = half
        start = int(rnd() * half)
        return _CORPUS[uni][start:start + n]

    def full(self) -> bool:
        return len(self.entries) >= self.n

    def append(self, entry: dict[str, Any], tokens: int = 0) -> dict[str, Any]:
        self.ms += 50 + int(self.rnd() * 4951)
        e = {"type": entry.pop("type"), "id": self.new_id(), "parentId": self.leaf, "timestamp": _iso(self.ms)}
        e.update(entry)
        self.entries.append(e)
        self.path.append(e)
        self.tok.append(tokens)
        self.leaf = e["id"]
        self.ctx += tokens
        return e

    # ---- messages -------------------------------------------------------------------------------
    def user_content(self) -> Any:
        body = self.text(10, 1500)
        if not body:
            body = "go on"
        if self.chance("p_user_blocks"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": body}]
            if self.chance("p_image"):
                blocks.append({"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
                               "mimeType": "image/png"})
            if self.rng.random() < 0.2:
                blocks.append({"type": "text", "text": self.text(5, 200)})
            return blocks
        return body

    def add_user(self) -> None:
        content = self.user_content()
        n = len(content) if isinstance(content, str) else sum(len(b.get("text", "")) for b in content)
        self.append({"type": "message", "message": {"role": "user", "content": content, "timestamp": self.ms}},
                    n // 4 + 1)

    def add_bash_execution(self) -> None:
        cmd = self.rng.choice(["ls -la", "git status", "pytest -q", "make build", "cat README.md", "du -sh ."])
        out = self.text(0, 3000)
        msg = {"role": "bashExecution", "command": cmd, "output": out, "exitCode": self.rng.choice([0, 0, 0, 1, 2]),
               "cancelled": self.rng.random() < 0.05, "truncated": False, "timestamp": self.ms}
        if self.rng.random() < 0.1:
            msg["excludeFromContext"] = True
        self.append({"type": "message", "message": msg}, (len(cmd) + len(out)) // 4 + 1)

    def add_custom_message(self) -> None:
        if self.rng.random() < 0.5:
            content: Any = self.text(5, 1200)
            n = len(content)
        else:
            content = [{"type": "text", "text": self.text(5, 800)}]
            n = len(content[0]["text"])
        e: dict[str, Any] = {"type": "custom_message", "customType": self.rng.choice(["reminder", "todo", "plan-mode", "git-status"]),
                             "content": content, "display": self.rng.random() < 0.7}
        if self.rng.random() < 0.3:
            e["details"] = {"source": "extension", "n": self.randint(1, 99)}
        self.append(e, n // 4 + 1)

    def usage(self, output_tokens: int, zero: bool = False) -> dict[str, Any]:
        if zero:
            u = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
            u["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
            return u
        ctx = max(self.ctx, 1) + 1500  # + system prompt and tools
        cache_read = int(ctx * self.rng.uniform(0.5, 0.95)) if self.rng.random() < 0.8 else 0
        cache_write = self.randint(0, max(0, ctx - cache_read)) if self.rng.random() < 0.5 else 0
        inp = max(1, ctx - cache_read - cache_write)
        total = inp + output_tokens + cache_read + cache_write
        if self.chance("p_zero_total"):
            total = 0
        cost = {"input": inp * 3e-6, "output": output_tokens * 15e-6, "cacheRead": cache_read * 3e-7,
                "cacheWrite": cache_write * 3.75e-6}
        cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
        return {"input": inp, "output": output_tokens, "cacheRead": cache_read, "cacheWrite": cache_write,
                "totalTokens": total, "cost": cost}

    def tool_args(self, name: str) -> dict[str, Any]:
        path = self.rng.choice(_PATHS)
        num = (lambda v: float(v)) if self.chance("p_float_args") else (lambda v: v)
        if name == "read":
            a: dict[str, Any] = {"path": path}
            if self.rng.random() < 0.3:
                a["offset"] = num(self.randint(1, 900))
                a["limit"] = num(self.rng.choice([50, 100, 200, 2000]))
            return a
        if name == "write":
            return {"path": path, "content": self.text(50, 6000)}
        if name == "edit":
            return {"path": path, "oldText": self.text(5, 600), "newText": self.text(5, 900)}
        if name == "bash":
            a = {"command": self.rng.choice(["pytest -q", "ls src", "git diff", "python -m build", f"cat {path}",
                                             "grep -rn TODO .", "npm test"])}
            if self.rng.random() < 0.2:
                a["timeout"] = num(self.rng.choice([30, 60, 120]))
            return a
        if name == "grep":
            a = {"pattern": self.rng.choice(["def ", "TODO", "import", "class \\w+"])}
            if self.rng.random() < 0.7:
                a["path"] = self.rng.choice(["src", "tests", path])
            return a
        return {"path": self.rng.choice(["src", ".", "tests", path])}  # find / ls

    def tool_result_text(self, name: str, args: dict[str, Any], error: bool) -> str:
        if error:
            return self.rng.choice([f"Error: ENOENT: no such file or directory, open '{args.get('path', '')}'",
                                    "Command exited with code 1\n" + self.text(0, 800),
                                    "Could not find the exact text in the file."])
        if name == "write":
            return f"Successfully wrote {len(args.get('content', ''))} bytes to {args['path']}"
        if name == "edit":
            return f"Successfully replaced text in {args['path']}."
        if name == "grep" and self.chance("p_lone_surrogate"):
            # Pi's grep cuts each line with String.slice(0, 500): in UTF-16 units
            line = "src/app.py:12: " + "x" * 484 + "\U0001F600" * 3
            return line[:499] + "\ud83d" + "... [truncated]\n" + self.text(0, 300)
        if self.rng.random() < self.o["big_results"]:
            return self.text(8000, 50000)
        if name == "read":
            return self.text(100, 8000)
        if name == "bash":
            return self.text(0, 4000) or "(no output)"
        return self.text(20, 2500)

    def add_assistant(self, last: bool, kind: str = "normal") -> list[tuple[str, str, dict[str, Any]]]:
        """Append an assistant message; returns its tool calls (id, name, args)."""
        content: list[dict[str, Any]] = []
        n = 0
        if self.rng.random() < 0.4:
            t = self.text(20, 2500)
            content.append({"type": "thinking", "thinking": t, "thinkingSignature": "sig" + str(self.rng.getrandbits(24))})
            n += len(t)
        if last or self.rng.random() < 0.6:
            t = self.text(5, 1500)
            content.append({"type": "text", "text": t})
            n += len(t)
        calls: list[tuple[str, str, dict[str, Any]]] = []
        if not last and kind == "normal":
            for _ in range(self.rng.choice([1, 1, 1, 1, 2, 2, 3])):
                name = self.rng.choice(_TOOLS)
                args = self.tool_args(name)
                self.call_n += 1
                cid = f"toolu_{self.call_n:05d}{self.rng.getrandbits(20):05x}"
                content.append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
                n += len(name) + 8 * len(args) + sum(len(v) if isinstance(v, str) else 4 for v in args.values())
                calls.append((cid, name, args))
        provider, model = self.model
        msg: dict[str, Any] = {"role": "assistant", "content": content, "api": _APIS.get(provider, "openai-completions"),
                               "provider": provider, "model": model}
        if kind == "error":
            msg["content"] = []
            msg["usage"] = self.usage(0, zero=True)
            msg["stopReason"] = "error"
            msg["errorMessage"] = self.rng.choice(_ERRORS)
            n = 0
        elif kind == "overflow":
            msg["content"] = []
            msg["usage"] = self.usage(0, zero=True)
            msg["stopReason"] = "error"
            msg["errorMessage"] = "prompt is too long: 213462 tokens > 200000 maximum"
            n = 0
        elif kind == "aborted":
            msg["content"] = content[:1]
            msg["usage"] = self.usage(0, zero=True)
            msg["stopReason"] = "aborted"
            msg["errorMessage"] = "Request was aborted"
            calls = []
            n = sum(len(b.get("text", b.get("thinking", ""))) for b in msg["content"])
        else:
            msg["usage"] = self.usage(n // 4 + 1, zero=self.chance("p_zero_usage"))
            msg["stopReason"] = "toolUse" if calls else self.rng.choice(["stop"] * 15 + ["length"])
        msg["timestamp"] = self.ms
        self.append({"type": "message", "message": msg}, n // 4 + 1)
        return calls

    def add_tool_result(self, cid: str, name: str, args: dict[str, Any]) -> None:
        error = self.rng.random() < 0.08
        content: list[dict[str, Any]] = [{"type": "text", "text": self.tool_result_text(name, args, error)}]
        if name == "read" and self.chance("p_image"):
            content.append({"type": "image", "data": "R0lGODlhAQABAAAAACw=", "mimeType": "image/gif"})
        msg: dict[str, Any] = {"role": "toolResult", "toolCallId": cid, "toolName": name, "content": content,
                               "isError": error, "timestamp": self.ms}
        if name == "edit" and not error:
            msg["details"] = {"diff": "-" + args["oldText"][:200] + "\n+" + args["newText"][:200]}
        if self.chance("p_nested"):
            nested = self.rng.choice(["read", "write", "edit", "bash"])
            msg["nestedCalls"] = {"calls": [{"id": "n1", "name": nested, "arguments": {"path": self.rng.choice(_PATHS)},
                                             "status": "done", "durationMs": self.randint(1, 900)}], "complete": True}
            msg["usage"] = self.usage(self.randint(10, 300))
        n = sum(len(b.get("text", "")) + (4800 if b["type"] == "image" else 0) for b in content)
        self.append({"type": "message", "message": msg}, n // 4 + 1)

    # ---- Pi 1.6's entries ----------------------------------------------------------------------
    def add_system(self, full: bool) -> None:
        msg: dict[str, Any] = {"role": "system", "content": ""}
        if full:
            msg["sections"] = {"preamble": "You are a coding assistant. " + self.text(20, 400),
                               "rules": "<rules>\n" + self.text(20, 600) + "\n</rules>",
                               "cwd": "<cwd>\n" + str(self.o["cwd"]) + "\n</cwd>"}
            msg["toolsAdded"] = [{"name": n, "description": "The " + n + " tool. " + self.text(5, 120),
                                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
                                 for n in ("read", "bash", "edit", "write")]
        else:
            kind = self.rng.choice(["section", "section", "remove", "tool", "untool", "content"])
            if kind == "section":
                msg["sections"] = {self.rng.choice(["rules", "addendum", "preamble"]): self.text(10, 400)}
            elif kind == "remove":
                msg["sections"] = {self.rng.choice(["rules", "cwd", "addendum"]): None}
            elif kind == "tool":
                msg["toolsAdded"] = [{"name": self.rng.choice(["grep", "find", "read"]), "description": self.text(5, 80),
                                      "parameters": {"type": "object"}}]
            elif kind == "untool":
                msg["toolsRemoved"] = [{"name": self.rng.choice(["bash", "write"])}]
            else:
                msg["content"] = self.text(5, 200)
        msg["timestamp"] = self.ms
        self.system.append(msg)
        self.append({"type": "message", "message": msg}, 0)

    def checkpoint(self) -> dict[str, Any]:
        """The system messages replayed (Pi's getCurrentSystemMessage), as a compaction records it."""
        content, sections, tools = [], {}, {}
        for m in self.system:
            if m.get("content"):
                content.append(m["content"])
            for k, v in (m.get("sections") or {}).items():
                if v is None:
                    sections.pop(k, None)
                else:
                    sections[k] = v
            for t in m.get("toolsRemoved") or []:
                tools.pop(t["name"], None)
            for t in m.get("toolsAdded") or []:
                tools[t["name"]] = t
        out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
        if sections:
            out["sections"] = sections
        if tools:
            out["toolsAdded"] = list(tools.values())
        out["timestamp"] = self.ms
        return out

    def editable(self) -> list[dict[str, Any]]:
        return [e for e in self.path[self.boundary:] if e["type"] == "custom_message" or (
            e["type"] == "message" and e["message"]["role"] in ("user", "assistant", "toolResult"))]

    def add_context_edit(self, target: dict[str, Any] | None = None, omit: bool | None = None) -> None:
        if target is None:
            candidates = self.editable()
            if not candidates:
                return
            target = self.rng.choice(candidates)
        omit = self.rng.random() < 0.6 if omit is None else omit
        replacement: Any = None
        if not omit:
            text = "[tool result hidden] " + self.text(0, 300)
            role = target["message"]["role"] if target["type"] == "message" else "custom"
            replacement = {"content": [{"type": "text", "text": text}] if role in ("assistant", "toolResult")
                           or self.rng.random() < 0.5 else text}
        self.append({"type": "context_edit", "targetId": target["id"], "replacement": replacement})

    def add_recovery(self) -> None:
        """An attempt Pi abandoned after an overflow or a length stop: the assistant message and its
        tool results, then an omission edit for each (agent-session's _omitRecoveryAttempt)."""
        start = len(self.path)
        calls = self.add_assistant(False)
        for cid, name, args in calls:
            self.add_tool_result(cid, name, args)
        for e in self.path[start:len(self.path)]:
            if self.full():
                return
            self.add_context_edit(e, omit=True)

    # ---- meta entries ---------------------------------------------------------------------------
    def add_settings(self, kind: str | None = None) -> None:
        kind = kind or self.rng.choice(["model_change", "thinking_level_change", "thinking_level_change",
                                        "label", "session_info", "custom", "model_change"])
        if kind == "model_change":
            self.model = self.rng.choice(_MODELS)
            self.append({"type": "model_change", "provider": self.model[0], "modelId": self.model[1]})
        elif kind == "thinking_level_change":
            self.append({"type": "thinking_level_change", "thinkingLevel": self.rng.choice(_LEVELS)})
        elif kind == "label":
            target = self.rng.choice(self.path)["id"] if self.path else None
            e: dict[str, Any] = {"type": "label", "targetId": target or "00000000"}
            if self.rng.random() < 0.85:
                e["label"] = self.rng.choice(["checkpoint", "before refactor", "works", "bug here", "v1"])
            self.append(e)
        elif kind == "session_info":
            self.append({"type": "session_info", "name": self.rng.choice(["refactor parser", "fix ci", "explore data"])})
        else:
            self.append({"type": "custom", "customType": self.rng.choice(["todo-state", "plan-mode", "stats"]),
                         "data": {"items": [self.text(3, 40) for _ in range(self.randint(0, 3))]}})

    def summary_text(self) -> str:
        files = self.rng.sample(_PATHS, self.randint(0, 5))
        body = ("## Goal\n" + self.text(20, 300) + "\n\n## Constraints & Preferences\n- " + self.text(5, 200) +
                "\n\n## Progress\n### Done\n- [x] " + self.text(10, 400) + "\n\n### In Progress\n- [ ] " +
                self.text(10, 200) + "\n\n### Blocked\n- (none)\n\n## Key Decisions\n- **" + self.text(3, 40) +
                "**: " + self.text(10, 200) + "\n\n## Next Steps\n1. " + self.text(10, 200) +
                "\n\n## Critical Context\n- " + self.text(10, 600))
        if files:
            body += "\n\n<read-files>\n" + "\n".join(files) + "\n</read-files>"
        return body

    def recompute_boundary(self) -> None:
        """After the leaf moved: where the latest compaction on the path keeps from, and ctx."""
        self.system = [e["message"] for e in self.path if e["type"] == "message" and e["message"]["role"] == "system"]
        self.boundary = 0
        ci = -1
        for i in range(len(self.path) - 1, -1, -1):
            if self.path[i]["type"] == "compaction":
                ci = i
                break
        if ci >= 0:
            fk = self.path[ci]["firstKeptEntryId"]
            for i in range(ci):
                if self.path[i]["id"] == fk:
                    self.boundary = i
                    break
            else:
                self.boundary = ci + 1
            self.ctx = len(self.path[ci]["summary"]) // 4 + sum(self.tok[self.boundary:])
        else:
            self.ctx = sum(self.tok)

    def choose_first_kept(self) -> tuple[str, int | None]:
        """A cut like one Pi or ipyagent would choose: keep roughly the last few thousand tokens.

        Returns the id and its path index (None when the id is not on the path)."""
        if self.chance("p_odd") or not self.path:
            return f"{self.rng.getrandbits(32):08x}", None  # not on the path: the fallback
        lo = self.boundary
        hi = len(self.path)
        if hi <= lo:
            return self.path[-1]["id"], hi - 1
        keep = self.rng.choice([500, 2000, 5000, 20000])
        acc = 0
        i = hi - 1
        while i > lo and acc < keep:
            acc += self.tok[i]
            i -= 1
        # forward to a cut point (never a tool result or a meta entry)
        j = i
        while j < hi:
            e = self.path[j]
            if e["type"] in ("branch_summary", "custom_message") or (
                    e["type"] == "message" and e["message"]["role"] != "toolResult"):
                break
            j += 1
        if j >= hi:
            j = i
        # backward over meta entries, like Pi
        while j > lo and self.path[j - 1]["type"] not in ("message", "compaction"):
            j -= 1
        return self.path[j]["id"], j

    def add_compaction(self) -> None:
        first_kept, kept_idx = self.choose_first_kept()
        summary = self.summary_text()
        e: dict[str, Any] = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept,
                             "tokensBefore": self.ctx + 1500}
        hook = self.chance("p_from_hook")
        if not hook or self.rng.random() < 0.5:
            e["details"] = {"readFiles": sorted(self.rng.sample(_PATHS, self.randint(0, 6))),
                            "modifiedFiles": sorted(self.rng.sample(_PATHS, self.randint(0, 4)))}
        if self.o["p_checkpoint"] and self.rng.random() < 0.5:
            e["usage"] = self.usage(self.randint(100, 900))
        if hook:
            e["fromHook"] = True
        if self.system and self.chance("p_checkpoint"):
            e["systemMessage"] = self.checkpoint()
        retain_none = self.chance("p_retain_none")
        stored = self.append(e)
        if retain_none:
            stored["firstKeptEntryId"], kept_idx = stored["id"], None
        self.boundary = kept_idx if kept_idx is not None else len(self.path)
        self.ctx = len(summary) // 4 + sum(self.tok[self.boundary:])

    def add_branch(self) -> None:
        """Pi's /tree: pick an earlier prompt, the leaf goes to its parent; maybe a branch summary."""
        far = self.rng.random() < 0.15
        users: list[int] = []
        for i in range(len(self.path) - 1, -1, -1):
            e = self.path[i]
            if e["type"] == "message" and e["message"]["role"] == "user":
                users.append(i)
                if len(users) >= 12 and not far:
                    break
        if len(users) < 2:
            return
        idx = self.rng.choice(users[1:])
        new_leaf_idx = idx - 1
        del self.path[new_leaf_idx + 1:]
        del self.tok[new_leaf_idx + 1:]
        self.leaf = self.path[-1]["id"] if self.path else None
        self.recompute_boundary()
        if self.chance("p_branch_summary"):
            summary = "" if self.chance("p_odd") else (
                "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"
                + self.summary_text())
            e: dict[str, Any] = {"type": "branch_summary", "fromId": self.leaf or "root", "summary": summary}
            if self.rng.random() < 0.8:
                e["details"] = {"readFiles": sorted(self.rng.sample(_PATHS, self.randint(0, 3))),
                                "modifiedFiles": sorted(self.rng.sample(_PATHS, self.randint(0, 2)))}
            if self.rng.random() < 0.1:
                e["fromHook"] = True
            self.append(e, len(summary) // 4 + 1)

    # ---- turns ----------------------------------------------------------------------------------
    def turn(self) -> None:
        if self.chance("p_settings"):
            for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
                self.add_settings()
        if self.full():
            return
        if self.system and self.chance("p_system"):
            self.add_system(False)
        if self.chance("p_context_edit"):
            self.add_context_edit()
        if self.full():
            return
        if self.chance("p_custom_role"):
            self.append({"type": "message", "message": {"role": "custom", "customType": "reminder",
                                                        "content": self.text(5, 600), "display": True,
                                                        "timestamp": self.ms}}, 50)
            if self.rng.random() < 0.5:
                self.add_user()
        elif self.chance("p_bash_execution"):
            for _ in range(self.rng.choice([1, 1, 2])):
                self.add_bash_execution()
            if self.rng.random() < 0.5:
                return  # only !cmd, no prompt
            self.add_user()
        elif self.chance("p_custom_message"):
            self.add_custom_message()
            if self.rng.random() < 0.5:
                self.add_user()
        else:
            self.add_user()
        steps = self.randint(0, self.o["max_steps"])
        for step in range(steps + 1):
            if self.full():
                return
            if self.chance("p_meta_midturn"):
                self.add_settings(self.rng.choice(["label", "custom"]))
            if self.chance("p_error"):
                self.add_assistant(True, "error")
                return
            if self.chance("p_aborted"):
                self.add_assistant(True, "aborted")
                return
            if self.chance("p_usage_entry"):
                self.append({"type": "usage", "kind": "cache_warm", "provider": self.model[0], "model": self.model[1],
                             "usage": self.usage(0)})
            if self.chance("p_recovery"):
                self.add_recovery()
                continue
            if self.chance("p_overflow"):
                self.add_assistant(True, "overflow")
                if not self.full():
                    self.add_compaction()
                continue  # Pi continues the turn after the compaction
            calls = self.add_assistant(step == steps)
            for cid, name, args in calls:
                if self.full():
                    return
                if self.chance("p_meta_midturn"):
                    self.add_settings("custom")
                self.add_tool_result(cid, name, args)
            if calls and not self.full() and self.chance("p_compaction_midturn"):
                self.add_compaction()

    def run(self) -> list[dict[str, Any]]:
        end = self.o["end"]
        tail = 2 if end == "toolResult" else 1
        if end and self.n < tail:
            raise ValueError(f"end={end!r} needs at least {tail} entries")
        target = max(self.n - tail, 0) if end else self.n
        self.n = target
        if self.rng.random() < 0.9:
            self.append({"type": "model_change", "provider": self.model[0], "modelId": self.model[1]})
            self.append({"type": "thinking_level_change", "thinkingLevel": self.rng.choice(_LEVELS)})
        if self.chance("p_system"):
            self.add_system(True)
        while not self.full():
            self.turn()
            if self.full():
                break
            if self.chance("p_compaction"):
                self.add_compaction()
            elif self.chance("p_branch"):
                self.add_branch()
        del self.entries[target:]
        if end:
            self.entries_end(end)
        return self.entries

    def entries_end(self, end: str) -> None:
        # rebuild the path of the current last entry (the truncation may have cut the tracked path)
        last = self.entries[-1] if self.entries else None
        by_id = {e["id"]: e for e in self.entries}
        path: list[dict[str, Any]] = []
        cur = last
        while cur is not None:
            path.append(cur)
            cur = by_id.get(cur["parentId"]) if cur.get("parentId") else None
        path.reverse()
        self.path = path
        self.tok = [0] * len(path)
        self.leaf = last["id"] if last else None
        self.recompute_boundary()
        self.n = len(self.entries) + 1
        if end == "compaction":
            self.add_compaction()
        elif end == "settings":
            self.add_settings(self.rng.choice(["model_change", "thinking_level_change"]))
        elif end == "user":
            self.add_user()
        elif end in ("assistant", "turn_end"):
            self.add_assistant(True)
        elif end == "toolResult":
            self.n += 1
            cid, name, args = self.add_assistant(False)[0]
            self.add_tool_result(cid, name, args)
        elif end == "branch_summary":
            self.o = dict(self.o, p_odd=0.0)
            e = {"type": "branch_summary", "fromId": self.leaf or "root", "summary": self.summary_text()}
            self.append(e, len(e["summary"]) // 4)
        elif end == "custom_message":
            self.add_custom_message()
        elif end == "label":
            self.add_settings("label")
        elif end == "bash":
            self.add_bash_execution()
        else:
            raise ValueError(f"unknown end kind {end!r}")


def generate_session(seed: int, n_entries: int, **options: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Pi v3 session: ``(header, entries)`` with exactly ``n_entries`` entries (file order)."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
    if n_entries < 0:
        raise ValueError("n_entries must be >= 0")
    opts = {**DEFAULTS, **options}
    gen = _Gen(seed, n_entries, opts)
    gc_was_on = gc.isenabled()
    gc.disable()  # only acyclic dicts are made; the collector's passes would double the time
    try:
        entries = gen.run() if n_entries else []
    finally:
        if gc_was_on:
            gc.enable()
    rng = random.Random(seed ^ 0x5EED)
    u = f"{rng.getrandbits(128):032x}"
    header = {"type": "session", "version": 3, "id": f"{u[:8]}-{u[8:12]}-4{u[13:16]}-a{u[17:20]}-{u[20:]}",
              "timestamp": _iso(int(opts["start_ms"]) - 1000), "cwd": opts["cwd"]}
    return header, entries


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def to_jsonl(header: dict[str, Any], entries: list[dict[str, Any]]) -> str:
    """The file's text: ``JSON.stringify`` per line (a lone surrogate is written as a \\uXXXX escape)."""
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    text = "".join(dumps(x) + "\n" for x in [header, *entries])
    if _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def write_jsonl(path: str | Path, header: dict[str, Any], entries: list[dict[str, Any]]) -> Path:
    """Write the session as Pi does: one ``JSON.stringify`` line per object, UTF-8, ``\\n`` endings."""
    p = Path(path)
    p.write_text(to_jsonl(header, entries), encoding="utf-8")
    return p


def path_to_leaf(entries: list[dict[str, Any]], leaf_id: str | None = None) -> list[dict[str, Any]]:
    """The root→leaf path (Pi's getBranch); the leaf defaults to the last entry in file order."""
    if not entries:
        return []
    by_id = {e["id"]: e for e in entries}
    cur = by_id.get(leaf_id) if leaf_id else entries[-1]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    while cur is not None and cur["id"] not in seen:
        seen.add(cur["id"])
        out.append(cur)
        parent = cur.get("parentId")
        cur = by_id.get(parent) if parent else None
    out.reverse()
    return out
