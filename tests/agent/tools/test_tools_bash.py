"""bash with real subprocesses."""

import contextlib
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ipyagent.agent.tools import ToolContext, get_tool


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=str(tmp_path))


def bash(ctx: ToolContext, command: str, **extra):
    return get_tool("bash").run({"command": command, **extra}, ctx)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def wait_until_dead(pid: int) -> bool:
    # SIGKILL is asynchronous: poll (without asserting on how long it takes; the minute is a safety net)
    deadline = time.monotonic() + 60
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_runs_in_cwd_and_merges_stderr(tmp_path, ctx):
    out = bash(ctx, "pwd; echo to-err >&2; echo done")
    assert not out.is_error
    assert out.text == f"{os.path.realpath(tmp_path)}\nto-err\ndone"
    assert out.details["exit_code"] == 0


def test_no_output():
    out = bash(ToolContext(cwd="/"), "true")
    assert (out.text, out.is_error) == ("(no output)", False)


def test_nonzero_exit_is_an_error_with_the_code(ctx):
    out = bash(ctx, "echo partial; exit 3")
    assert out.is_error
    assert out.text == "partial\n\nCommand exited with code 3"
    assert bash(ctx, "exit 1").text == "Command exited with code 1"


def test_timeout_kills_the_whole_process_group(tmp_path, ctx):
    # 2 s: time for a loaded machine to start bash and reach the wait, which is what times out
    out = bash(ctx, "echo started; sleep 60 & echo $! > bg.pid; wait", timeout=2)
    assert out.is_error
    assert out.text == "started\n\nCommand timed out after 2 seconds"
    assert wait_until_dead(int((tmp_path / "bg.pid").read_text()))


def test_background_job_holding_the_pipe_does_not_block_the_result(tmp_path, ctx):
    out = bash(ctx, "(while true; do echo bg; sleep 0.01; done) & echo $! > bg.pid; echo fg")
    with contextlib.suppress(ProcessLookupError):  # it may already have died of SIGPIPE
        os.kill(int((tmp_path / "bg.pid").read_text()), signal.SIGKILL)
    assert not out.is_error and "fg" in out.text.split("\n")


def test_invalid_timeout_and_missing_cwd(tmp_path):
    assert bash(ToolContext(cwd=str(tmp_path)), "true", timeout=0).is_error
    out = bash(ToolContext(cwd=str(tmp_path / "gone")), "true")
    assert out.is_error and out.text.startswith("Working directory does not exist")


def test_many_lines_keep_the_tail_and_save_the_full_output(ctx):
    out = bash(ctx, "seq 1 100000")
    body, notice = out.text.rsplit("\n\n", 1)
    lines = body.split("\n")
    assert (lines[0], lines[-1], len(lines)) == ("98001", "100000", 2000)
    path = out.details["full_output_path"]
    assert notice == f"[Showing lines 98001-100000 of 100000. Full output: {path}]"
    assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 100001))
    assert out.details["truncation"]["total_bytes"] == Path(path).stat().st_size


def test_line_limit_alone_still_saves_the_full_output(ctx):
    out = bash(ctx, "seq 1 3000")  # ~14 KB: cut by lines, not bytes
    path = out.details["full_output_path"]
    assert out.text.endswith(f"[Showing lines 1001-3000 of 3000. Full output: {path}]")
    assert Path(path).read_text().count("\n") == 3000


def test_byte_limit_notice(ctx):
    out = bash(ctx, "for i in $(seq 1 200); do printf '%01000d\\n' $i; done")  # 200 KB
    body, notice = out.text.rsplit("\n\n", 1)
    assert len(body.encode()) <= 51200 and len(body.split("\n")) == 51
    assert body.split("\n")[-1] == "%01000d" % 200
    assert notice.startswith("[Showing lines 150-200 of 200 (50.0KB limit). Full output: ")


def test_one_huge_line_shows_its_end(ctx):
    out = bash(ctx, "head -c 200000 /dev/zero | tr '\\0' a; printf END")
    body, notice = out.text.rsplit("\n\n", 1)
    assert body.endswith("aaaEND") and len(body.encode()) == 51200
    assert notice.startswith("[Showing last 50.0KB of line 1. Full output: ")


def test_binary_output_is_decoded_with_replacement(ctx):
    out = bash(ctx, r"printf '\000\377\376 abc\001\033[31mred\033[0m\n'")
    assert not out.is_error
    assert out.text == "\ufffd\ufffd abcred"


def test_large_output_of_only_control_bytes_leaves_no_temp_file(tmp_path, ctx, monkeypatch):
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_dir))
    out = bash(ctx, "head -c 60000 /dev/zero")
    assert out.text == "(no output)" and "full_output_path" not in out.details
    assert list(temp_dir.iterdir()) == []


@pytest.mark.usefixtures("sigint_raises")  # it interrupts itself: see tests/conftest.py
def test_keyboard_interrupt_kills_the_group_and_propagates(tmp_path, ctx):
    pid_file = tmp_path / "bg.pid"

    def interrupt_when_started() -> None:
        while not pid_file.exists() or not pid_file.read_text().strip():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        bash(ctx, "sleep 60 & echo $! > bg.pid; wait")
    assert wait_until_dead(int(pid_file.read_text()))
