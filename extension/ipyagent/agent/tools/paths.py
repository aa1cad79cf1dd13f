"""Paths for the file tools: resolving them, the notebook's folder they read freely, opening only
regular files, and binary sniffing."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from ipyagent.agent.containment import is_within as is_within  # re-exported: the file tools use it
from ipyagent.agent.containment import leads_to_forbidden
from ipyagent.agent.tools.tool import ToolContext

SNIFF_BYTES = 8192
SKIP_DIRS = frozenset({".git", "node_modules"})


def resolve_path(path: str, cwd: str) -> str:
    """A path as the model wrote it, resolved against the tool context's working directory."""
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))


def root_of(context: ToolContext) -> str:
    """The folder read-only tools may read without asking: the notebook's, else the working directory."""
    return os.path.realpath(context.root or context.cwd)


def outside_root(path: str, context: ToolContext) -> str | None:
    """Why reading ``path`` needs approval (symlinks and ``..`` resolved), or None inside the root."""
    full = resolve_path(path, context.cwd)
    real = os.path.realpath(full)
    root = root_of(context)
    if is_within(real, root):
        return None
    for folder in context.readable:  # a skill's folder, unless it holds the notebook's folder (a link to ../..)
        real_folder = os.path.realpath(folder)
        if is_within(real, real_folder) and not is_within(root, real_folder):
            return None
    shown = real if real == full else f"{full} (really {real})"
    return f"it reads {shown}, outside the notebook's folder {root}"


def looks_binary(data: bytes) -> bool:
    # The heuristic git and grep use: a NUL byte near the start means binary.
    return b"\0" in data[:SNIFF_BYTES]


class NotARegularFile(OSError):
    """The path is a device, a FIFO, a socket or a directory: reading it could block or never end."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"{path} is {kind}, not a regular file")
        self.kind = kind


def file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def open_regular(path: str) -> BinaryIO:
    """Open a regular file for reading, or raise :class:`NotARegularFile` without blocking.

    A FIFO would block ``open`` until a writer appears and ``/dev/zero`` never ends, so the file
    is checked before opening and again on the descriptor (it may have been swapped in between),
    which is opened non-blocking. Nothing under ``/proc``, ``/sys`` or ``/dev`` is opened, links
    followed (``agent/containment.py``).
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(path, file_kind(mode))
    if leads_to_forbidden(path):  # /proc/self/environ is "regular", and holds the keys
        raise NotARegularFile(path, "a kernel interface (under /proc, /sys or /dev: never read)")
    nonblock = getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, file_kind(mode))
        if nonblock:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

