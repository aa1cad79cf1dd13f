"""Path resolution and binary sniffing shared by the file tools."""

from __future__ import annotations

import os

SNIFF_BYTES = 8192
SKIP_DIRS = frozenset({".git", "node_modules"})


def resolve_path(path: str, cwd: str) -> str:
    """A path as the model wrote it, resolved against the tool context's working directory."""
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))


def looks_binary(data: bytes) -> bool:
    # The heuristic git and grep use: a NUL byte near the start means binary.
    return b"\0" in data[:SNIFF_BYTES]


def file_looks_binary(path: str) -> bool:
    with open(path, "rb") as f:
        return looks_binary(f.read(SNIFF_BYTES))
