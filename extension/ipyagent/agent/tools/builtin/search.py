"""``ls(path?)``, ``grep(pattern, path?)`` and ``find(pattern, path?)``: read-only, stdlib-only."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from ipyagent.agent.tools.paths import (
    SKIP_DIRS,
    SNIFF_BYTES,
    is_within,
    looks_binary,
    open_regular,
    outside_root,
    resolve_path,
    root_of,
)
from ipyagent.agent.tools.tool import Tool, ToolContext, ToolOutput
from ipyagent.agent.tools.truncate import (
    DEFAULT_MAX_BYTES,
    GREP_MAX_LINE_LENGTH,
    format_size,
    truncate_head,
    truncate_line,
)
from ipyagent.patterns import (
    BoundedPattern,
    PatternInvalid,
    PatternTooCostly,
    compile_bounded,
    has_words,
    pattern_words,
)
from ipyagent.shapes import JsonSchema

LS_LIMIT = 500
GREP_LIMIT = 100
FIND_LIMIT = 1000
# grep looks at this many characters of one line (the rest of a longer line is skipped) and of one
# file, so a huge or sparse file cannot fill the kernel's memory.
GREP_LINE_CAP = 1 << 20
GREP_FILE_BUDGET = 64 * 1024 * 1024
# Notebook files hold the agent's own transcript (its session in the metadata, its tool blocks in
# the outputs): a search of a folder leaves them out, unless it names them (a notebook as grep's
# path, a find pattern that says .ipynb), and says how many it left out.
NOTEBOOK_SUFFIX = ".ipynb"
NOTEBOOK_DIRS = frozenset({".ipynb_checkpoints"})


class _PathTool(Tool):
    """A read-only tool with an optional ``path``: free inside the notebook's folder, asks outside."""

    read_only = True

    def approval_reason(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        return outside_root(arguments.get("path") or ".", context)


def _finish(lines: list[str], notices: list[str], details: dict[str, Any]) -> ToolOutput:
    """Join result lines, cap them at 50 KB and append the notices in one bracket, like Pi."""
    t = truncate_head("\n".join(lines), max_lines=sys.maxsize)
    if t.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = t.as_details()
    text = t.content
    if notices:
        text += "\n\n[" + ". ".join(notices) + "]"
    return ToolOutput(text, details=details)


def _walk(base: str, notebooks: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk in sorted order, skipping .git and node_modules (and .ipynb_checkpoints, unless
    ``notebooks``)."""
    skip = SKIP_DIRS if notebooks else SKIP_DIRS | NOTEBOOK_DIRS
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        yield root, dirs, sorted(files)


def _notebooks_left_out(count: int, how: str) -> str:
    return (f"Left out {count} notebook file{'s' if count != 1 else ''} (*.ipynb: they hold this session's own "
            f"transcript); {how}")


def _missing(path: str) -> ToolOutput:
    return ToolOutput(f"Path not found: {path}", is_error=True)


def _no_directory(path: str, full: str) -> ToolOutput | None:
    """The error for a ``path`` argument (``full`` once resolved) that names no directory, else
    ``None``."""
    if not os.path.exists(full):
        return _missing(path)
    if not os.path.isdir(full):
        return ToolOutput(f"Not a directory: {path}", is_error=True)
    return None


class LsTool(_PathTool):
    name = "ls"
    description = (
        "List directory contents, sorted alphabetically, with '/' after directories. Includes "
        f"dotfiles. Output is truncated to {LS_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Directory to list (default: current directory)"}},
        "required": [],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        path = arguments.get("path") or "."
        full = resolve_path(path, context.cwd)
        if (refusal := _no_directory(path, full)) is not None:
            return refusal
        with os.scandir(full) as it:
            entries = sorted(it, key=lambda e: (e.name.lower(), e.name))
        if not entries:
            return ToolOutput("(empty directory)")
        names = [e.name + ("/" if e.is_dir() else "") for e in entries[:LS_LIMIT]]
        notices, details = [], {}
        if len(entries) > LS_LIMIT:
            notices.append(f"{LS_LIMIT} entries limit reached ({len(entries)} entries in total)")
            details["entry_limit_reached"] = LS_LIMIT
        return _finish(names, notices, details)


class GrepTool(_PathTool):
    name = "grep"
    description = (
        "Search file contents with a Python regular expression, recursively. Returns matching "
        "lines as path:line: text. Skips binary files, .git and node_modules. Output is truncated "
        f"to {GREP_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB; long lines are cut to "
        f"{GREP_MAX_LINE_LENGTH} chars."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python re syntax)"},
            "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
        },
        "required": ["pattern"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        pattern = str(arguments["pattern"])
        try:
            return _bounded_search(pattern, pattern,
                                   lambda matcher, fallback: self._grep(matcher, arguments, context, fallback))
        except PatternInvalid as e:
            return ToolOutput(f"Invalid regular expression {pattern!r}: {e}", is_error=True)

    def _grep(self, matcher: BoundedPattern | _Words, arguments: dict[str, Any], context: ToolContext,
              fallback: str) -> ToolOutput:
        path = arguments.get("path") or "."
        full = resolve_path(path, context.cwd)
        skipped_links: list[str] = []
        notebooks: list[str] = []
        if os.path.isfile(full):
            files: Iterator[tuple[str, str]] = iter([(full, os.path.basename(full))])
        elif os.path.isdir(full):
            files = _files_within(full, (root_of(context), os.path.realpath(full)), skipped_links, notebooks)
        else:
            return _missing(path)

        out: list[str] = []
        cut_lines = limit_hit = False
        for file_path, shown in files:
            for lineno, line in _matching_lines(file_path, matcher):
                if len(out) == GREP_LIMIT:
                    limit_hit = True
                    break
                text, cut = truncate_line(line)
                cut_lines |= cut
                out.append(f"{shown}:{lineno}: {text}")
            if limit_hit:
                break
        notices: list[str] = [fallback] if fallback else []
        details: dict[str, Any] = {"pattern_fallback": fallback} if fallback else {}
        if notebooks:
            notices.append(_notebooks_left_out(len(notebooks), "give one as the path to search it"))
            details["notebooks_left_out"] = notebooks
        if skipped_links:
            notices.append(f"Skipped {len(skipped_links)} symlink(s) leading outside the searched folder and the "
                           f"notebook's folder: {', '.join(skipped_links[:5])}")
            details["skipped_links"] = skipped_links
        if not out:
            return ToolOutput("No matches found" + ("\n\n[" + ". ".join(notices) + "]" if notices else ""),
                              details=details)
        if limit_hit:
            notices.append(f"{GREP_LIMIT} matches limit reached. Refine the pattern or narrow the path")
            details["match_limit_reached"] = GREP_LIMIT
        if cut_lines:
            notices.append(f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines")
            details["lines_truncated"] = True
        return _finish(out, notices, details)


@dataclass
class _Words:
    """The fallback matcher: a line matches when it holds every word, case-insensitive."""

    words: list[str]

    def search(self, line: str) -> bool:
        return has_words(line, self.words)

    fullmatch = search  # find: a path holding every word of the glob


def _bounded_search(regex: str, words_of: str,
                    search: Callable[[BoundedPattern | _Words, str], ToolOutput]) -> ToolOutput:
    """``search(matcher, "")`` with ``regex`` compiled bounded; where it backtracks too much (to
    compile, or on a line while searching), ``search`` again with a :class:`_Words` matcher of the
    words of ``words_of`` and the note saying so. :class:`PatternInvalid` is the caller's."""
    try:
        return search(compile_bounded(regex), "")
    except PatternTooCostly as e:
        words = pattern_words(words_of)
        return search(_Words(words), e.note(words))


def _files_within(base: str, allowed: tuple[str, ...], skipped: list[str],
                  notebooks: list[str]) -> Iterator[tuple[str, str]]:
    """The files under ``base`` (os.walk does not follow directory symlinks), without file symlinks
    that lead outside every folder in ``allowed`` (those are listed in ``skipped``) and without
    notebook files (listed in ``notebooks``)."""
    for root, _, names in _walk(base, notebooks=False):
        for name in names:
            p = os.path.join(root, name)
            if name.endswith(NOTEBOOK_SUFFIX):
                notebooks.append(os.path.relpath(p, base))
                continue
            if os.path.islink(p) and not any(is_within(os.path.realpath(p), a) for a in allowed):
                skipped.append(os.path.relpath(p, base))
                continue
            yield p, os.path.relpath(p, base)


def _matching_lines(path: str, matcher: BoundedPattern | _Words) -> Iterator[tuple[int, str]]:
    try:
        # FIFOs, devices and sockets are skipped: reading them may block or never end.
        with open_regular(path) as raw:
            if looks_binary(raw.read(SNIFF_BYTES)):
                return
            raw.seek(0)
            f = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            seen = lineno = 0
            while seen < GREP_FILE_BUDGET:
                line = f.readline(GREP_LINE_CAP)
                if not line:
                    return
                seen += len(line)
                lineno += 1
                rest = line
                while rest and not rest.endswith(("\n", "\r")) and seen < GREP_FILE_BUDGET:
                    rest = f.readline(GREP_LINE_CAP)  # the rest of an over-long line: counted, not searched
                    seen += len(rest)
                line = line.rstrip("\r\n")
                if matcher.search(line):
                    yield lineno, line
    except OSError:
        return  # unreadable files (permissions, vanished) are skipped, like grep -s


def glob_to_regex(pattern: str) -> str:
    """Translate a glob to a regex over '/'-separated relative paths.

    ``*`` and ``?`` stay within one path segment, ``**/`` spans any number of directories,
    ``[abc]``/``[!abc]`` are character classes and ``{a,b}`` are alternatives.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (j := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : j].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body[0] in "!^" else body) + "]")
            i = j + 1
        elif c == "{" and (j := pattern.find("}", i)) != -1:
            out.append("(?:" + "|".join(glob_to_regex(alt) for alt in pattern[i + 1 : j].split(",")) + ")")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class FindTool(_PathTool):
    name = "find"
    description = (
        "Find files and directories by glob pattern, e.g. '*.py', '**/*.json' or 'src/**/test_*.py'. "
        "A pattern without '/' matches names at any depth. Returns paths relative to the search "
        f"directory, '/' after directories. Skips .git and node_modules. Output is truncated to "
        f"{FIND_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB."
    )
    parameters: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern to match"},
            "path": {"type": "string", "description": "Directory to search (default: current directory)"},
        },
        "required": ["pattern"],
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        pattern: str = arguments["pattern"].removeprefix("./").rstrip("/")
        path = arguments.get("path") or "."
        full = resolve_path(path, context.cwd)
        if (refusal := _no_directory(path, full)) is not None:
            return refusal
        glob = arguments["pattern"]
        notebooks = NOTEBOOK_SUFFIX[1:] in glob.lower()
        # Like fd: a bare name pattern matches at any depth. (`*a*a*a*a*b` over long names
        # backtracks: then the glob's words.)
        regex = glob_to_regex(pattern if "/" in pattern else "**/" + pattern)
        try:
            return _bounded_search(regex, pattern,
                                   lambda matcher, fallback: self._find(matcher, full, glob, fallback, notebooks))
        except PatternInvalid as e:
            return ToolOutput(f"Invalid glob pattern {glob!r}: {e}", is_error=True)

    def _find(self, matcher: BoundedPattern | _Words, full: str, glob: str, fallback: str,
              notebooks: bool) -> ToolOutput:
        """``notebooks``: the pattern names them, so notebook files and checkpoints are found too."""
        found: list[str] = []
        left_out = 0
        limit_hit = False
        for root, dirs, files in _walk(full, notebooks=notebooks):
            rel_root = os.path.relpath(root, full).replace(os.sep, "/")
            prefix = "" if rel_root == "." else rel_root + "/"
            for name, suffix in [(d, "/") for d in dirs] + [(f, "") for f in files]:
                if matcher.fullmatch(prefix + name):
                    if not notebooks and not suffix and name.endswith(NOTEBOOK_SUFFIX):
                        left_out += 1
                        continue
                    if len(found) == FIND_LIMIT:
                        limit_hit = True
                        break
                    found.append(prefix + name + suffix)
            if limit_hit:
                break
        notices: list[str] = [fallback] if fallback else []
        details: dict[str, Any] = {"pattern_fallback": fallback} if fallback else {}
        if left_out:
            notices.append(_notebooks_left_out(left_out, "a pattern that says .ipynb finds them"))
            details["notebooks_left_out"] = left_out
        if not found:
            return ToolOutput(f"No files found matching pattern {glob!r}"
                              + ("\n\n[" + ". ".join(notices) + "]" if notices else ""), details=details)
        if limit_hit:
            notices.append(f"{FIND_LIMIT} results limit reached. Refine the pattern or narrow the path")
            details["result_limit_reached"] = FIND_LIMIT
        return _finish(sorted(found), notices, details)
