"""In-process tests of the magics: argument parsing, dispatch, configuration, runs against the
fake provider server, forks on re-run, %compact, approvals, the journal output. A real kernel is
exercised in tests/kernel/test_kernel_*.py."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.utils.capture import capture_output
from traitlets.config import Config

from ipyagent.agent.loop import AgentLoop
from ipyagent.bridge import comm as bridge_mod
from ipyagent.kernel import extension
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.kernel.magics.commands import COMMANDS
from ipyagent.store.ipynb import new_notebook, write_notebook
from ipyagent.store.journal import JOURNAL_MIME
from support.builders import chain
from support.shell import forget_extension, run, runtime_of, start_ipython


def user_entries(session):
    return [e for e in session.entries if e["type"] == "message" and e["message"]["role"] == "user"]


# ---- configuration -------------------------------------------------------------------------------


def test_configurable_is_registered_and_settable(ip):
    settings = runtime_of(ip).config
    assert settings in ip.configurables
    ip.run_line_magic("config", "Agent.context_window = 3000")
    ip.run_line_magic("config", "Agent.tool_approval = 'auto'")
    assert settings.context_window == 3000
    cfg = settings.run_config()
    assert cfg.context_window == 3000 and cfg.tool_approval == "auto" and cfg.model == "openai:fake-model"
    from traitlets import TraitError

    with pytest.raises(TraitError):
        settings.tool_approval = "sometimes"


def test_model_default_from_environment_and_config_file(monkeypatch):
    monkeypatch.setenv("IPYAGENT_MODEL", "anthropic:claude-sonnet-4-5")
    assert AgentSettings().model == "anthropic:claude-sonnet-4-5"
    c = Config()
    c.Agent.reserve_tokens = 500
    c.Agent.model = "openai:from-config"
    settings = AgentSettings(config=c)  # what ipython_config.py's c.Agent.… does
    assert settings.reserve_tokens == 500 and settings.model == "openai:from-config"
    assert settings.run_config().compaction.reserve_tokens == 500


def test_saved_settings_hold_no_provider_options(ip, server):
    ip.run_line_magic("config", "Agent.provider_options = {'openai': {'api_key': 'sk-hidden-123'}}")
    settings = runtime_of(ip).settings_of(runtime_of(ip).slot())
    assert "sk-hidden-123" not in json.dumps(settings)


def test_automatic_compaction_is_one_setting_also_in_old_notebooks(ip, server, tmp_path, capsys):
    """Agent.auto_compact is compaction.enabled (Pi's field). Sessions saved while RunConfig
    held both also kept a top-level "auto_compact"; loading one keeps a single switch."""
    from ipyagent.agent.run_config import upgrade_saved_settings
    from ipyagent.core import Session
    from ipyagent.store.ipynb import write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    ip.run_line_magic("config", "Agent.auto_compact = False")
    assert runtime_of(ip).run_config().compaction.enabled is False
    compaction = {"reserve_tokens": 16384, "keep_recent_tokens": 20000, "enabled": True}
    old = {"model": "openai:fake-model", "auto_compact": True, "compaction": compaction}
    assert upgrade_saved_settings(old) == {"model": "openai:fake-model", "compaction": compaction}
    assert upgrade_saved_settings({"auto_compact": False}) == {"compaction": {"enabled": False}}
    assert upgrade_saved_settings({"auto_compact": False, "compaction": {"reserve_tokens": 9}}) == {
        "compaction": {"reserve_tokens": 9, "enabled": False}}
    session = Session()
    session.append_message({"role": "user", "content": "hello", "timestamp": 1})
    nb = write_sessions_into_notebook(new_notebook(), NotebookSessions.from_session("old", session, old))
    write_notebook(tmp_path / "old.ipynb", nb)
    ip.run_line_magic("agent", f"load {tmp_path / 'old.ipynb'}")
    slot = runtime_of(ip).slots["old"]
    saved = runtime_of(ip).settings_of(slot)
    assert "auto_compact" not in saved and saved["compaction"]["enabled"] is False
    assert saved == runtime_of(ip).run_config().saved_settings()


# ---- parsing and dispatch ------------------------------------------------------------------------


def test_dispatch_table_has_every_command():
    assert set(COMMANDS) >= {"status", "config", "model", "new", "sessions", "switch", "tree", "checkout",
                             "context", "summary", "export", "import", "load", "help"}


def test_help_is_written_from_the_parsers_and_lists_every_command_and_option(ip, capsys):
    from ipyagent.kernel.magics.agent_cell import AgentMagics, _agent_cell_args
    from ipyagent.kernel.magics.compact_magic import _compact_args

    ip.run_line_magic("agent", "help all")  # %agent help lists the commands, "all" with their options
    out = capsys.readouterr().out
    parsers = {"%%agent": _agent_cell_args.parser, "%compact": _compact_args.parser,
               **{f"%agent {name}": func.parser for name, func in COMMANDS.items()}}
    missing = []
    for usage, parser in parsers.items():
        if usage not in out:
            missing.append(usage)
        for action in parser._actions:
            if action.dest == "help":
                continue
            for option in action.option_strings or [action.dest]:
                if option not in out:
                    missing.append(f"{usage} {option}")
    assert missing == []
    assert "--cells" in out  # the option the hand-written help had left out
    assert AgentMagics.agent.__doc__ == out.rstrip("\n")  # %agent? shows the same
    ip.run_line_magic("agent", "help checkout")
    assert "--summarize" in capsys.readouterr().out


def test_unknown_command_and_bad_arguments_are_usage_errors(ip):
    with pytest.raises(UsageError, match="unknown command"):
        ip.run_line_magic("agent", "frobnicate")
    with pytest.raises(UsageError):
        ip.run_cell_magic("agent", "--bogus", "hi")
    with pytest.raises(UsageError, match="needs a prompt"):
        ip.run_cell_magic("agent", "", "   \n")
    with pytest.raises(UsageError):
        ip.run_line_magic("agent", "switch")
    with pytest.raises(UsageError, match="no session"):
        ip.run_line_magic("agent", "switch nowhere")


def test_no_model_is_a_clear_usage_error(ip, monkeypatch):
    monkeypatch.delenv("IPYAGENT_MODEL", raising=False)
    runtime_of(ip).config.model = ""
    with pytest.raises(UsageError, match="No model configured"):
        ip.run_cell_magic("agent", "", "hello")


def test_sessions_new_switch(ip, capsys):
    ip.run_line_magic("agent", "new research")
    assert runtime_of(ip).active == "research"
    with pytest.raises(UsageError, match="exists"):
        ip.run_line_magic("agent", "new research")
    ip.run_line_magic("agent", "switch default")
    ip.run_line_magic("agent", "sessions")
    out = capsys.readouterr().out
    assert "* default" in out and "  research" in out


# ---- runs ------------------------------------------------------------------------------------------


def test_session_across_cells_with_cell_ids(ip, server):
    server.enqueue_text("Hello! I am the agent.")
    server.enqueue_text("You said hello before.")
    run(ip, "", "hello", cell_id="cell-a")
    cap = run(ip, "", "what did I say?", cell_id="cell-b")
    session = runtime_of(ip).slot().session
    users = user_entries(session)
    assert [u["message"]["cellId"] for u in users] == ["cell-a", "cell-b"]
    assert all(isinstance(u["message"]["executionCount"], int) for u in users)
    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]
    assert "You said hello before." in "".join(o.data.get("text/html", "") for o in cap.outputs)
    # exactly one journal output per run, and it is the run's last output
    journals = [o for o in cap.outputs if JOURNAL_MIME in o.data]
    assert len(journals) == 1 and JOURNAL_MIME in cap.outputs[-1].data
    ids = [e["id"] for e in journals[0].data[JOURNAL_MIME]["entries"]]
    assert ids == [e["id"] for e in session.entries[3:]]  # after the system message and the first turn
    assert journals[0].metadata["ipyagent"]["entry_ids"] == ids


def test_widget_bundle_has_static_views(ip, server):
    server.enqueue_text("ok")
    cap = run(ip, "", "hi")
    widget_outputs = [o for o in cap.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    assert widget_outputs, [list(o.data) for o in cap.outputs]
    data = widget_outputs[0].data
    assert "Context" in data["text/html"] and "Context" in data["text/markdown"] and "text/plain" in data


def test_rerun_of_a_cell_forks_before_its_previous_prompt(ip, server):
    for text in ("one", "two", "one again", "two again"):
        server.enqueue_text(text)
    run(ip, "", "first", cell_id="A")
    run(ip, "", "second", cell_id="B")
    session = runtime_of(ip).slot().session
    first_a = user_entries(session)[0]
    run(ip, "", "first (edited)", cell_id="A")  # Restart & Run All: A again, then B again
    run(ip, "", "second", cell_id="B")
    users = user_entries(session)
    assert len(users) == 4
    assert users[2]["parentId"] == first_a["parentId"]  # a sibling of the old A prompt
    path_users = [e["message"]["content"] for e in session.path()
                  if e["type"] == "message" and e["message"]["role"] == "user"]
    assert path_users == ["first (edited)", "second"]
    assert [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"] == \
        ["first (edited)", "second"]


def test_without_cell_id_it_appends(ip, server):
    server.enqueue_text("a")
    server.enqueue_text("b")
    run(ip, "", "same text")
    run(ip, "", "same text")
    session = runtime_of(ip).slot().session
    assert len([e for e in session.path() if e["type"] == "message" and e["message"]["role"] == "user"]) == 2


def test_session_and_model_options(ip, server):
    server.enqueue_text("in side session")
    run(ip, "--session side --model openai:other-model --no-tools", "hello")
    assert runtime_of(ip).active == "side"
    body = server.requests[-1].body
    assert body["model"] == "other-model" and not body.get("tools")
    assert runtime_of(ip).config.model == "openai:fake-model"  # --model is for that cell only


def test_provider_error_is_readable_not_a_traceback(ip, server):
    server.enqueue_error(400, error_type="invalid_request_error")
    cap = run(ip, "", "hi")
    text = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "Model error" in text and "Traceback" not in text
    assert len(runtime_of(ip).slot().session) == 2  # the system prompt (recorded first) and the prompt are kept


# ---- approvals -------------------------------------------------------------------------------------


def test_ask_approval_through_input(ip, server, monkeypatch, tmp_path):
    answers = iter(["y", "n"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    server.enqueue_tool_call("write", {"path": "ok.txt", "content": "yes"})
    server.enqueue_tool_call("write", {"path": "no.txt", "content": "no"})
    server.enqueue_text("done")
    run(ip, "", "write two files")
    assert (tmp_path / "ok.txt").read_text() == "yes"
    assert not (tmp_path / "no.txt").exists()
    results = [e["message"] for e in runtime_of(ip).slot().session.entries
               if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert results[1]["isError"] and "declined" in results[1]["content"][0]["text"]


def test_ask_approval_without_stdin_refuses_clearly(ip, server, monkeypatch, tmp_path):
    def no_stdin(prompt=""):
        raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")

    monkeypatch.setattr("builtins.input", no_stdin)
    server.enqueue_tool_call("bash", {"command": "touch created.txt"})
    server.enqueue_text("I could not run it.")
    cap = run(ip, "", "make a file")
    assert not (tmp_path / "created.txt").exists()
    result = [e["message"] for e in runtime_of(ip).slot().session.entries
              if e["type"] == "message" and e["message"]["role"] == "toolResult"][0]
    assert result["isError"] and "nobody can answer" in result["content"][0]["text"]
    shown = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "tool_approval" in shown


# ---- compaction --------------------------------------------------------------------------------------


def _long_session(ip, server, turns=6):
    for i in range(turns):
        server.enqueue_text(f"Answer {i}: " + "lorem ipsum dolor sit amet " * 40)
        run(ip, "", f"Question {i}: " + "please explain in detail " * 20)


def test_compact_with_focus(ip, server):
    ip.run_line_magic("config", "Agent.keep_recent_tokens = 300")
    _long_session(ip, server)
    server.enqueue_summary("## Goal\nExplain things.\n\n## Progress\n- [x] explained, focusing on the database")
    with capture_output() as cap:
        ip.run_line_magic("compact", "focus on the database")
    session = runtime_of(ip).slot().session
    assert len(session.compactions()) == 1
    summary_request = [r for r in server.requests if r.kind == "summary"][-1]
    assert "focus on the database" in json.dumps(summary_request.body)
    shown = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "Compacted:" in shown and "→" in shown
    assert JOURNAL_MIME in cap.outputs[-1].data
    assert cap.outputs[-1].data[JOURNAL_MIME]["entries"][-1]["type"] == "compaction"
    with capture_output() as cap2:
        ip.run_line_magic("agent", "summary")
    assert "focusing on the database" in cap2.outputs[0].data["text/html"]


def test_nothing_to_compact_with_an_unknown_window_says_the_kept_part_and_explore_agrees(ip, server):
    server.enqueue_text("short")
    run(ip, "", "hi")
    assert runtime_of(ip).slot().agent.budget.window() is None  # the fake model is in no table
    with capture_output() as cap:
        ip.run_line_magic("compact", "")
    shown = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "Nothing to compact" in shown and "the context window is unknown" in shown
    assert "kept recent part is 20,000 tokens" in shown and "%config Agent.context_window = N" in shown
    with capture_output() as cap:
        ip.run_line_magic("agent", "explore")
    explored = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    # one rule: the same kept part and the same sentence, drawn on the assumed window
    assert "window 128,000, assumed" in explored and "kept recent part is 20,000 tokens" in explored, explored


def test_compact_cell_form_and_nothing_to_compact(ip, server):
    server.enqueue_text("short")
    run(ip, "", "hi")
    with capture_output() as cap:
        ip.run_cell_magic("compact", "", "keep the numbers\nand the names")
    assert "Nothing to compact" in "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert server.summary_calls == 0


def test_automatic_compaction_with_small_window(ip, server):
    ip.run_line_magic("config", "Agent.context_window = 3000")
    ip.run_line_magic("config", "Agent.reserve_tokens = 500")
    ip.run_line_magic("config", "Agent.keep_recent_tokens = 400")
    ip.run_line_magic("config", "Agent.show_widget = False")
    _long_session(ip, server, turns=8)
    session = runtime_of(ip).slot().session
    assert session.compactions(), "no automatic compaction happened"
    assert server.summary_calls >= 1


# ---- commands ------------------------------------------------------------------------------------------


def test_tree_checkout_context_export(ip, server, capsys, tmp_path):
    server.enqueue_text("first answer")
    server.enqueue_text("second answer")
    run(ip, "", "first")
    run(ip, "", "second")
    session = runtime_of(ip).slot().session
    second_prompt = user_entries(session)[1]
    ip.run_line_magic("agent", f"checkout {second_prompt['id']}")
    assert session.leaf_id == second_prompt["parentId"]
    ip.run_line_magic("agent", "tree")
    out = capsys.readouterr().out
    assert second_prompt["id"] in out and "← leaf" in out
    with capture_output() as cap:
        ip.run_line_magic("agent", "context")
    text = cap.outputs[0].data["text/plain"]
    assert "system prompt" in text and "tools (" in text and "first answer" in text and "second" not in text.split(
        "first answer")[1]
    ip.run_line_magic("agent", f"export -o {tmp_path / 's.jsonl'}")
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "session" and len(lines) == 1 + len(session)
    ip.run_line_magic("agent", f"import {tmp_path / 's.jsonl'} --name copy")
    assert runtime_of(ip).active == "copy" and len(runtime_of(ip).slot().session) == len(session)
    ip.run_line_magic("agent", f"export --format markdown -o {tmp_path / 's.md'}")
    assert "first answer" in (tmp_path / "s.md").read_text()


def test_load_path_merges_by_id(ip, server, tmp_path, capsys):
    server.enqueue_text("stored answer")
    cap = run(ip, "", "stored question")
    journal = [o for o in cap.outputs if JOURNAL_MIME in o.data][0]
    nb = new_notebook([{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1,
                        "source": "%%agent\nstored question",
                        "outputs": [{"output_type": "display_data", "data": journal.data,
                                     "metadata": journal.metadata}]}])
    write_notebook(tmp_path / "other.ipynb", nb)
    before = len(runtime_of(ip).slot().session)
    ip.run_line_magic("agent", f"load {tmp_path / 'other.ipynb'}")
    assert len(runtime_of(ip).slot().session) == before  # same ids: nothing new
    runtime_of(ip).slots.clear()
    ip.run_line_magic("agent", f"load {tmp_path / 'other.ipynb'}")
    assert len(runtime_of(ip).slot("default").session) == before


def test_load_and_import_of_a_damaged_pi_file_work_and_export_keeps_every_line(ip, server, tmp_path, capsys):
    from support.corrupt import corrupt_pi_file

    data, _ = corrupt_pi_file(11, n_entries=50, kinds=("deep", "bad_bytes", "missing_parent", "pi_accepts"))
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(data)
    ip.run_line_magic("agent", f"load {damaged}")  # once a RecursionError traceback
    out = capsys.readouterr().out
    assert "loaded damaged:" in out and "nested too deeply to read" in out and "(set aside)" in out
    ip.run_line_magic("agent", "switch damaged")
    ip.run_line_magic("agent", "tree")
    tree = capsys.readouterr().out
    session = runtime_of(ip).slot().session
    orphans = [e for e in session.entries if e.get("parentId") and e["parentId"] not in session]
    assert orphans and all(e["id"] in tree for e in orphans)  # shown as roots of the tree
    ip.run_line_magic("agent", f"export -o {tmp_path / 'back.jsonl'}")
    back = (tmp_path / "back.jsonl").read_bytes().split(b"\n")
    assert all(line in back for line in data.split(b"\n"))  # the set-aside lines, the bad bytes, in place
    ip.run_line_magic("agent", f"import {damaged} --name again")
    assert runtime_of(ip).active == "again" and len(runtime_of(ip).slot().session.set_aside) == len(session.set_aside)
    server.enqueue_text("an answer after the damage")
    run(ip, "", "go on")  # the session works: a turn on top of what was loaded
    assert runtime_of(ip).slot().session.path()[-1]["message"]["role"] == "assistant"


def test_agent_import_says_what_the_notebook_stores_as_stars(ip, tmp_path, capsys, monkeypatch):
    from ipyagent.session.jsonl import dump_pi_jsonl

    monkeypatch.delenv("DATABASE_URL", raising=False)
    git_config = "credential.https://dev.azure.com.usehttppath=true\ninit.defaultbranch=master\nuser.email=wh@example.com"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    entries = chain(2)
    entries[0]["message"]["content"] = git_config
    entries[1]["message"]["content"] = "postgresql://analyst:s3cret-Passw0rd@db.example.com/sales"
    source = tmp_path / "mine.jsonl"
    source.write_text(dump_pi_jsonl(header, entries), encoding="utf-8")
    ip.run_line_magic("agent", f"import {source}")
    out = capsys.readouterr().out
    assert "1 value(s) that look like credentials" in out and f"stored as *** in the notebook: entry {entries[1]['id']}" in out
    ip.run_line_magic("agent", f"export -o {tmp_path / 'back.jsonl'}")
    back = (tmp_path / "back.jsonl").read_text(encoding="utf-8")
    assert json.dumps(git_config) in back and "s3cret-Passw0rd" not in back  # the lines of git config intact


def test_hydration_from_disk_tells_the_model_about_the_reset_once(monkeypatch, tmp_path, server):
    from ipyagent.core import Session
    from ipyagent.store.ipynb import write_sessions_into_notebook
    from ipyagent.store.schema import NotebookSessions

    s = Session()
    s.append_message({"role": "user", "content": "remember 7", "timestamp": 1})
    nb = write_sessions_into_notebook(new_notebook(), NotebookSessions.from_session("default", s, {}))
    path = tmp_path / "nb.ipynb"
    write_notebook(path, nb)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    shell = start_ipython()
    forget_extension(shell)
    try:
        runtime = extension.load(shell)
        session = runtime.slot().session
        stored_leaf = session.leaf_id
        # loading alone changes nothing: the notice waits for a prompt a model answers
        assert [e["id"] for e in session.entries] == [e["id"] for e in s.entries]
        runtime.config.model = "openai:fake-model"
        server.enqueue_text("It was 7.")
        run(shell, "", "what number?")
        sent = json.dumps(server.requests[-1].body["messages"])
        assert "remember 7" in sent and "namespace was reset" in sent
        session = runtime.slot().session
        resets = [e for e in session.entries if e.get("customType") == "ipyagent.kernel_reset"]
        assert len(resets) == 1 and resets[0]["parentId"] == stored_leaf  # on the path, before the prompt
        assert resets[0] in session.path()
        server.enqueue_text("Still 7.")
        run(shell, "", "and now?")
        assert len([e for e in runtime.slot().session.entries if e.get("customType") == "ipyagent.kernel_reset"]) == 1
    finally:
        extension.unload(shell)
        forget_extension(shell)


# ---- persistence through a bridge ---------------------------------------------------------------------


class _FakeBridge:
    """A bridge whose frontend acks only when told to (the real one is tested in test_bridge_kernel)."""

    def __init__(self):
        self.connected = True
        self.sent: list[list[str]] = []
        self._acked: set[str] = set()
        self._all: list[str] = []

    is_open = True
    path = None  # the page gave no notebook path
    answers_during_cells = False

    def wait_for_frontend(self):
        return self.connected

    def send_entries(self, name, entries, *, leaf, header=None, settings=None, active=True, resend=True,
                     skip_empty=False):
        ids = [e["id"] for e in entries]
        self.sent.append(ids)
        self._all += [i for i in ids if i not in self._all]

    def unacked(self, name=None):
        ids = [i for i in self._all if i not in self._acked]
        return {name: ids} if ids else {}

    def ack_all(self):
        self._acked.update(self._all)


def test_bridge_when_acked_journal_for_what_was_never_acked(ip, server):
    bridge = _FakeBridge()
    runtime_of(ip).bridge = runtime_of(ip).persister.bridge = bridge
    server.enqueue_text("one")
    cap = run(ip, "", "first")
    assert not [o for o in cap.outputs if JOURNAL_MIME in o.data]
    # the entries went as they were made (user, then assistant), and once more with the run's end
    ids = [e["id"] for e in runtime_of(ip).slot().session.entries]  # system prompt, user, assistant
    assert bridge.sent[:3] == [[i] for i in ids]  # each entry as it was made; then the run's end
    bridge.ack_all()
    server.enqueue_text("two")
    cap = run(ip, "", "second")
    assert not [o for o in cap.outputs if JOURNAL_MIME in o.data]  # acked: no journal
    server.enqueue_text("three")  # the frontend stopped acknowledging after the first run
    cap = run(ip, "", "third")
    journals = [o for o in cap.outputs if JOURNAL_MIME in o.data]
    assert len(journals) == 1
    ids = [e["id"] for e in journals[0].data[JOURNAL_MIME]["entries"]]
    assert ids == [e["id"] for e in runtime_of(ip).slot().session.entries[3:]]  # second's (never acked) and third's


def test_shell_config_reaches_the_configurable(monkeypatch):
    shell = start_ipython()
    forget_extension(shell)
    shell.config.Agent.reserve_tokens = 1234  # what c.Agent.reserve_tokens in ipython_config.py does
    try:
        runtime = extension.load(shell)
        assert runtime.config.reserve_tokens == 1234
        assert runtime.run_config().compaction.reserve_tokens == 1234
    finally:
        extension.unload(shell)
        forget_extension(shell)


def test_push_after_load_is_absorbed_at_the_next_run(ip, server):
    from ipyagent.core import Session
    from ipyagent.store.schema import NotebookSessions

    s = Session()
    s.append_message({"role": "user", "content": "the colour is TEAL", "timestamp": 1})
    pushed = NotebookSessions.from_session("default", s, {}).to_dict()
    bridge_mod.receive_push(json.dumps(pushed), source="test")  # e.g. the extension loaded at startup
    server.enqueue_text("TEAL.")
    run(ip, "", "which colour?")
    sent = json.dumps(server.requests[-1].body["messages"])
    assert "the colour is TEAL" in sent and "namespace was reset" in sent
    bridge_mod.receive_push(json.dumps(pushed), source="reload")  # a page reload pushes again: nothing new
    before = len(runtime_of(ip).slot().session)
    ip.run_line_magic("agent", "sessions")
    assert len(runtime_of(ip).slot().session) == before


def test_checkout_with_summary_and_branches_in_the_tree(ip, server, capsys):
    for text in ("a1", "a2", "b2"):
        server.enqueue_text(text)
    run(ip, "", "first")
    run(ip, "", "second")
    session = runtime_of(ip).slot().session
    first_answer = session.entries[2]["id"]  # after the system message and the prompt
    server.enqueue_summary("We tried the second question and got a2.")
    ip.run_line_magic("agent", f"checkout {first_answer} --summarize --focus the-answer")
    assert session.leaf_id != first_answer and session.get(session.leaf_id)["type"] == "branch_summary"
    assert "the-answer" in json.dumps([r.body for r in server.requests if r.kind == "summary"][-1])
    run(ip, "", "second, differently")
    ip.run_line_magic("agent", "tree")
    out = capsys.readouterr().out
    assert "branch summary" in out and "← leaf" in out
    assert len([line for line in out.splitlines() if line.startswith("*")]) == 6  # the current path
    sent = json.dumps(server.requests[-1].body["messages"])
    assert "got a2" in sent and "a1" in sent


def test_compact_without_anything_configured_is_a_usage_error(ip, monkeypatch):
    monkeypatch.delenv("IPYAGENT_MODEL", raising=False)
    runtime_of(ip).config.model = ""
    with pytest.raises(UsageError, match="No model"):
        ip.run_line_magic("compact", "")


def test_reload_ext_keeps_the_sessions(ip, server):
    server.enqueue_text("kept")
    run(ip, "", "hello")
    before = [e["id"] for e in runtime_of(ip).slot().session.entries]
    extension.unload(ip)
    assert "agent" not in ip.magics_manager.magics["cell"]
    extension.load(ip)
    assert "agent" in ip.magics_manager.magics["cell"]
    assert [e["id"] for e in runtime_of(ip).slot().session.entries] == before


def test_close_dangling_calls_after_an_interrupt():
    from ipyagent.core import Session

    s = Session()
    s.append_message({"role": "user", "content": "go", "timestamp": 1})
    s.append_message({"role": "assistant", "stopReason": "toolUse", "timestamp": 2, "content": [
        {"type": "toolCall", "id": "a", "name": "python", "arguments": {}},
        {"type": "toolCall", "id": "b", "name": "bash", "arguments": {}}]})
    s.append_message({"role": "toolResult", "toolCallId": "a", "toolName": "python",
                      "content": [{"type": "text", "text": "ok"}], "isError": False, "timestamp": 3})
    agent = AgentLoop(s)
    assert agent.close_dangling_calls() == 1
    assert s.path()[-1]["message"]["toolCallId"] == "b" and s.path()[-1]["message"]["isError"]
    assert agent.close_dangling_calls() == 0


@pytest.mark.slow
def test_a_tree_of_200000_entries_is_capped_and_says_how_to_see_the_rest(ip, capsys):
    from ipyagent.core import Session
    from ipyagent.kernel.magics.sessions import TREE_LIMIT
    from ipyagent.session.messages import user_message

    entries, parent = [], None
    for i in range(200_000):
        entries.append({"type": "message", "id": f"{i:08x}", "parentId": parent,
                        "timestamp": "2026-12-01T00:00:00.000Z", "message": user_message(f"step {i}: " + "words " * 5)})
        parent = entries[-1]["id"]
    big = Session(None, entries, parent)
    runtime_of(ip).slot().session = big
    ip.run_line_magic("agent", "tree")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == TREE_LIMIT + 1 and len(out) < 100_000  # it was 6.8 MB
    assert "… 199,600 entries not shown (`%agent tree --all` shows all 200,000, `--limit N` about N lines) …" in out
    assert lines[-1].endswith("← leaf") and "step 199999" in lines[-1] and "step 0:" in lines[0]
    ip.run_line_magic("agent", "tree --limit 40")
    assert len(capsys.readouterr().out.splitlines()) == 41
    big.branch(big.entries[1000]["id"])  # the leaf inside the part left out: its line is shown anyway
    ip.run_line_magic("agent", "tree --limit 40")
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 42 and shown[11].endswith("← leaf") and "step 1000:" in shown[11]
    ip.run_line_magic("agent", "tree --all")
    assert len(capsys.readouterr().out.splitlines()) == 200_000


def test_status_shows_the_budgets_derived_from_the_window_and_set_ones_that_cannot_fit(ip):
    ip.run_line_magic("config", "Agent.context_window = 2048")
    assert runtime_of(ip).config.reserve_tokens is None and runtime_of(ip).config.keep_recent_tokens is None  # not set

    def status() -> str:
        with capture_output() as captured:
            ip.run_line_magic("agent", "status")
        shown = [o.data.get("text/plain", "") for o in captured.outputs]
        return "\n".join(shown) + captured.stdout

    text = status()
    assert "compacts above 1,536 · reserve 512 (scaled to the 2,048-token window)" in text
    assert "above -" not in text
    ip.run_line_magic("config", "Agent.reserve_tokens = 16384")
    ip.run_line_magic("config", "Agent.keep_recent_tokens = 20000")
    text = status()
    assert "compacts above 1,536" in text and "above -" not in text
    assert text.count("cannot work with a 2,048-token window") == 1


def test_small_wording_of_mcp_masks_status_and_tool_rounds(ip, server, tmp_path):
    # %agent mcp, a server defined and not started: its definitions are not "~0 tokens"
    ip.run_line_magic("config", 'Agent.mcp_servers = {"time": {"command": "no-such-mcp-server"}}')
    ip.run_line_magic("config", "Agent.mcp_project_files = False")
    with capture_output() as cap:
        ip.run_line_magic("agent", "mcp")
    assert "~0 tokens" not in cap.stdout and "no server has started yet" in cap.stdout, cap.stdout
    ip.run_line_magic("config", "Agent.mcp_servers = {}")
    # one masked tool result: singular, and unmasking does not repeat the mask's hint
    ip.run_line_magic("config", 'Agent.tool_approval = "auto"')
    server.enqueue_tool_call("python", {"code": "print(6 * 7)"})
    server.enqueue_text("42.")
    computed = run(ip, "", "compute")
    with capture_output() as masked:
        ip.run_line_magic("agent", "mask --tool-results-before 0")
    assert "masked 1 tool result in" in masked.stdout and "recall(entry_id)" in masked.stdout
    with capture_output() as context:
        ip.run_line_magic("agent", "context")
    shown = context.stdout + "".join(o.data.get("text/plain", "") for o in context.outputs)
    assert "masked: 1 tool result sent" in shown, shown
    with capture_output() as unmasked:
        ip.run_line_magic("agent", "unmask")
    assert "unmasked 1 tool result in" in unmasked.stdout and "recall(entry_id)" not in unmasked.stdout
    # free calls to a server on this machine: the cost says so, in the same words as the widget
    # (issue 37: the widget said "cost unknown (42 unpriced calls)" beside status's "free")
    with capture_output() as status:
        ip.run_line_magic("agent", "status")
    assert "cost: free" in status.stdout and "unpriced" not in status.stdout, status.stdout
    widget = "".join(o.data.get("text/plain", "") for o in computed.outputs)
    assert "cost: free" in widget and "unpriced" not in widget, widget
    # one tool round is one round
    ip.run_line_magic("config", "Agent.max_tool_rounds = 1")
    server.enqueue_tool_call("python", {"code": "1"})
    out = run(ip, "", "again")
    assert "Stopped after 1 tool round (Agent.max_tool_rounds)" in out.stdout + "".join(
        o.data.get("text/plain", "") for o in out.outputs)
