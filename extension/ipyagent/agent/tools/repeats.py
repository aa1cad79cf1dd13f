"""The guard against a failing tool call made again and again within one run.

A small model that meets an error often makes the very same call again (same tool, same
arguments), gets the same error, and goes on until the tool-round cap (issue 37: one
``read(path='{{}}')`` repeated for minutes). :class:`RepeatedFailures` counts each failure by
what makes it the same — the tool's name, its arguments (as canonical JSON) and the error's text —
and says it to the model once, in the second identical result; the third stops the run (the loop
says so in one line). A call that succeeds, or fails differently, counts apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["REPEAT_LIMIT", "RepeatedFailures"]

REPEAT_LIMIT = 3  # the same failing call this many times stops the run

REPEAT_NOTE = ("\n\n[ipyagent: this is the same call, with the same arguments, that failed the same way "
               "before. Do not make it again: change the arguments, use another tool, or answer the user "
               "with what you know. A third identical failing call stops the run.]")


def _key(name: str, arguments: dict[str, Any], error: str) -> str:
    return json.dumps([name, arguments, error], sort_keys=True, ensure_ascii=False, default=repr)


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class RepeatedFailures:
    """The failing calls of one run, by tool, arguments and error (see the module docstring)."""

    limit: int = REPEAT_LIMIT
    _counts: dict[str, int] = field(default_factory=dict)
    stop: str = ""  # why the run must stop after this round ("" while it need not)

    def reset(self) -> None:
        """A new run: nothing counted."""
        self._counts.clear()
        self.stop = ""

    def checked(self, name: str, arguments: dict[str, Any], text: str, is_error: bool) -> str:
        """The result text the model is to see for this call's outcome: ``text``, with the note
        added to the second identical failure; the third sets :attr:`stop`."""
        if not is_error:
            return text
        base = text.removesuffix(REPEAT_NOTE)  # a replayed result carries the note already
        key = _key(name, arguments, base)
        count = self._counts[key] = self._counts.get(key, 0) + 1
        if count == self.limit - 1:
            return base + REPEAT_NOTE
        if count >= self.limit and not self.stop:
            self.stop = (f"Stopped: the model made the same failing call {count} times ({name} with the "
                         f"same arguments; the error: {_one_line(base)}). A new %%agent cell continues from here.")
        return text
