"""``bash(command, timeout?)``: run a command with ``bash -c``, tail-truncated like Pi."""

from __future__ import annotations

import dataclasses
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    Truncation,
    clean_output,
    tail_notice,
    truncate_tail,
)
from ipyagent.shapes import JsonSchema

ROLLING_BYTES = 2 * DEFAULT_MAX_BYTES
# After the shell exits, how long to keep reading from a pipe that a background job it started
# still holds open before giving up on it.
EXIT_GRACE_SECONDS = 0.5
POLL_SECONDS = 0.1


@dataclass
class OutputCollector:
    """A command's output: the last ``ROLLING_BYTES`` in memory, everything in a temp file once
    the output passes the byte limit (so huge output never sits in memory)."""

    prefix: str
    total_bytes: int = 0
    tail: bytearray = field(default_factory=bytearray)
    dropped_lines: int = 0  # complete lines cut from the front of ``tail``
    trimmed: bool = False
    file: IO[bytes] | None = None
    path: str | None = None

    def _open_file(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix=self.prefix, suffix=".log")
        self.file = os.fdopen(fd, "wb")
        self.file.write(self.tail)  # until now the tail holds everything

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        if self.file is None and self.total_bytes > DEFAULT_MAX_BYTES:
            self._open_file()
        if self.file is not None:
            self.file.write(chunk)
        self.tail += chunk
        excess = len(self.tail) - ROLLING_BYTES
        if excess > 0:
            self.dropped_lines += self.tail.count(b"\n", 0, excess)
            del self.tail[:excess]
            self.trimmed = True

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def finish(self) -> tuple[str, Truncation, str | None]:
        """The kept text, how it was truncated, and the full-output file if anything was cut."""
        data = bytes(self.tail)
        if self.trimmed and (nl := data.find(b"\n")) >= 0:
            data = data[nl + 1 :]  # the first line in the buffer was cut mid-way
            self.dropped_lines += 1
        text = clean_output(data.decode("utf-8", errors="replace")).removesuffix("\n")
        t = truncate_tail(text)
        if self.trimmed:
            t = dataclasses.replace(
                t,
                truncated=True,
                truncated_by=t.truncated_by or "bytes",
                total_lines=self.dropped_lines + t.total_lines,
                total_bytes=self.total_bytes,
            )
        if t.truncated and self.file is None:
            self._open_file()  # cut by the line limit only: still keep the full output
        self.close()
        if not t.truncated and self.path is not None:
            os.unlink(self.path)  # big, but nothing left to cut once control bytes are gone
            self.path = None
        return t.content, t, self.path


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _start(command: str, cwd: str) -> tuple[subprocess.Popen[bytes], bool]:
    """Start ``bash -c command`` in its own process group, and whether an interrupt (SIGINT) came
    while it started: one that lands inside ``Popen`` after the fork would leave the group running
    with nobody to kill it, so in the main thread it is held until ``Popen`` has returned."""
    held: list[int] = []
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if previous is not None:  # None: not a handler Python could put back
        signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    try:
        proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return proc, bool(held)


def run_command(command: str, cwd: str, timeout: float | None) -> tuple[OutputCollector, int, bool]:
    """Run ``bash -c command`` in its own process group; return its output, exit code and
    whether it timed out. A KeyboardInterrupt kills the group and propagates."""
    out = OutputCollector(prefix="ipyagent-bash-")
    proc, interrupted = _start(command, cwd)
    assert proc.stdout is not None
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    exited_at: float | None = None
    try:
        if interrupted:
            raise KeyboardInterrupt
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline and not timed_out:
                    timed_out = True
                    _kill_group(proc)
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                    break  # a background job keeps the pipe open (and may keep writing)
                if sel.select(POLL_SECONDS):
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    out.add(chunk)
        code = proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        out.close()
        raise
    finally:
        proc.stdout.close()
    return out, code, timed_out


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class BashTool(Tool):
    name = "bash"
    description = (
        "Execute a bash command in the current working directory. Returns stdout and stderr. "
        f"Output is truncated to the last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB "
        "(whichever is hit first); if truncated, the full output is saved to a temp file. "
        "Optionally provide a timeout in seconds; there is none by default."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "Bash command to execute"},
            "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"},
        },
        "required": ["command"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        timeout: float | None = arguments.get("timeout")
        if timeout is not None and timeout <= 0:
            return ToolOutput(f"timeout must be a positive number of seconds, got {timeout}", is_error=True)
        cwd = os.path.abspath(context.cwd)
        if not os.path.isdir(cwd):
            return ToolOutput(f"Working directory does not exist: {cwd}", is_error=True)

        out, code, timed_out = run_command(arguments["command"], cwd, timeout)
        text, t, full_path = out.finish()
        details: dict[str, Any] = {"exit_code": code}
        if full_path is not None:
            text += "\n\n" + tail_notice(t, full_path)
            details.update(truncation=t.as_details(), full_output_path=full_path)

        if timed_out:
            status = f"Command timed out after {_seconds(timeout or 0)} seconds"
        elif code < 0:
            status = f"Command was killed by signal {_signal_name(-code)}"
        elif code > 0:
            status = f"Command exited with code {code}"
        else:
            return ToolOutput(text or "(no output)", details=details)
        return ToolOutput(f"{text}\n\n{status}" if text else status, is_error=True, details=details)
