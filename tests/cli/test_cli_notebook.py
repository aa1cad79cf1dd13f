"""``ipyagent lift | export | import`` and ``inspect`` / ``compact`` on notebooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ipyagent.cli import main
from ipyagent.core import Session
from ipyagent.display.journal_view import journal_bundle
from ipyagent.session.jsonl import dump_pi_jsonl
from ipyagent.session.messages import tool_call_block, tool_result_message, user_message
from ipyagent.store.ipynb import new_notebook, read_notebook, write_notebook, write_sessions_into_notebook
from ipyagent.store.schema import NotebookSessions, StoredSession
from support.builders import chain
from support.corrupt import corrupt_pi_file
from support.sessiongen import generate_session

HEADER = {"type": "session", "version": 3, "id": "3f0c2b9e-0000-4000-a000-000000000003",
          "timestamp": "2026-01-01T00:00:00.000Z", "cwd": ""}


def make_notebook(path, entries=None, journal=None, name="default"):
    nb = new_notebook()
    if entries is not None:
        write_sessions_into_notebook(nb, NotebookSessions(name, {name: StoredSession(HEADER, entries[-1]["id"], {}, entries)}))
    if journal is not None:
        data, meta = journal_bundle(name, HEADER, journal[-1]["id"], {}, journal)
        nb["cells"][0]["outputs"] = [{"output_type": "display_data", "data": data, "metadata": meta}]
    write_notebook(path, nb)
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---- lift ----------------------------------------------------------------------------------------


def test_lift_moves_the_journal_and_is_idempotent(tmp_path, capsys):
    path = make_notebook(tmp_path / "nb.ipynb", entries=chain(2), journal=chain(3, 2, "00000001"))
    code, out, err = run(capsys, "lift", path)
    assert code == 0 and "lifted 3 entries from 1 journal output(s)" in out and err == ""
    stored = read_notebook(path)["metadata"]["ipyagent"]["sessions"]["default"]
    assert len(stored["entries"]) == 5 and stored["leaf"] == "00000004"
    assert read_notebook(path)["cells"][0]["outputs"]  # the journal output stays
    code, out, _ = run(capsys, "lift", path)
    assert code == 0 and "nothing to lift" in out


def test_lift_to_an_output_file(tmp_path, capsys):
    src = make_notebook(tmp_path / "nb.ipynb", journal=chain(2))
    before = src.read_bytes()
    code, out, _ = run(capsys, "lift", src, "-o", tmp_path / "out.ipynb")
    assert code == 0 and src.read_bytes() == before
    assert len(read_notebook(tmp_path / "out.ipynb")["metadata"]["ipyagent"]["sessions"]["default"]["entries"]) == 2


def test_lift_errors_go_to_stderr(tmp_path, capsys):
    code, out, err = run(capsys, "lift", tmp_path / "missing.ipynb")
    assert code == 2 and out == "" and "ipyagent lift: no such file" in err
    (tmp_path / "junk.ipynb").write_text("not json at all")
    code, out, err = run(capsys, "lift", tmp_path / "junk.ipynb")
    assert code == 2 and "is not valid JSON" in err
    (tmp_path / "list.ipynb").write_text("[]")
    code, _, err = run(capsys, "lift", tmp_path / "list.ipynb")
    assert code == 2 and "is not a notebook" in err


def test_lift_reports_problems_but_keeps_going(tmp_path, capsys):
    entries = chain(3)
    entries[1]["parentId"] = "nowhere!"
    path = make_notebook(tmp_path / "nb.ipynb", entries=entries)
    before = path.read_bytes()
    code, out, err = run(capsys, "lift", path)
    assert code == 0
    assert "parent 'nowhere!' is missing; the entry is kept as a root" in err
    # the orphan keeps its parentId (as Pi does): nothing to rewrite
    assert "nothing to lift" in out and path.read_bytes() == before
    entries[2]["parentId"] = 5  # a wrong shape: set aside, so the checked metadata is written
    make_notebook(path, entries=entries)
    code, out, err = run(capsys, "lift", path)
    assert code == 0 and "'parentId' must be a string or null" in err
    assert "wrote the checked metadata" in out and "see the problems above" in out
    assert read_notebook(path)["metadata"]["ipyagent"]["set_aside"][0]["raw"]["parentId"] == 5


# ---- import / export -----------------------------------------------------------------------------


def test_import_then_export_is_identical(tmp_path, capsys):
    header, entries = generate_session(11, 400)
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(header, entries), encoding="utf-8")
    nb = tmp_path / "new.ipynb"
    code, out, err = run(capsys, "import", jsonl, nb)
    assert code == 0 and "imported session 'default': 400 entries" in out
    made = read_notebook(nb)
    assert made["metadata"]["kernelspec"]["name"] == "python3" and made["nbformat"] == 4
    assert made["metadata"]["ipyagent"]["active"] == "default"
    code, _, _ = run(capsys, "export", nb, "--format", "pi", "-o", tmp_path / "back.jsonl")
    assert code == 0
    assert (tmp_path / "back.jsonl").read_bytes() == jsonl.read_bytes()
    code, out, _ = run(capsys, "export", nb, "--format", "pi")
    assert out == jsonl.read_text(encoding="utf-8")


GIT_CONFIG = ("credential.https://dev.azure.com.usehttppath=true\ninit.defaultbranch=master\nuser.name=wh\n"
              "user.email=wh@example.com\n")
DATABASE = "postgresql://analyst:s3cret-Passw0rd@db.example.com:5432/sales"


def _session_file(path, *texts):
    entries = chain(len(texts))
    for entry, text in zip(entries, texts):
        entry["message"]["content"] = text
    path.write_text(dump_pi_jsonl(HEADER, entries), encoding="utf-8")
    return [e["id"] for e in entries]


def test_a_credential_pattern_never_crosses_a_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    jsonl, nb, back = tmp_path / "s.jsonl", tmp_path / "nb.ipynb", tmp_path / "back.jsonl"
    _session_file(jsonl, "Here is my config:\n" + GIT_CONFIG, "and a mail: wh@example.com\tor https://x.org/a@b")
    code, out, _ = run(capsys, "import", jsonl, nb)
    assert code == 0 and "replaced" not in out
    code, _, err = run(capsys, "export", nb, "--format", "pi", "-o", back)
    assert code == 0 and "replaced" not in err
    assert back.read_bytes() == jsonl.read_bytes()  # four lines of git config, byte for byte


def test_an_import_says_what_it_replaced_and_keep_secrets_keeps_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    jsonl, nb = tmp_path / "s.jsonl", tmp_path / "nb.ipynb"
    ids = _session_file(jsonl, "Connect to the sales database.", f"I used {DATABASE} for it.", GIT_CONFIG)
    code, out, _ = run(capsys, "import", jsonl, nb)
    assert code == 0
    assert "replaced 1 value(s) that look like credentials" in out and f"entry {ids[1]}" in out
    assert ids[0] not in out and ids[2] not in out and "--keep-secrets" in out
    stored = nb.read_text(encoding="utf-8")
    assert "s3cret-Passw0rd" not in stored and "postgresql://***@db.example.com:5432/sales" in stored
    assert "user.email=wh@example.com" in stored

    kept = tmp_path / "kept.ipynb"
    code, out, _ = run(capsys, "import", jsonl, kept, "--keep-secrets")
    assert code == 0 and "kept 1 value(s) that look like credentials" in out and f"(--keep-secrets), in entry {ids[1]}" in out
    assert DATABASE in kept.read_text(encoding="utf-8")
    code, _, err = run(capsys, "export", kept, "--format", "pi", "-o", tmp_path / "as-is.jsonl", "--keep-secrets")
    assert code == 0 and "replaced" not in err
    assert (tmp_path / "as-is.jsonl").read_bytes() == jsonl.read_bytes()
    code, out, err = run(capsys, "export", kept, "--format", "pi")
    assert code == 0 and "s3cret-Passw0rd" not in out
    assert "replaced 1 value(s) that look like credentials" in err and f"entry {ids[1]}" in err


def test_import_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(HEADER, chain(4)))
    nb = make_notebook(tmp_path / "nb.ipynb", entries=chain(2))
    before = nb.read_bytes()
    code, out, err = run(capsys, "import", jsonl, nb)
    assert code == 2 and "already holds a session named 'default' (2 entries)" in err and "--force" in err
    assert nb.read_bytes() == before
    code, out, _ = run(capsys, "import", jsonl, nb, "--session", "second")
    assert code == 0
    md = read_notebook(nb)["metadata"]["ipyagent"]
    assert set(md["sessions"]) == {"default", "second"} and md["active"] == "second"
    code, out, _ = run(capsys, "import", jsonl, nb, "--force")
    assert code == 0 and "replaced session 'default'" in out
    assert len(read_notebook(nb)["metadata"]["ipyagent"]["sessions"]["default"]["entries"]) == 4


def test_import_errors(tmp_path, capsys):
    code, _, err = run(capsys, "import", tmp_path / "nope.jsonl", tmp_path / "nb.ipynb")
    assert code == 2 and "no such file" in err
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(HEADER, chain(1)) + "{broken\n")
    code, _, err = run(capsys, "import", jsonl, tmp_path / "nb.txt")
    assert code == 2 and "ends with .ipynb" in err and "not valid JSON" in err  # the file's problem is reported too


def test_import_records_the_model(tmp_path, capsys):
    entries = [{"type": "model_change", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "provider": "anthropic", "modelId": "claude-sonnet-4-5"}]
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(HEADER, entries))
    run(capsys, "import", jsonl, tmp_path / "nb.ipynb")
    settings = read_notebook(tmp_path / "nb.ipynb")["metadata"]["ipyagent"]["sessions"]["default"]["settings"]
    assert settings == {"model": "anthropic:claude-sonnet-4-5"}


def test_export_markdown_shows_compactions(tmp_path, capsys):
    header, entries = generate_session(12, 300, end="assistant")
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(header, entries), encoding="utf-8")
    nb = tmp_path / "nb.ipynb"
    run(capsys, "import", jsonl, nb)
    code, out, err = run(capsys, "export", nb, "--format", "markdown")
    assert code == 0
    compactions = [e for e in Session.from_file(jsonl).path() if e["type"] == "compaction"]
    assert compactions, "the generated session should hold a compaction"
    assert out.startswith("# ipyagent session `default`")
    assert out.count("### Compaction") == len(compactions)
    assert "**kept**" in out and "## User" in out and "## Assistant" in out
    code, _, err = run(capsys, "export", nb, "--format", "markdown", "-o", tmp_path / "t.md")
    assert code == 0 and (tmp_path / "t.md").read_text(encoding="utf-8") == out


def test_export_picks_sessions_and_fails_clearly(tmp_path, capsys):
    nb = make_notebook(tmp_path / "nb.ipynb", entries=chain(2), name="alpha")
    code, out, _ = run(capsys, "export", nb, "--format", "pi", "--session", "alpha")
    assert code == 0 and len(out.splitlines()) == 3
    code, out, err = run(capsys, "export", nb, "--format", "pi", "--session", "beta")
    assert code == 2 and out == "" and "no session named 'beta'" in err and "'alpha'" in err
    empty = tmp_path / "empty.ipynb"
    write_notebook(empty, new_notebook())
    code, _, err = run(capsys, "export", empty, "--format", "markdown")
    assert code == 2 and "holds no ipyagent session" in err
    code, _, err = run(capsys, "export", tmp_path / "missing.ipynb", "--format", "pi")
    assert code == 2 and "no such file" in err
    with pytest.raises(SystemExit) as exit_info:  # argparse: a bad --format
        main(["export", str(nb), "--format", "html"])
    assert exit_info.value.code == 2


def test_export_notes_a_leaf_that_is_not_the_last_entry(tmp_path, capsys):
    entries = chain(4)
    nb = tmp_path / "nb.ipynb"
    md = NotebookSessions("default", {"default": StoredSession(HEADER, "00000001", {}, entries)})
    write_notebook(nb, write_sessions_into_notebook(new_notebook(), md))
    code, out, err = run(capsys, "export", nb, "--format", "pi")
    assert code == 0 and "Pi resumes a session file at its last entry" in err


# ---- inspect / compact on notebooks --------------------------------------------------------------


def test_inspect_and_dry_run_compact_read_notebooks(tmp_path, capsys):
    header, entries = generate_session(13, 500)
    nb = tmp_path / "nb.ipynb"
    write_notebook(nb, write_sessions_into_notebook(new_notebook(), NotebookSessions(
        "main", {"main": StoredSession(header, entries[-1]["id"], {}, entries)})))
    code, out, _ = run(capsys, "inspect", nb, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["entries"] == 500 and report["session_id"] == header["id"] and report["problems"] == []
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(dump_pi_jsonl(header, entries), encoding="utf-8")
    code, out_jsonl, _ = run(capsys, "inspect", jsonl, "--json")
    from_jsonl = json.loads(out_jsonl)
    # the notebook names its session "main"; the Pi file's name is its latest session_info entry's
    pi_name = [e["name"] for e in entries if e["type"] == "session_info"][-1]
    assert (report.pop("session_name"), from_jsonl.pop("session_name")) == ("main", pi_name)
    assert from_jsonl == report  # the notebook and the Pi file are the same session
    code, plan_nb, _ = run(capsys, "compact", nb, "--dry-run", "--json", "--keep-recent-tokens", "2000")
    code2, plan_jsonl, _ = run(capsys, "compact", jsonl, "--dry-run", "--json", "--keep-recent-tokens", "2000")
    assert code == code2 == 0 and json.loads(plan_nb) == json.loads(plan_jsonl)
    code, _, err = run(capsys, "inspect", nb, "--session", "other")
    assert code == 2 and "no session named 'other'" in err


def test_inspect_reports_a_journal_only_notebook(tmp_path, capsys):
    nb = make_notebook(tmp_path / "nb.ipynb", journal=chain(3))
    code, out, _ = run(capsys, "inspect", nb, "--json")
    assert code == 0 and json.loads(out)["entries"] == 3


def test_compact_a_notebook_through_a_summary_model(tmp_path):
    from ipyagent.testing import FakeProviderServer

    session = Session()
    for i in range(10):
        session.append_message(user_message(f"step {i}: " + "please look " * 40))
        session.append_message({"role": "assistant", "content": [tool_call_block(f"c{i}", "read", {"path": f"m{i}.py"})],
                                "usage": {"input": 0, "output": 0}, "stopReason": "toolUse", "timestamp": 1})
        session.append_message(tool_result_message(f"c{i}", "read", "code " * 300))
    nb = tmp_path / "nb.ipynb"
    notebook = new_notebook()
    notebook["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "visible\n"}]
    write_notebook(nb, write_sessions_into_notebook(notebook, NotebookSessions.from_session("default", session, {})))
    cells_before = read_notebook(nb)["cells"]
    with FakeProviderServer() as server:
        server.enqueue_summary("## Goal\nRead the modules.")
        done = subprocess.run([sys.executable, "-m", "ipyagent.cli", "compact", str(nb), "--summary-model",
                               "openai:gpt-4.1-mini", "--keep-recent-tokens", "400", "--json"],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OPENAI_BASE_URL": server.openai_base_url,
                                   "OPENAI_API_KEY": "sk-test-notebook-456"})
    assert done.returncode == 0, done.stderr
    assert server.summary_calls == 1
    after = read_notebook(nb)
    assert after["cells"] == cells_before  # compaction never touches the visible cells
    stored = after["metadata"]["ipyagent"]["sessions"]["default"]
    assert stored["entries"][-1]["type"] == "compaction"
    assert stored["entries"][-1]["summary"].startswith("## Goal\nRead the modules.")
    assert stored["leaf"] == stored["entries"][-1]["id"]
    assert len(stored["entries"]) == len(session.entries) + 1
    assert "sk-test-notebook-456" not in nb.read_text()


def test_the_console_script_exits_non_zero_with_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ipyagent.cli", "lift", str(tmp_path / "none.ipynb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and "no such file" in done.stderr


@pytest.mark.kernel
def test_a_journal_written_by_a_real_kernel_and_saved_by_nbclient_lifts(tmp_path, capsys):
    """The journal output goes through a real kernel's display_data, nbclient and nbformat's writer."""
    import nbformat
    from nbclient import NotebookClient

    entries = chain(3)
    code = ("from ipyagent.display.journal_view import journal_bundle\n"
            "from IPython.display import display\n"
            f"data, meta = journal_bundle('default', {HEADER!r}, '00000002', {{'model': 'm'}}, {entries!r})\n"
            "display(data, raw=True, metadata=meta)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    path = tmp_path / "ran.ipynb"
    nbformat.write(nb, str(path))
    before = path.read_text(encoding="utf-8")
    code_, out, err = run(capsys, "lift", path)
    assert code_ == 0, err
    assert "lifted 3 entries from 1 journal output(s)" in out
    after = path.read_text(encoding="utf-8")
    cut = '\n "metadata": {'
    assert before.split(cut)[0] == after.split(cut)[0]
    stored = read_notebook(path)["metadata"]["ipyagent"]["sessions"]["default"]
    assert stored["entries"] == entries and stored["leaf"] == "00000002" and stored["settings"] == {"model": "m"}
    assert Session.from_file(path).leaf_id == "00000002"


# ---- damaged Pi files: nothing lost --------------------------------------------------------------


def test_a_damaged_pi_file_comes_back_byte_for_byte_through_the_console_script(tmp_path):
    data, _ = corrupt_pi_file(3, n_entries=80, kinds=("deep", "bad_bytes", "duplicate", "missing_parent", "garbage",
                                                       "pi_accepts"))
    damaged, nb, back = tmp_path / "damaged.jsonl", tmp_path / "nb.ipynb", tmp_path / "back.jsonl"
    damaged.write_bytes(data)

    def ipyagent(*argv):
        return subprocess.run([sys.executable, "-m", "ipyagent", *map(str, argv)], capture_output=True,
                              timeout=120)

    for argv in (["inspect", damaged], ["compact", damaged, "--dry-run", "--json"]):
        done = ipyagent(*argv)
        assert done.returncode == 0 and b"Traceback" not in done.stderr and b"set aside" in done.stderr
    done = ipyagent("import", damaged, nb)
    assert done.returncode == 0 and b"kept under metadata.ipyagent.set_aside" in done.stdout
    stored = read_notebook(nb)["metadata"]["ipyagent"]
    assert stored["set_aside"] and all(item["session"] == "default" for item in stored["set_aside"])
    done = ipyagent("export", nb, "--format", "pi", "-o", back)
    assert done.returncode == 0 and b"set-aside line(s) in their places" in done.stderr
    assert back.read_bytes() == data  # every line, in its place, the bad bytes and the parentIds as they were
    done = ipyagent("export", damaged, "--format", "pi")  # straight from the Pi file, to standard output
    assert done.returncode == 0 and done.stdout == data
    done = ipyagent("inspect", nb)
    assert done.returncode == 0 and b"line(s) of the Pi file could not be loaded" in done.stdout


def test_import_force_replaces_the_set_aside_lines_of_the_session_it_replaces(tmp_path, capsys):
    damaged, clean, nb = tmp_path / "damaged.jsonl", tmp_path / "clean.jsonl", tmp_path / "nb.ipynb"
    damaged.write_text(dump_pi_jsonl(HEADER, chain(3)) + "{half a line\n", encoding="utf-8")
    clean.write_text(dump_pi_jsonl(HEADER, chain(2)), encoding="utf-8")
    assert run(capsys, "import", damaged, nb)[0] == 0
    assert run(capsys, "import", damaged, nb, "--session", "other")[0] == 0
    assert [item["session"] for item in read_notebook(nb)["metadata"]["ipyagent"]["set_aside"]] == ["default", "other"]
    code, out, _ = run(capsys, "import", clean, nb, "--force")
    assert code == 0 and "replaced session 'default'" in out
    assert [item["session"] for item in read_notebook(nb)["metadata"]["ipyagent"]["set_aside"]] == ["other"]
    code, out, _ = run(capsys, "export", nb, "--format", "pi", "--session", "default")
    assert out == clean.read_text(encoding="utf-8")


def test_lift_in_place_keeps_a_dangling_leaf_under_set_aside(tmp_path, capsys):
    path = make_notebook(tmp_path / "nb.ipynb", entries=chain(3))
    nb = read_notebook(path)
    nb["metadata"]["ipyagent"]["sessions"]["default"]["leaf"] = "0ddba11e"
    write_notebook(path, nb)
    code, out, err = run(capsys, "lift", path)
    assert code == 0 and "leaf '0ddba11e' is not among the loaded entries" in err
    md = read_notebook(path)["metadata"]["ipyagent"]
    assert md["sessions"]["default"]["leaf"] == chain(3)[-1]["id"]
    assert [(item["raw"], item["session"]) for item in md["set_aside"]] == [("0ddba11e", "default")]
    before = path.read_bytes()
    code, out, _ = run(capsys, "lift", path)  # idempotent: the kept leaf is not added twice
    assert code == 0 and "nothing to lift" in out and path.read_bytes() == before


# ---- a hostile chunk key ----------------------------------------------------------------------------

HUGE_KEY = "ipyagent/" + "7" * 5000  # over Python's integer-string limit (4,300 digits)


def hostile_chunk_notebook(path):
    """A layout-3 notebook of three entries, and one more under a chunk key of 5,000 digits."""
    nb = write_sessions_into_notebook(new_notebook(), NotebookSessions(
        "default", {"default": StoredSession(HEADER, "00000002", {}, chain(3))}), 3)
    nb["metadata"][HUGE_KEY] = {"session": "default", "ids": ["0000000f"], "entries": json.dumps(
        [{**chain(1)[0], "id": "0000000f"}]), "leaf": "0000000f"}
    path.write_text(json.dumps(nb))
    return path


def test_a_chunk_key_of_5000_digits_is_set_aside_by_export_inspect_and_lift(tmp_path, capsys):
    nb = hostile_chunk_notebook(tmp_path / "nb.ipynb")
    code, out, err = run(capsys, "export", nb, "--format", "pi")
    assert code == 0, err
    assert [json.loads(line).get("id") for line in out.splitlines()[1:]] == ["00000000", "00000001", "00000002"]
    assert "Traceback" not in err
    code, out, err = run(capsys, "inspect", nb)
    assert code == 0 and "Traceback" not in err
    code, out, err = run(capsys, "lift", nb)
    assert code == 0, err
    metadata = read_notebook(nb)["metadata"]
    aside = metadata["ipyagent"].get("set_aside") or []
    # kept where it was, or (after a rewrite) under the index's set_aside: never lost
    assert HUGE_KEY in metadata or [item["where"] for item in aside] == [HUGE_KEY]


@pytest.mark.kernel
def test_lift_scrubs_a_key_a_journal_output_carried(tmp_path, capsys, monkeypatch):
    """A real kernel (nbclient: no bridge, so the run ends with a journal output) whose python
    call printed a token read from a file — no key there, so its journal keeps it. Lifted where
    that token is configured (DEPLOY_TOKEN), it reaches the metadata as ***: clearing the
    outputs then leaves it nowhere in the file. --keep-secrets lifts it as it is."""
    import nbformat
    from nbclient import NotebookClient

    from ipyagent.bridge.headless import kernel_environment
    from ipyagent.testing import FakeProviderServer

    token = "dpl_0123456789abcdef-from-a-file"
    (tmp_path / "token.txt").write_text(token)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext ipyagent\n%config Agent.model = 'openai:fake-model'\n"
                                          "%config Agent.tool_approval = 'auto'"),
                nbformat.v4.new_code_cell("%%agent\nWhat is in token.txt?")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with FakeProviderServer() as server, kernel_environment(OPENAI_BASE_URL=server.openai_base_url,
                                                            OPENAI_API_KEY="sk-test-not-a-real-key",
                                                            IPYAGENT_MODEL=None, JPY_SESSION_NAME=None):
        server.enqueue_tool_call("python", {"code": "print(open('token.txt').read())"})
        server.enqueue_text("It holds a deploy token.")
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    path = tmp_path / "ran.ipynb"
    nbformat.write(nb, str(path))
    assert token in path.read_text()  # in the journal output (and the tool block)
    kept = tmp_path / "kept.ipynb"

    monkeypatch.setenv("DEPLOY_TOKEN", token)
    code, out, err = run(capsys, "lift", path, "--keep-secrets", "-o", kept)
    assert code == 0 and "lifted" in out and token in json.dumps(read_notebook(kept)["metadata"])
    code, out, err = run(capsys, "lift", path)
    assert code == 0, err
    assert "lifted" in out and "replaced 1 value(s) that look like credentials" in err, (out, err)
    lifted = read_notebook(path)
    assert token not in json.dumps(lifted["metadata"])
    results = [e for e in lifted["metadata"]["ipyagent"]["sessions"]["default"]["entries"]
               if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert results[0]["message"]["content"][0]["text"] == "***"
    for cell in lifted["cells"]:  # "Clear all outputs"
        cell["outputs"] = []
    write_notebook(path, lifted)
    assert token not in path.read_text()
