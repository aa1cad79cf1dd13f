"""Instructions that survive compaction: AGENTS.md / CLAUDE.md found from the notebook's folder up
to the repository root or home, pins as session entries, and the composed system prompt — sent
with every request, before and after a compaction, and never in the summarised history."""

from __future__ import annotations

import json
import os

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent.prompt.instructions import find_instruction_files, instruction_dirs
from ipyagent.agent.prompt.notebook_context import NotebookActivity, SystemContext
from ipyagent.agent.prompt.pinned import PIN_TYPE, active_pins, pin_entry, unpin_entry
from ipyagent.agent.prompt.system import compose_system_prompt, system_prompt_parts
from ipyagent.agent.run_config import RunConfig
from ipyagent.compaction.serialize import serialize_conversation
from ipyagent.hooks import HookRegistry
from ipyagent.testing import FakeProviderServer

# ---- instruction files ---------------------------------------------------------------------------


def test_files_from_the_repository_root_down_to_the_notebook_folder(tmp_path):
    repo = tmp_path / "home" / "repo"
    nb_dir = repo / "analysis" / "june"
    nb_dir.mkdir(parents=True)
    (repo / ".git").mkdir()
    (tmp_path / "home" / "AGENTS.md").write_text("above the repository: not read")
    (repo / "AGENTS.md").write_text("Repository rule: use polars.")
    (repo / "analysis" / "CLAUDE.md").write_text("Analysis rule: plots in SVG.")
    (nb_dir / "AGENTS.md").write_text("June rule: euros, not dollars.")
    (nb_dir / "CLAUDE.md").symlink_to(nb_dir / "AGENTS.md")  # the same file: read once
    files = find_instruction_files(nb_dir, home=tmp_path / "home")
    assert [os.path.relpath(f.path, repo) for f in files] == ["AGENTS.md", "analysis/CLAUDE.md",
                                                               "analysis/june/AGENTS.md"]
    assert [f.text for f in files][-1] == "June rule: euros, not dollars."
    assert find_instruction_files(nb_dir, home=tmp_path / "home", names=()) == []


def test_the_walk_stops_at_home_and_big_files_are_cut(tmp_path):
    home = tmp_path / "me"
    work = home / "work"
    work.mkdir(parents=True)
    assert instruction_dirs(work, home=home) == [work.resolve(), home.resolve()]
    (tmp_path / "AGENTS.md").write_text("outside home: not read")
    (home / "AGENTS.md").write_text("x" * 50_000)
    (work / "CLAUDE.md").write_bytes(b"caf\xe9 \xff bytes")  # not UTF-8: read with replacements
    # no repository: home's file is outside the notebook's folder, read only when allowed
    files = find_instruction_files(work, home=home, max_bytes=1000, allow=lambda verdict, folder: True)
    assert [len(f.text) for f in files][0] == 1000 and files[0].truncated
    assert files[1].text.startswith("caf") and not files[1].truncated
    assert [f.path for f in find_instruction_files(work, home=home)] == [str(work.resolve() / "CLAUDE.md")]


# ---- pins ----------------------------------------------------------------------------------------


def test_pins_fold_over_the_session_in_append_order():
    session = Session(hooks=HookRegistry())
    prompt = session.append_message({"role": "user", "content": "first prompt", "timestamp": 1})
    first = session.append(pin_entry("Answer in British English."))
    session.append(pin_entry("Use polars."))
    session.append(pin_entry("Answer in British English."))  # the same text twice counts once
    session.append(unpin_entry(first["id"]))
    session.append({"type": "custom", "customType": PIN_TYPE, "data": "not a dict"})
    session.append({"type": "custom", "customType": PIN_TYPE, "data": {"text": 42}})
    assert [p.text for p in active_pins(session.entries)] == ["Use polars."]
    # a fork (re-running an earlier %%agent cell) moves the conversation, not the pins
    session.branch(prompt["parentId"])
    session.append_message({"role": "user", "content": "first prompt, again", "timestamp": 2})
    assert [p.text for p in active_pins(session.entries)] == ["Use polars."]
    # pins are Pi custom entries: they survive the Pi JSONL round trip
    again = Session.from_pi_jsonl(session.to_pi_jsonl(), hooks=HookRegistry())
    assert [p.text for p in active_pins(again.entries)] == ["Use polars."]


def test_system_prompt_parts_in_order():
    context = SystemContext("/work/nb.ipynb", "/work", "3.11.7", files=())
    parts = system_prompt_parts("BASE", context, [])
    assert [p.label for p in parts] == ["base prompt", "environment"]
    text = compose_system_prompt(parts)
    assert text.startswith("BASE\n\n## Environment")
    assert "- Notebook: /work/nb.ipynb" in text and "- Working directory: /work" in text and "3.11.7" in text


# ---- through the loop, across a compaction -------------------------------------------------------


class FakeNotebook:
    """A NotebookContext with fixed answers, counting how often the loop asks."""

    def __init__(self, tmp_path):
        (tmp_path / ".git").mkdir()
        (tmp_path / "AGENTS.md").write_text("Project rule: every number gets a unit.")
        self.folder = tmp_path
        self.sent = 0

    def system_context(self, approve=None) -> SystemContext:
        return SystemContext(str(self.folder / "nb.ipynb"), str(self.folder), "3.11.7",
                             tuple(find_instruction_files(self.folder)))

    def activity(self) -> NotebookActivity:
        return NotebookActivity()

    def prompt_sent(self) -> None:
        self.sent += 1


