"""read, ls, grep and find read freely inside the notebook's folder and ask outside it (symlinks
and ``..`` resolved); read and grep never read unboundedly, nor block on a FIFO or a device."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agent.tools import ToolContext, get_tool, run_tool_call
from ipyagent.agent.tools.builtin import read as read_mod
from support.builders import Approver


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """tmp/project (the notebook's folder) with data, and a secret next to it."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "data.txt").write_text("inside data\n")
    (project / "sub" / "notes.md").write_text("needle inside\n")
    (tmp_path / "secret.txt").write_text("needle SECRET-CONTENT\n")
    (tmp_path / "project-evil").mkdir()
    (tmp_path / "project-evil" / "x.txt").write_text("SIBLING-CONTENT\n")
    return {"root": tmp_path, "project": project, "secret": tmp_path / "secret.txt"}


def ctx(layout, cwd: Path | None = None) -> ToolContext:
    return ToolContext(cwd=str(cwd or layout["project"]), root=str(layout["project"]))


def call(name: str, arguments: dict[str, Any], context: ToolContext, **kwargs: Any):
    return run_tool_call(get_tool(name), arguments, context, **kwargs)


# ---- inside: no question -------------------------------------------------------------------------


@pytest.mark.parametrize("name,arguments,expected", [
    ("read", {"path": "data.txt"}, "inside data"),
    ("read", {"path": "sub/../data.txt"}, "inside data"),
    ("ls", {}, "data.txt\nsub/"),
    ("ls", {"path": "sub"}, "notes.md"),
    ("grep", {"pattern": "needle"}, "sub/notes.md:1: needle inside"),
    ("find", {"pattern": "*.md"}, "sub/notes.md"),
])
def test_inside_the_notebooks_folder_nothing_is_asked(layout, name, arguments, expected):
    approver = Approver(answer=False)
    out = call(name, arguments, ctx(layout), approve=approver)
    assert (out.text, out.is_error, approver.asked) == (expected, False, [])


def test_absolute_path_inside_is_free_whatever_the_cwd(layout):
    elsewhere = layout["root"] / "project-evil"
    approver = Approver(answer=False)
    out = call("read", {"path": str(layout["project"] / "data.txt")}, ctx(layout, cwd=elsewhere), approve=approver)
    assert out.text == "inside data" and approver.asked == []


# ---- outside: asked, like write --------------------------------------------------------------------


OUTSIDE_CALLS = [
    ("read", {"path": "../secret.txt"}),
    ("read", {"path": "sub/../../secret.txt"}),
    ("ls", {"path": ".."}),
    ("grep", {"pattern": "needle", "path": ".."}),
    ("find", {"pattern": "*.txt", "path": "../project-evil"}),
    ("read", {"path": "../project-evil/x.txt"}),  # a sibling whose name starts like the folder's
]


@pytest.mark.parametrize("name,arguments", OUTSIDE_CALLS)
def test_outside_the_folder_the_user_is_asked_and_a_no_reads_nothing(layout, name, arguments):
    approver = Approver(answer=False)
    out = call(name, arguments, ctx(layout), approve=approver)
    assert approver.asked == [(name, arguments)]
    assert out.is_error and out.text.startswith(f"The user declined running `{name}` (it reads ")
    assert f"outside the notebook's folder {os.path.realpath(layout['project'])})" in out.text
    assert "SECRET-CONTENT" not in out.text and "SIBLING-CONTENT" not in out.text


@pytest.mark.parametrize("name,arguments", OUTSIDE_CALLS)
def test_outside_the_folder_a_yes_runs_the_call(layout, name, arguments):
    approver = Approver(answer=True)
    out = call(name, arguments, ctx(layout), approve=approver)
    assert approver.asked == [(name, arguments)] and not out.is_error


def test_headless_ask_refuses_outside_reads_with_a_clear_message(layout):
    out = call("read", {"path": "../secret.txt"}, ctx(layout), policy="ask", approve=None)
    full, real = os.path.abspath(layout["secret"]), os.path.realpath(layout["secret"])
    shown = real if real == full else f"{full} (really {real})"
    assert out.is_error and out.text == (
        'The user did not approve running `read` (tool_approval is "ask" and nobody can answer here); '
        f"it reads {shown}, outside the notebook's folder {os.path.realpath(layout['project'])}. "
        'Set %config Agent.tool_approval = "auto" to allow it.'
    )
    assert "SECRET-CONTENT" not in out.text


def test_auto_allows_outside_reads_without_asking(layout):
    approver = Approver(answer=False)
    out = call("read", {"path": "../secret.txt"}, ctx(layout), policy="auto", approve=approver)
    assert out.text == "needle SECRET-CONTENT" and approver.asked == []


def test_symlinks_are_resolved_before_comparing(layout):
    project = layout["project"]
    (project / "innocent.txt").symlink_to(layout["secret"])
    (project / "outdir").symlink_to(layout["root"] / "project-evil", target_is_directory=True)
    approver = Approver(answer=False)
    for name, arguments in [("read", {"path": "innocent.txt"}), ("ls", {"path": "outdir"}),
                            ("read", {"path": "outdir/x.txt"})]:
        out = call(name, arguments, ctx(layout), approve=approver)
        assert out.is_error and "really" in out.text and "CONTENT" not in out.text
    assert len(approver.asked) == 3
    # a link from outside pointing inside is inside
    (layout["root"] / "shortcut.txt").symlink_to(project / "data.txt")
    out = call("read", {"path": "../shortcut.txt"}, ctx(layout), approve=Approver(answer=False))
    assert out.text == "inside data"


def test_a_symlinked_notebook_folder_still_contains_its_files(layout):
    alias = layout["root"] / "alias"
    alias.symlink_to(layout["project"], target_is_directory=True)
    context = ToolContext(cwd=str(alias), root=str(alias))
    approver = Approver(answer=False)
    assert call("read", {"path": "data.txt"}, context, approve=approver).text == "inside data"
    assert call("read", {"path": "../secret.txt"}, context, approve=approver).is_error
    assert len(approver.asked) == 1


def test_without_a_notebook_folder_the_working_directory_is_the_root(layout):
    context = ToolContext(cwd=str(layout["project"]))
    approver = Approver(answer=False)
    assert call("ls", {}, context, approve=approver).text == "data.txt\nsub/"
    assert call("read", {"path": str(layout["secret"])}, context, approve=approver).is_error
    assert [name for name, _ in approver.asked] == ["read"]


def test_a_cwd_outside_the_notebooks_folder_makes_default_paths_ask(layout):
    approver = Approver(answer=False)
    out = call("ls", {}, ctx(layout, cwd=layout["root"]), approve=approver)
    assert out.is_error and approver.asked == [("ls", {})]


def test_a_bad_path_is_an_error_and_nothing_runs(layout):
    approver = Approver(answer=True)
    out = call("read", {"path": "bad\0name"}, ctx(layout), approve=approver)
    assert out.is_error and out.text.startswith("`read` failed: ValueError") and approver.asked == []


def test_grep_does_not_follow_file_links_out_of_the_searched_folder(layout):
    project = layout["project"]
    (project / "sub" / "leak.txt").symlink_to(layout["secret"])
    (project / "sub" / "alias.md").symlink_to(project / "sub" / "notes.md")
    out = call("grep", {"pattern": "needle"}, ctx(layout), approve=Approver(answer=False))
    assert "SECRET-CONTENT" not in out.text
    assert out.text.split("\n\n")[0].split("\n") == ["sub/alias.md:1: needle inside", "sub/notes.md:1: needle inside"]
    assert "Skipped 1 symlink(s) leading outside the searched folder" in out.text
    assert out.details["skipped_links"] == ["sub/leak.txt"]


# ---- read's cap: devices, FIFOs, huge files --------------------------------------------------------


def finishes(fn, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` in a thread; a call that blocks forever (the defect) fails instead of hanging the suite."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(fn(*args, **kwargs)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), f"{fn.__name__} blocked"
    return result[0]


def read(context: ToolContext, **arguments: Any):
    return get_tool("read").run(arguments, context)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_read_refuses_dev_zero():
    out = finishes(read, ToolContext(cwd="/"), path="/dev/zero")
    assert out.is_error and out.text == "/dev/zero is a character device, not a regular file; read only reads regular files."


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_read_and_grep_do_not_block_on_a_fifo(tmp_path):
    (tmp_path / "pipe").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("needle here\n")
    context = ToolContext(cwd=str(tmp_path))
    out = finishes(read, context, path="pipe")
    assert out.is_error and out.text == "pipe is a named pipe (FIFO), not a regular file; read only reads regular files."
    grep = finishes(get_tool("grep").run, {"pattern": "needle"}, context)
    assert grep.text == "a.txt:1: needle here"


def test_read_stops_at_its_byte_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(read_mod, "READ_BUDGET_BYTES", 1024 * 1024)
    line = "x" * 99 + "\n"  # 100 bytes a line: the budget holds 10,485 lines and a bit
    (tmp_path / "big.log").write_text(line * 30_000)
    context = ToolContext(cwd=str(tmp_path))
    out = read(context, path="big.log")
    assert out.text.endswith("[Showing lines 1-512 of at least 10486 (read looks at the first 1.0MB) "
                             "(50.0KB limit). Use offset=513 to continue.]")
    near_end = read(context, path="big.log", offset=10_000, limit=3)
    assert near_end.text == "\n".join([line.strip()] * 3) + "\n\n[at least 484 more lines in file. Use offset=10003 to continue.]"
    beyond = read(context, path="big.log", offset=20_000)
    assert beyond.is_error and beyond.text == (
        "Offset 20000 is beyond the 10486 lines in the first 1.0MB of big.log, which is as far as read looks. "
        "Use bash: sed -n '20000p' big.log | head -c 51200")


def test_read_of_a_huge_sparse_file_reads_only_its_budget(tmp_path):
    path = tmp_path / "sparse.txt"
    with open(path, "wb") as f:
        f.write(b"".join(b"line %d\n" % i for i in range(1, 2001)))  # text first: not sniffed as binary
        f.truncate(8 * 1024**3)  # 8 GiB, mostly a hole: reading it all would take the kernel down
    out = read(ToolContext(cwd=str(tmp_path)), path="sparse.txt")
    assert out.text.startswith("line 1\nline 2\n") and not out.is_error
    assert out.text.endswith("[Showing lines 1-2000 of at least 2001 (read looks at the first 256.0MB). "
                             "Use offset=2001 to continue.]")


def test_scan_reads_at_most_the_budget(tmp_path):
    from ipyagent.agent.tools.lines import scan_lines

    (tmp_path / "f").write_bytes(b"abc\n" * 100_000)
    with open(tmp_path / "f", "rb") as f:
        scan = scan_lines(f, 5, 8, keep=1000, budget=65_536 + 10)
        assert f.tell() == 65_546 and scan.bytes_read == 65_546 and not scan.complete
    assert scan.window == b"abc\n" * 3 and scan.newlines == 65_546 // 4


@pytest.mark.parametrize("seed", range(40))
def test_scan_windows_match_reading_everything(tmp_path, monkeypatch, seed):
    """Against the obvious whole-file computation, with tiny chunks so windows straddle them."""
    from ipyagent.agent.tools import lines as lines_mod

    monkeypatch.setattr(lines_mod, "CHUNK_BYTES", 7)
    rng = random.Random(seed)
    data = "".join(rng.choice(["a", "bb", "\n", "\n\n", "ccccccccc", "é"]) for _ in range(rng.randint(0, 60))).encode()
    (tmp_path / "f").write_bytes(data)
    lines = data.split(b"\n") if data else []
    if data.endswith(b"\n"):
        lines.pop()
    start = rng.randint(0, len(lines) + 1)
    stop = None if rng.random() < 0.3 else start + rng.randint(1, 5)
    keep = rng.randint(1, 40)
    with open(tmp_path / "f", "rb") as f:
        scan = lines_mod.scan_lines(f, start, stop, keep=keep, budget=10**6)
    assert scan.complete and scan.total_lines == len(lines) and scan.bytes_read == len(data)
    if start >= len(lines):
        return
    expected = b"".join(line + b"\n" for line in lines[start:stop])
    if not data.endswith(b"\n") and (stop is None or stop >= len(lines)):
        expected = expected[:-1]
    assert scan.window == expected[:keep]
    assert scan.window_end - scan.window_start == len(expected)
    assert scan.first_line_bytes == len(lines[start])


def test_grep_looks_at_a_bounded_part_of_an_enormous_line(tmp_path, monkeypatch):
    from ipyagent.agent.tools.builtin import search

    monkeypatch.setattr(search, "GREP_LINE_CAP", 1000)
    (tmp_path / "wide.txt").write_text("start " + "y" * 5000 + " needle-late\nneedle short\n")
    out = get_tool("grep").run({"pattern": "needle"}, ToolContext(cwd=str(tmp_path)))
    assert out.text == "wide.txt:2: needle short"  # line numbers stay right past the long line


# ---- in a real kernel: the notebook's folder comes from the notebook's path ------------------------


@pytest.mark.kernel
def test_in_a_kernel_the_notebooks_folder_is_free_and_outside_asks(tmp_path):
    from ipyagent.store.ipynb import new_notebook, write_notebook
    from kernel_support import SETUP, LiveKernel, fake_provider
    from support.outputs import outputs_text

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "data.txt").write_text("inside data\n")
    (elsewhere / "local.txt").write_text("local content\n")
    (tmp_path / "secret.txt").write_text("SECRET-CONTENT\n")
    notebook = project / "analysis.ipynb"
    write_notebook(notebook, new_notebook([]))
    # the kernel runs elsewhere: the folder comes from JPY_SESSION_NAME, not from the cwd
    with fake_provider() as server, LiveKernel(cwd=str(elsewhere), env={"JPY_SESSION_NAME": str(notebook)}) as k:
        k.run(SETUP, "setup")
        server.enqueue_tool_calls([("read", {"path": str(project / "data.txt")}), ("read", {"path": "local.txt"}),
                                   ("read", {"path": "../secret.txt"})])
        server.enqueue_text("Read what I was allowed to.")
        k.answers = ["y", "n"]
        cell = k.run("%%agent\nRead three files.", "c1")
        assert cell.status == "ok", outputs_text(cell.outputs)
        assert k.prompts == ["Allow `read` as shown above? [y/N] "] * 2
        shown = outputs_text(cell.outputs)
        assert shown.count("ipyagent: approve this `read` call? It reads outside the notebook's folder.") == 2
        assert "  path: local.txt" in shown and "  path: ../secret.txt" in shown

        server.enqueue_tool_call("ls", {"path": ".."})
        server.enqueue_text("Nobody could answer.")
        cell = k.run("%%agent\nList the parent folder.", "c2")  # no answers: stdin is not allowed
        assert cell.status == "ok", outputs_text(cell.outputs)
        assert len(k.prompts) == 2

        results = [e["message"] for e in k.metadata["sessions"]["default"]["entries"]
                   if e["type"] == "message" and e["message"]["role"] == "toolResult"]
        texts = [r["content"][0]["text"] for r in results]
        assert texts[0] == "inside data" and texts[1] == "local content"
        assert texts[2].startswith("The user declined running `read` (it reads ")
        assert f"outside the notebook's folder {project.resolve()})" in texts[2]
        assert "nobody can answer" in texts[3] and "outside the notebook's folder" in texts[3]
        assert [r["isError"] for r in results] == [False, False, True, True]
        assert "SECRET-CONTENT" not in json.dumps(k.metadata) + k.snapshot()


def test_the_folder_follows_agent_notebook_path_else_the_working_directory(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing import globalipapp

    from ipyagent.kernel import extension

    globalipapp.start_ipython()
    shell = InteractiveShell.instance()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delitem(shell.user_ns, "__session__", raising=False)
    runtime = extension.AgentRuntime(shell)  # not loaded into the shell: no bridge, no hydration
    assert runtime.notebook_folder() == str(tmp_path)
    runtime.config.notebook_path = str(tmp_path / "nb" / "work.ipynb")  # may name a notebook still to be written
    assert runtime.notebook_folder() == str(tmp_path / "nb")
    agent = runtime.agent_for(runtime.slot(), runtime.run_config(model="openai:m"))
    assert (agent.tool_context.cwd, agent.tool_context.root) == (str(tmp_path), str(tmp_path / "nb"))


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs /proc")
def test_nothing_under_proc_is_read_even_when_allowed(tmp_path):
    (tmp_path / "notes.md").symlink_to("/proc/self/environ")  # a repository's trap
    (tmp_path / "a.txt").write_text("needle here\n")
    context = ToolContext(cwd=str(tmp_path), root=str(tmp_path))
    for path in ("notes.md", "/proc/self/environ"):
        out = call("read", {"path": path}, context, policy="auto")
        assert out.is_error and "a kernel interface (under /proc, /sys or /dev: never read)" in out.text, path
    grep = call("grep", {"pattern": "PATH|needle"}, context, policy="auto")
    assert grep.text.startswith("a.txt:1: needle here\n") and "PATH=" not in grep.text
    direct = call("grep", {"pattern": "PATH", "path": "/proc/self/environ"}, context, policy="auto")
    assert "PATH=" not in direct.text
