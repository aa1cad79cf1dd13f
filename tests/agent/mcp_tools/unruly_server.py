"""A real MCP server (the SDK's FastMCP over stdio) that misbehaves as asked, for the tests of
what the kernel does with servers it cannot trust to behave:

    unruly_server.py ignore-term        serves; ignores SIGTERM and the end of its stdin (only SIGKILL ends it)
    unruly_server.py hang               ignores SIGTERM and never answers: a server forever starting
    unruly_server.py echo-env NAME      writes NAME's value on stderr and exits (a failed start)
    unruly_server.py flood MB           writes MB megabytes to stderr in lines, then exits
    unruly_server.py gate FIFO          serves once a line can be read from the named pipe FIFO
                                        (a server whose start the test holds, then releases)
"""

from __future__ import annotations

import os
import signal
import sys
import time


def serve() -> None:
    from mcp.server.fastmcp import FastMCP  # only for the modes that serve: the others start at once

    server = FastMCP("unruly")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    server.run("stdio")


def main(mode: str, arg: str = "") -> None:
    if mode in ("ignore-term", "hang"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "hang":
        while True:
            time.sleep(60)
    if mode == "echo-env":
        print(f"starting with {arg}={os.environ.get(arg, '')}", file=sys.stderr, flush=True)
        sys.exit(1)
    if mode == "flood":
        line = b"x" * 1023 + b"\n"
        chunk = line * 1024  # 1 MB
        for _ in range(int(arg)):
            sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.write(b"the last line after the flood\n")
        sys.stderr.flush()
        sys.exit(2)
    if mode == "gate":
        from mcp.server.fastmcp import FastMCP  # noqa: F401 - loaded before the gate: serving is quick after it

        with open(arg, encoding="utf-8") as gate:  # blocks until the test opens the pipe for writing
            gate.readline()
    serve()
    while mode == "ignore-term":  # stdin closed: a well-behaved server exits here, this one does not
        time.sleep(60)


if __name__ == "__main__":
    main(*sys.argv[1:])
