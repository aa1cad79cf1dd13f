"""Regular expressions from a model, searched in bounded time: the one helper every tool that
runs a model's pattern (``grep``, ``find``, ``recall``) uses.

A pattern such as ``(a|aa)+b`` or ``error(.|\\s)*timeout`` backtracks for minutes over one
ordinary log line, and no screen of the pattern's text catches every such shape. So the search
itself is bounded: :class:`BoundedPattern` runs the third-party ``regex`` engine with its
``timeout=``, against a budget of search time shared by one tool call (:data:`SEARCH_SECONDS`).
Compiling is bounded too: ``regex`` unrolls counted repeats, so ``((?:a{1000}){1000}){1000}`` would
take minutes before any search starts; :func:`compile_bounded` refuses a pattern whose repeats
expand past :data:`MAX_EXPANSION` characters. Both raise :class:`PatternTooCostly`, and the caller
falls back to a search for the pattern's words (:func:`pattern_words`, :func:`has_words`) and says
so (:meth:`PatternTooCostly.note`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import regex

__all__ = [
    "MAX_EXPANSION",
    "ONE_SEARCH_SECONDS",
    "SEARCH_SECONDS",
    "BoundedPattern",
    "PatternInvalid",
    "PatternTooCostly",
    "compile_bounded",
    "has_words",
    "pattern_words",
]

# The time one tool call may spend searching with its pattern, over all the lines it searches,
# and the CPU time one search (one line) may take. An ordinary pattern takes microseconds a line;
# only a backtracking one comes near either.
SEARCH_SECONDS = 2.0
ONE_SEARCH_SECONDS = 0.25
# How many characters a pattern's counted repeats may stand for once unrolled.
MAX_EXPANSION = 100_000


class PatternInvalid(ValueError):
    """The text is not a regular expression (the engine's own message)."""


class PatternTooCostly(Exception):
    """The pattern took longer than its budget to search, or would take too long to compile."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def note(self, words: list[str]) -> str:
        """One sentence for the tool's result: what happened and what was searched instead."""
        instead = ("its words instead: " + ", ".join(words)) if words else "nothing instead (it has no words)"
        return f"The regular expression {self.reason}; searched for {instead} (case-insensitive)."


@dataclass
class BoundedPattern:
    """A compiled pattern and what is left of its search budget.

    The engine's ``timeout=`` counts the process's CPU time, so on a busy machine one search may
    take several times longer on the clock. Two bounds keep the clock time short whatever the
    load: each search gets at most :data:`ONE_SEARCH_SECONDS` of CPU time (no ordinary pattern
    needs that for one line), and the clock time all searches took is subtracted from the
    budget of :data:`SEARCH_SECONDS`."""

    compiled: regex.Pattern[str]
    seconds: float = SEARCH_SECONDS
    _left: float = field(init=False)

    def __post_init__(self) -> None:
        self._left = self.seconds

    def search(self, text: str) -> regex.Match[str] | None:
        return self._bounded(self.compiled.search, text)

    def fullmatch(self, text: str) -> regex.Match[str] | None:
        return self._bounded(self.compiled.fullmatch, text)

    def _bounded(self, method: Callable[..., regex.Match[str] | None], text: str) -> regex.Match[str] | None:
        if self._left <= 0:
            raise PatternTooCostly(f"took longer than {self.seconds:g} s to search")
        start = time.monotonic()
        try:
            # concurrent: the engine lets go of the GIL, so the kernel's other threads keep going
            return method(text, concurrent=True, timeout=min(self._left, ONE_SEARCH_SECONDS))
        except TimeoutError as e:
            self._left = 0
            raise PatternTooCostly(f"took longer than {ONE_SEARCH_SECONDS:g} s to search one line (it "
                                   "backtracks)") from e
        finally:
            self._left -= time.monotonic() - start


def compile_bounded(pattern: str, *, ignore_case: bool = False, seconds: float = SEARCH_SECONDS) -> BoundedPattern:
    """``pattern`` compiled for bounded searching. Raises :class:`PatternInvalid` for a text that is
    not a regular expression, :class:`PatternTooCostly` for one whose repeats unroll too far."""
    size = _expansion(pattern)
    if size > MAX_EXPANSION:
        raise PatternTooCostly(f"repeats expand to over {MAX_EXPANSION:,} characters, too many to compile")
    try:
        compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except (regex.error, OverflowError, RecursionError) as e:
        raise PatternInvalid(str(e)) from e
    return BoundedPattern(compiled, seconds)


def _expansion(pattern: str) -> int:
    """About how many characters the pattern stands for with each counted repeat unrolled: every
    atom counts 1, a group the sum of what it holds, ``X{m,n}`` the size of X times the larger
    bound. Over-counts alternatives (their sum, not their largest), never under-counts."""
    frames = [[0, 0]]  # per open group: [total so far, size of the last atom]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        size = 1
        if c == "\\":
            i += 2
            if pattern[i - 1:i] in ("N", "p", "P") and pattern[i:i + 1] == "{":
                i = _after(pattern, i, "}")
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            if pattern.startswith("(?#", i):
                i = _after(pattern, i, ")")
                continue
            frames.append([0, 0])
            i += 1
            continue
        elif c == ")" and len(frames) > 1:
            size = frames.pop()[0]
            i += 1
        elif c == "{" and (repeat := _repeat(pattern, i)) is not None:
            count, i = repeat
            frame = frames[-1]
            frame[0] += frame[1] * (count - 1)
            frame[1] *= count
            if frame[0] > MAX_EXPANSION:
                return frame[0]
            continue
        elif c in "|*+?":
            i += 1
            continue
        else:
            i += 1
        frames[-1][0] += size
        frames[-1][1] = size
    return sum(f[0] for f in frames)


def _after(pattern: str, i: int, closing: str) -> int:
    j = pattern.find(closing, i)
    return len(pattern) if j < 0 else j + 1


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``i`` (``[]a]`` and ``[^]a]`` hold ``]``)."""
    j = i + 1
    if pattern[j:j + 1] == "^":
        j += 1
    if pattern[j:j + 1] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _repeat(pattern: str, i: int) -> tuple[int, int] | None:
    """``{m}``, ``{m,}``, ``{,n}`` or ``{m,n}`` at ``i``: (the larger bound, the index after it)."""
    match = _REPEAT.match(pattern, i)
    if match is None or not (match[1] or match[3]):
        return None  # a literal brace
    bounds = [int(b) if len(b) < 10 else 10**9 for b in (match[1], match[3]) if b]
    return max(*bounds, 1), match.end()


_REPEAT = regex.compile(r"\{(\d*)(,?)(\d*)\}")
_ESCAPE = regex.compile(r"\\(?:[pPN]\{[^}]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)", regex.DOTALL)
_COUNT = regex.compile(r"\{\d*,?\d*\}")
_WORD = regex.compile(r"\w+")


def pattern_words(pattern: str) -> list[str]:
    """The words of a pattern, lower-cased, for the fallback search: escapes (``\\s``, ``\\d``)
    and repeat counts (``{3}``) are not words. ``error(.|\\s)*timeout`` -> ["error", "timeout"]."""
    text = _COUNT.sub(" ", _ESCAPE.sub(" ", pattern))
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))


def has_words(text: str, words: list[str]) -> bool:
    """Whether ``text`` holds every one of ``words`` (lower-cased), anywhere, case-insensitive."""
    lowered = text.lower()
    return bool(words) and all(w in lowered for w in words)
