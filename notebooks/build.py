"""Rebuild the teaching notebooks: write their cells, run them against ipyagent's fake provider with
scripted responses, and leave each executed notebook (outputs + its recorded session in
``metadata["ipyagent"]``) next to this script.

    python notebooks/build.py                      # all notebooks
    python notebooks/build.py how-compaction-works # one (name without .ipynb)
    python notebooks/build.py --check              # build into a temp dir, change nothing

How it works: a :class:`~ipyagent.testing.FakeProviderServer` runs in this process with a policy
(:class:`Scripted`) that reads each request and answers like a model would — assistant text,
``python`` / ``read`` / ``bash`` tool calls, and, for summariser requests, a structured six-section
summary built from what the request's ``<conversation>`` (and ``<previous-summary>``, and
``Additional focus:``) contain. A real kernel executes the notebook (``ipyagent.bridge.headless``,
which is what ``ipyagent run NOTEBOOK -o OUT`` does) with ``OPENAI_BASE_URL`` pointing at the fake
server, ``OPENAI_API_KEY=fake`` and ``IPYAGENT_MODEL=openai:scripted-model``. Everything the
agent does in the kernel (tools, budget, compaction) is ipyagent's real code; only the model's
words are scripted. The notebooks then replay offline: ``ipyagent run NB --replay``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ipyagent.agent.probe.prompts import probe_request_kind
from ipyagent.compaction.ledger import split_appendix
from ipyagent.testing import FakeProviderServer, ProbeScript, Reply, ToolCallSpec

HERE = Path(__file__).resolve().parent
MODEL = "openai:scripted-model"
FAKE_KEY = "fake-key-ipyagent-notebooks"

# ---- cells -------------------------------------------------------------------------------------


def md(cell_id: str, text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": textwrap.dedent(text).strip("\n")}


def code(cell_id: str, text: str) -> dict[str, Any]:
    return {"cell_type": "code", "id": cell_id, "metadata": {}, "execution_count": None, "outputs": [],
            "source": textwrap.dedent(text).strip("\n")}


def agent(cell_id: str, prompt: str, options: str = "") -> dict[str, Any]:
    return code(cell_id, f"%%agent{(' ' + options) if options else ''}\n{textwrap.dedent(prompt).strip()}")


def provenance(title: str, intro: str, *, extra_live: str = "") -> str:
    return f"""
    # {title}

    {textwrap.dedent(intro).strip()}

    > **About the recorded responses.** The model responses stored in this notebook were produced
    > by ipyagent itself running against its fake provider (`ipyagent.testing.FakeProviderServer`)
    > with **scripted responses** (`notebooks/build.py`): the agent loop, the tools, the budget and
    > every compaction decision are ipyagent's real code, only the model's words were written in
    > advance. Without a provider configured, re-running the notebook **replays** those responses
    > offline, with no key (`ipyagent run {{path}} --replay`, or simply *Run All*), and recorded tool
    > calls are not run again.
    >
    > **To run it live**, configure a real provider before `%load_ext ipyagent` — e.g.
    > `export OPENAI_API_KEY=…` and `export IPYAGENT_MODEL=openai:gpt-4.1-mini`, or
    > `ANTHROPIC_API_KEY` with `anthropic:claude-sonnet-4-5`, or a local OpenAI-compatible server with
    > `OPENAI_BASE_URL=http://localhost:11434/v1` and `IPYAGENT_MODEL=openai:qwen2.5-coder` — then
    > *Restart & Run All*. A real model will say different things (and compact at different
    > moments) than the recording.{extra_live}
    """


# ---- the script: what the "model" says ----------------------------------------------------------


@dataclass
class Step:
    text: str = ""
    calls: list[tuple[str, dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]]]] = field(
        default_factory=list)


@dataclass
class Turn:
    """The model's side of one ``%%agent`` cell: ``steps`` in order (each a reply; the last has no
    calls), and what a summariser should remember about the turn (``notes``)."""

    prompt: str
    steps: list[Step]
    goal: str = ""
    done: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # kept only when a focus asks for them
    constraints: list[str] = field(default_factory=list)
    next: list[str] = field(default_factory=list)
    key: str = ""
    match: str = ""  # for a prompt with {…} interpolations: a part of the filled-in text that identifies it

    def answers(self, text: str) -> bool:
        """Whether a user message's text is this turn's prompt (after the notebook-activity block
        that may come before it, or with its interpolations filled in)."""
        if self.match:
            return self.match in text and "[ipyagent filled in" in text
        return text == self.prompt or text.endswith("\n" + self.prompt)

    def __post_init__(self) -> None:
        self.prompt = textwrap.dedent(self.prompt).strip()
        self.key = re.sub(r"[^a-z0-9]+", "_", self.prompt.lower())[:24].strip("_")


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
    """The fake provider's policy: answers chat requests from the notebook's turns and writes
    summaries for summariser requests."""

    def __init__(self, turns: list[Turn], probe: list[dict[str, Any]] | None = None):
        self.turns = turns
        self.probe = ProbeScript(probe) if probe else None  # %agent probe: questions, answers, grades
        self.by_call_id: dict[str, tuple[int, int]] = {}
        self.summary_models: list[str] = []
        self.summary_kinds: list[str] = []
        self.unanswered: list[str] = []

    # -- chat --

    def _turn_of(self, messages: list[dict[str, Any]]) -> int | None:
        """The turn being answered: the latest user message that is a scripted prompt, or, when the
        prompt itself was compacted away (split turn), the latest prompt quoted in the summary."""
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            text = _text_of(message.get("content")).strip()
            for n, turn in enumerate(self.turns):
                if turn.answers(text):
                    return n
            if "<summary>" in text:
                found = [n for n, turn in enumerate(self.turns) if turn.prompt[:60] in text]
                if found:
                    return max(found)
        return None

    def chat(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        n = self._turn_of(messages)
        if n is None:
            self.unanswered.append(json.dumps(messages[-1])[:200] if messages else "(no messages)")
            return Reply(text="(The build script has no scripted answer for this prompt.)")
        turn = self.turns[n]
        step = 0
        for message in messages:  # how far the turn got: the latest of its scripted calls seen
            for call in message.get("tool_calls") or []:
                where = self.by_call_id.get(call.get("id"))
                if where and where[0] == n:
                    step = max(step, where[1] + 1)
        step = min(step, len(turn.steps) - 1)
        spec = turn.steps[step]
        calls = []
        for j, (name, arguments) in enumerate(spec.calls):
            if callable(arguments):  # arguments the "model" reads off its context (e.g. an entry id)
                arguments = arguments(messages)
            call_id = f"call_{turn.key}_{step}_{j}"[:40]
            self.by_call_id[call_id] = (n, step)
            calls.append(ToolCallSpec(name, arguments, call_id))
        return Reply(text=spec.text, tool_calls=calls, chunk_size=24)

    # -- summaries --

    def _turns_in(self, text: str) -> list[Turn]:
        return [t for t in self.turns if t.prompt[:60] in text]

    def summary(self, body: dict[str, Any]) -> Reply:
        self.summary_models.append(str(body.get("model")))
        prompt = _text_of((body.get("messages") or [{}])[-1].get("content"))
        conversation = prompt.split("</conversation>")[0]
        previous = None
        if "<previous-summary>" in prompt:
            previous = prompt.split("<previous-summary>", 1)[1].split("</previous-summary>", 1)[0]
        focus = ""
        if "Additional focus:" in prompt:
            focus = prompt.split("Additional focus:", 1)[1].strip()
        turns = self._turns_in(conversation)
        if "PREFIX of a turn" in prompt:
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
                          "## Early Progress", *early, "", "## Context for Suffix", *suffix])

    @staticmethod
    def _six_sections(turns: list[Turn], previous: str | None, focus: str) -> str:
        old = _parse_summary(previous) if previous else {name: [] for name in SECTIONS}
        words = [w for w in re.findall(r"[a-zA-Zø]{5,}", focus.lower())]

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

    def __call__(self, body: dict[str, Any]) -> Reply:
        from ipyagent.testing.accounting import default_summary_detector

        if self.probe is not None and probe_request_kind(body):
            return self.probe(body)
        if default_summary_detector(body):
            return self.summary(body)
        return self.chat(body)


# ---- building ----------------------------------------------------------------------------------


@dataclass
class Notebook:
    name: str
    cells: list[dict[str, Any]]
    turns: list[Turn]
    check: Callable[[dict[str, Any], Scripted, FakeProviderServer], None] | None = None
    files: dict[str, str] = field(default_factory=dict)  # files the notebook expects next to it
    probe: list[dict[str, Any]] = field(default_factory=list)  # %agent probe's questions (ProbeScript)
    # then Restart & Run All without a provider (replay), e.g. to execute cells the agent inserted
    replay_after_build: bool = False


def build(spec: Notebook, out_dir: Path, *, timeout: int = 120) -> Path:
    from ipyagent.bridge.headless import execute_notebook
    from ipyagent.store.ipynb import new_notebook, write_notebook

    nb = new_notebook(spec.cells)
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb["metadata"]["language_info"] = {"name": "python"}
    for cell in nb["cells"]:
        cell["source"] = cell["source"].replace("{path}", f"notebooks/{spec.name}.ipynb")
    policy = Scripted(spec.turns, spec.probe)
    keys = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "IPYAGENT_MODEL", "JPY_SESSION_NAME", "IPYAGENT_REPLAY",
            "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
    saved = {k: os.environ.get(k) for k in keys}
    with tempfile.TemporaryDirectory() as work, FakeProviderServer(policy=policy) as server:
        for name, text in spec.files.items():
            (Path(work) / name).write_text(text, encoding="utf-8")
        shutil.copy(HERE / "tour_helpers.py", Path(work) / "tour_helpers.py")
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update(OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY=FAKE_KEY, IPYAGENT_MODEL=MODEL)
        try:
            outcome = execute_notebook(nb, timeout=timeout, cwd=work)
            if spec.replay_after_build and not outcome.error:
                for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "IPYAGENT_MODEL"):
                    os.environ.pop(k, None)
                os.environ["IPYAGENT_REPLAY"] = "on"
                calls = len(server.requests)
                outcome = execute_notebook(outcome.nb, timeout=timeout, cwd=work)
                assert len(server.requests) == calls, f"{spec.name}: the replay reached the provider"
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if outcome.error:
            raise SystemExit(f"{spec.name}: a cell failed:\n{outcome.error}")
        if policy.unanswered:
            raise SystemExit(f"{spec.name}: requests without a scripted answer: {policy.unanswered}")
        if spec.check:
            spec.check(outcome.nb, policy, server)
        report = [f"{r.kind}:{r.outcome}" for r in server.requests]
    out = outcome.nb
    _scrub(out)
    path = out_dir / f"{spec.name}.ipynb"
    write_notebook(path, out)
    print(f"built {path.name}: {len(report)} requests ({sum(1 for r in report if r.startswith('summary'))} summaries), "
          f"{len(out['metadata']['ipyagent']['sessions'])} session(s)")
    return path


def _drop_journals(nb: dict[str, Any]) -> int:
    """Remove journal outputs, once their entries are in the metadata (the runner stored them
    there); a journal holding an entry the metadata lacks stops the build. Returns how many."""
    from ipyagent.store.journal import JOURNAL_MIME, journal_outputs

    stored = {e["id"] for s in nb["metadata"].get("ipyagent", {}).get("sessions", {}).values() for e in s["entries"]}
    for cell_index, payload in journal_outputs(nb):
        missing = [e.get("id") for e in payload.get("entries", []) if e.get("id") not in stored]
        if missing:
            raise SystemExit(f"cell {cell_index + 1}: journal entries missing from the metadata: {missing}")
    dropped = 0
    for cell in nb["cells"]:
        kept = [o for o in cell.get("outputs", []) if JOURNAL_MIME not in (o.get("data") or {})]
        dropped += len(cell.get("outputs", [])) - len(kept)
        if "outputs" in cell:
            cell["outputs"] = kept
    return dropped


def _scrub(nb: dict[str, Any]) -> None:
    """Make the saved notebook machine-independent and readable without a kernel."""
    text = json.dumps(nb)
    for needle in (FAKE_KEY and "Bearer ",):
        assert needle not in text, f"{needle!r} in the notebook"
    # The session is in the metadata: a journal output ("kept in this output until `ipyagent
    # lift`") would only be noise for a reader (the runner answers the bridge, so there is none
    # unless a run went unacknowledged).
    _drop_journals(nb)
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("execution", None)
        for output in cell.get("outputs", []):
            # The live budget widget's model dies with the kernel; without saved widget state a viewer
            # (JupyterLab, nbconvert, GitHub) would show "model not found" or nothing instead of the
            # static HTML / Markdown view carried in the same output. Keep the static views.
            data = output.get("data") or {}
            if "application/vnd.jupyter.widget-view+json" in data and "text/html" in data:
                del data["application/vnd.jupyter.widget-view+json"]
    for session in nb["metadata"].get("ipyagent", {}).get("sessions", {}).values():
        session.get("header", {})["cwd"] = ""


def main(argv: list[str] | None = None) -> int:
    from notebook_specs import NOTEBOOKS  # noqa: E402  (the notebooks' cells and scripts)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks to build (default: all)")
    parser.add_argument("--check", action="store_true", help="build into a temporary directory only")
    args = parser.parse_args(argv)
    chosen = [n for n in NOTEBOOKS if not args.names or n.name in args.names]
    if args.names and len(chosen) != len(args.names):
        known = ", ".join(n.name for n in NOTEBOOKS)
        parser.error(f"unknown notebook; known: {known}")
    out_dir = Path(tempfile.mkdtemp()) if args.check else HERE
    for spec in chosen:
        build(spec, out_dir)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