def test_agents_md_and_pins_are_in_every_request_and_survive_compaction(tmp_path):
    with FakeProviderServer() as server:
        server.register("fake", "openai")
        session = Session(hooks=HookRegistry())
        session.append(pin_entry("Always answer in British English."))
        notebook = FakeNotebook(tmp_path)
        config = RunConfig(model="fake:test-model", context_window=4000,
                           compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=400))
        agent = AgentLoop(session, config=config, tools=[], sleep=lambda s: None, notebook=notebook,
                          providers=server.providers)
        for i in range(6):
            server.enqueue_text(f"Answer {i}: " + "the data look consistent and tidy " * 40)
            assert agent.prompt(f"Question {i}: " + "tell me more about the columns " * 20).error is None
        assert notebook.sent == 6
        assert agent.session.compactions(), "the scenario must compact"
        chats = [r for r in server.requests if r.kind == "chat"]
        for request in chats:
            system = request.body["messages"][0]
            assert system["role"] == "system"
            assert "Project rule: every number gets a unit." in system["content"]
            assert "1. Always answer in British English." in system["content"]
            assert str(tmp_path / "nb.ipynb") in system["content"]
        first_compaction = agent.session.compactions()[0]
        after = [r for r in chats if "fake summary" in json.dumps(r.body["messages"][1:])
                 or first_compaction["summary"][:40] in json.dumps(r.body["messages"][1:])]
        assert after, "no request after the compaction"
        # never in the summarised history: the summariser's input holds neither
        for request in (r for r in server.requests if r.kind == "summary"):
            text = json.dumps(request.body)
            assert "British English" not in text and "every number gets a unit" not in text
        assert "British English" not in serialize_conversation(agent.session.agent_messages())


# ---- the magics ----------------------------------------------------------------------------------


def test_pin_magics_and_a_rerun_that_forks(monkeypatch, tmp_path):
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    from support.shell import extension_shell

    with FakeProviderServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
        monkeypatch.chdir(tmp_path)
        with extension_shell() as (shell, runtime):
            shell.get_parent = lambda: {"metadata": {"cellId": "ask"}}
            server.enqueue_text("first")
            with capture_output():
                shell.run_cell_magic("agent", "", "What is in the data?")
                shell.run_line_magic("agent", "pin Use polars, not pandas.")
                shell.run_line_magic("agent", "pin Answer briefly.")
            with capture_output() as cap:
                shell.run_line_magic("agent", "pin Use polars, not pandas.")
                shell.run_line_magic("agent", "pins")
            assert "already pinned as #1" in cap.stdout
            assert "1. Use polars, not pandas." in cap.stdout and "2. Answer briefly." in cap.stdout
            # Run All: the %%agent cell forks from before its prompt; the pins still hold, and the
            # pin cell run again records the pin on the new branch (the path the cells describe)
            server.enqueue_text("again")
            with capture_output():
                shell.run_cell_magic("agent", "", "What is in the data?")
            session = runtime.slot().session
            assert [p.text for p in active_pins(session.entries)] == ["Use polars, not pandas.", "Answer briefly."]
            assert "1. Use polars, not pandas." in server.requests[-1].body["messages"][0]["content"]
            assert not [e for e in session.path() if e["type"] == "custom"]
            with capture_output() as cap:
                shell.run_line_magic("agent", "pin Use polars, not pandas.")
            assert "pinned #1" in cap.stdout
            assert [e["data"]["text"] for e in session.path() if e["type"] == "custom"] == ["Use polars, not pandas."]
            with capture_output() as cap:
                shell.run_line_magic("agent", "unpin 2")
            assert "unpinned: Answer briefly." in cap.stdout
            assert [p.text for p in active_pins(session.entries)] == ["Use polars, not pandas."]
            for bad in ("unpin 5", "unpin x", "pin"):
                try:
                    shell.run_line_magic("agent", bad)
                except UsageError:
                    continue
                raise AssertionError(f"%agent {bad} should be a usage error")


def test_each_pin_is_cut_at_32_kb_and_named_shortened():
    from ipyagent.agent.prompt.pinned import MAX_PIN_BYTES, Pin, pins_note
    from ipyagent.agent.prompt.system import pins_text

    wide = Pin("p2", "é" * 20_000)  # 40,000 bytes of UTF-8: cut between whole characters
    pins = [Pin("p1", "Use polars.\x1b[2J"), wide, Pin("p3", "x" * MAX_PIN_BYTES)]
    assert not pins[0].cut and wide.cut and not pins[2].cut
    assert len(wide.prompt_text.encode()) == MAX_PIN_BYTES and set(wide.prompt_text) == {"é"}
    text = pins_text(pins)
    assert "[ipyagent: pin 2 was cut at 32 KB]" in text and "pin 1 was cut" not in text
    assert text.count("é") == MAX_PIN_BYTES // 2
    note = pins_note(pins, " from the notebook")
    assert note.startswith("3 pins from the notebook, in the system prompt of every request: 1. Use polars.?[2J; 2. ééé")
    assert note.endswith("cut to 32 KB in the system prompt: #2 (20,000 characters)") and len(note) < 400
    assert pins_note([]) == "no pins"
