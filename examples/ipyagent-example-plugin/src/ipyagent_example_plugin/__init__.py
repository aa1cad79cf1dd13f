"""An example ipyagent plugin: a tool, an ``%agent`` command and a hook (docs/extending.md)."""

from __future__ import annotations

import argparse
from typing import Any

import ipyagent

TURNS: list[int] = []  # the number of tool results of each turn the agent finished


@ipyagent.read_only  # it only reads its argument: no approval question under tool_approval="ask"
def word_count(text: str, unique: bool = False) -> int:
    """Count the words of a text.

    Args:
        text: the text whose words to count
        unique: count each distinct word once
    """
    words = text.split()
    return len(set(words) if unique else words)


def shout(args: argparse.Namespace) -> str:
    """Say a text loudly."""
    return " ".join(args.text).upper() + "!"


SHOUT = argparse.ArgumentParser(description="Say a text loudly (the example plugin's command).")
SHOUT.add_argument("text", nargs="+", help="what to say")


def count_turn(event: Any) -> None:
    TURNS.append(len(event.tool_results))


@ipyagent.hookimpl
def register_tools(register: Any) -> None:
    register(word_count)


@ipyagent.hookimpl
def register_commands(register: Any) -> None:
    register("shout", shout, parser=SHOUT)


@ipyagent.hookimpl
def register_hooks(hooks: Any) -> None:
    hooks.on("turn_end", count_turn)
