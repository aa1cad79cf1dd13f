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

Where ``regex`` is not installed (a Pyodide kernel in a browser page: it has no WebAssembly
build), the standard ``re`` engine searches, which has no timeout. There the bound comes before
the search: :func:`search_steps` counts, from the parsed pattern, how many ways a backtracking
search of one line could try (each unbounded repeat multiplies by the line's length; a repeat
around anything that can match in more than one way, such as ``(a|aa)+`` or ``(a+)+``, raises
it to the power of the line's length), and a line whose count passes :data:`MAX_STEPS` is not searched with the
pattern: the call falls back to the pattern's words, as above. The pattern's own length is capped
too (:data:`MAX_PATTERN_CHARS`). So no pattern can backtrack for long in either engine.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_regex: Any
try:  # the engine with a timeout; absent in a browser page (Pyodide), where ``re`` searches
    import regex as _regex
except ImportError:  # pragma: no cover - every CPython install has it (a dependency off the browser)
    _regex = None

# re's parser (re._parser since Python 3.11, sre_parse before): the tree search_steps counts
_sre_parse: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")

__all__ = [
    "MAX_EXPANSION",
    "MAX_PATTERN_CHARS",
    "MAX_STEPS",
    "ONE_SEARCH_SECONDS",
    "SEARCH_SECONDS",
    "BoundedPattern",
    "PatternInvalid",
    "PatternTooCostly",
    "compile_bounded",
    "has_words",
    "pattern_words",
    "search_steps",
]

# The time one tool call may spend searching with its pattern, over all the lines it searches,
# and the CPU time one search (one line) may take. An ordinary pattern takes microseconds a line;
# only a backtracking one comes near either.
SEARCH_SECONDS = 2.0
ONE_SEARCH_SECONDS = 0.25
# How many characters a pattern's counted repeats may stand for once unrolled.
MAX_EXPANSION = 100_000
# Without ``regex`` (the browser): the longest pattern searched with ``re``, and how many ways one
# search of one line may try at most (:func:`search_steps`); a few million take well under a
# second. ``error.*timeout`` over a 1,250-character line is about 1.6 million.
MAX_PATTERN_CHARS = 1_000
MAX_STEPS = 5_000_000


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

    With ``regex``: the engine's ``timeout=`` counts the process's CPU time, so on a busy machine
    one search may take several times longer on the clock. Two bounds keep the clock time short
    whatever the load: each search gets at most :data:`ONE_SEARCH_SECONDS` of CPU time (no
    ordinary pattern needs that for one line), and the clock time all searches took is
    subtracted from the budget of :data:`SEARCH_SECONDS`.

    With ``re`` (``steps`` is set: the pattern's count of ways, :func:`search_steps`): a line on
    which the search could try more than :data:`MAX_STEPS` ways is refused before it starts, and
    the clock budget still applies between lines."""

    compiled: Any  # regex.Pattern[str], or re.Pattern[str] where regex is absent
    seconds: float = SEARCH_SECONDS
    steps: Callable[[str, bool], float | None] | None = None
    _left: float = field(init=False)

    def __post_init__(self) -> None:
        self._left = self.seconds

    def search(self, text: str) -> Any:
        """The first match in ``text`` (a match object of the engine), or None."""
        return self._bounded(self.compiled.search, text, anchored=False)

    def fullmatch(self, text: str) -> Any:
        return self._bounded(self.compiled.fullmatch, text, anchored=True)

    def _bounded(self, method: Callable[..., Any], text: str, *, anchored: bool) -> Any:
        if self._left <= 0:
            raise PatternTooCostly(f"took longer than {self.seconds:g} s to search")
        if self.steps is not None:
            tries = self.steps(text, anchored)
            if tries is None or tries > MAX_STEPS:
                self._left = 0
                raise PatternTooCostly(f"would take over {MAX_STEPS:,} steps to search one line (it backtracks; "
                                       "no search timeout here)")
        start = time.monotonic()
        try:
            if self.steps is not None:
                return method(text)
            # concurrent: the engine lets go of the GIL, so the kernel's other threads keep going
            return method(text, concurrent=True, timeout=min(self._left, ONE_SEARCH_SECONDS))
        except TimeoutError as e:
            self._left = 0
            raise PatternTooCostly(f"took longer than {ONE_SEARCH_SECONDS:g} s to search one line (it "
                                   "backtracks)") from e
        finally:
            self._left -= time.monotonic() - start


def compile_bounded(pattern: str, *, ignore_case: bool = False, seconds: float = SEARCH_SECONDS,
                    engine: Any = None) -> BoundedPattern:
    """``pattern`` compiled for bounded searching. Raises :class:`PatternInvalid` for a text that is
    not a regular expression, :class:`PatternTooCostly` for one whose repeats unroll too far.

    ``engine``: ``re`` or the ``regex`` module (default: ``regex`` where installed, else ``re``,
    bounded by :func:`search_steps`)."""
    size = _expansion(pattern)
    if size > MAX_EXPANSION:
        raise PatternTooCostly(f"repeats expand to over {MAX_EXPANSION:,} characters, too many to compile")
    module = engine if engine is not None else (_regex if _regex is not None else re)
    if module is re and len(pattern) > MAX_PATTERN_CHARS:
        raise PatternTooCostly(f"is longer than {MAX_PATTERN_CHARS:,} characters (no search timeout in "
                               "this Python)")
    errors: tuple[type[BaseException], ...] = (re.error, OverflowError, RecursionError)
    if _regex is not None:
        errors += (_regex.error,)
    try:
        compiled = module.compile(pattern, module.IGNORECASE if ignore_case else 0)
        steps = _steps_of(pattern, module.IGNORECASE if ignore_case else 0) if module is re else None
    except errors as e:
        raise PatternInvalid(str(e)) from e
    return BoundedPattern(compiled, seconds, steps)


# ---- ways a backtracking search may try (the bound where ``re`` searches) ----------------------

_ONE_WAY = {"LITERAL", "NOT_LITERAL", "IN", "ANY", "CATEGORY", "AT", "GROUPREF", "RANGE", "NEGATE",
            "CHARSET", "BIGCHARSET", "FAILURE", "SUCCESS"}
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_FAR = MAX_STEPS * 1e6
_LOG_FAR = math.log(_FAR)


def _steps_of(pattern: str, flags: int) -> Callable[[str, bool], float | None]:
    """The tries one search of a line may make: the ways from one position times the positions a
    search starts from (only where the pattern's leading literal text occurs, when it has one)."""
    parsed = _sre_parse.parse(pattern, flags)
    folded = bool(flags & re.IGNORECASE)
    prefix = "".join(chr(arg) for _op, arg in _leading_literals(parsed))
    prefix = prefix.lower() if folded else prefix

    @functools.lru_cache(maxsize=256)
    def ways(length: int) -> float | None:
        return search_steps(parsed, length)

    def tries(text: str, anchored: bool) -> float | None:
        per_start = ways(len(text))
        if per_start is None or anchored:
            return per_start
        starts = (text.lower() if folded else text).count(prefix) if prefix else len(text) + 1
        return per_start * starts

    return tries


def _leading_literals(parsed: Any) -> list[tuple[Any, int]]:
    found = []
    for op, arg in parsed:
        if _name(op) != "LITERAL":
            break
        found.append((op, arg))
    return found


def search_steps(parsed: Any, length: int) -> float | None:
    """How many ways a backtracking search from one position of a ``length``-character line may
    try ``parsed`` (``re``'s parse tree), over-counted; None where that is far past any cap. A
    sequence multiplies its parts' counts, an alternative adds its branches', an unbounded repeat
    of a one-way item counts ``length + 1`` (where it stops), ``{m,n}`` counts ``n - m + 1``, ``?``
    counts 1 + its part's; a repeat of a part with k ways counts k to the power of its rounds."""
    total = 1.0
    for op, arg in parsed:
        ways = _item_steps(_name(op), arg, length)
        if ways is None:
            return None
        total *= ways
        if total > _FAR:
            return None  # far past any cap: no need to count on
    return total


def _name(op: Any) -> str:
    return str(getattr(op, "name", op))


def _item_steps(name: str, arg: Any, length: int) -> float | None:
    if name in _ONE_WAY:
        return 1.0
    if name == "SUBPATTERN":
        return search_steps(arg[-1], length)
    if name == "ATOMIC_GROUP":
        return search_steps(arg, length)
    if name == "BRANCH":
        counts = [search_steps(branch, length) for branch in arg[1]]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
    if name in ("ASSERT", "ASSERT_NOT"):
        return search_steps(arg[1], length)
    if name == "GROUPREF_EXISTS":
        counts = [search_steps(branch, length) if branch is not None else 1.0 for branch in arg[1:]]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
    if name in _REPEATS:
        low, high, body = arg
        inner = search_steps(body, length)
        if inner is None:
            return None
        if high <= 1:
            return 1.0 + inner  # an optional part: taken or not
        upper = length if high == _sre_parse.MAXREPEAT else min(high, length)
        if inner > 1:  # each round may match in several ways: up to inner ** rounds (exponential)
            return None if upper * math.log(inner) > _LOG_FAR else 2 * inner ** upper
        return float(max(upper - low, 0) + 1)
    return None  # an operator not counted here: treated as costly


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


_REPEAT = re.compile(r"\{(\d*)(,?)(\d*)\}")
_ESCAPE = re.compile(r"\\(?:[pPN]\{[^}]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)", re.DOTALL)
_COUNT = re.compile(r"\{\d*,?\d*\}")
_WORD = re.compile(r"\w+")


def pattern_words(pattern: str) -> list[str]:
    """The words of a pattern, lower-cased, for the fallback search: escapes (``\\s``, ``\\d``)
    and repeat counts (``{3}``) are not words. ``error(.|\\s)*timeout`` -> ["error", "timeout"]."""
    text = _COUNT.sub(" ", _ESCAPE.sub(" ", pattern))
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))


def has_words(text: str, words: list[str]) -> bool:
    """Whether ``text`` holds every one of ``words`` (lower-cased), anywhere, case-insensitive."""
    lowered = text.lower()
    return bool(words) and all(w in lowered for w in words)
