"""``%agent pin TEXT`` · ``%agent pins`` · ``%agent unpin N``: instructions that stay in the system
prompt for the whole session, through every compaction.

Each pin and unpin is a session entry (a Pi ``custom`` entry, ``ipyagent/agent/prompt/pinned.py``), saved
with the notebook like every other entry: pins survive a kernel restart, an export and a replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ipyagent.agent.prompt.pinned import MAX_PIN_BYTES, PIN_TYPE, Pin, active_pins, pin_entry, unpin_entry
from ipyagent.kernel.magics.commands import CONTEXT, argument, command, magic_arguments, parse_argstring
from ipyagent.text import chars4

if TYPE_CHECKING:
    from ipyagent.core import Session
    from ipyagent.kernel.runtime import AgentRuntime


def _pins(runtime: AgentRuntime) -> tuple[Any, list[Pin]]:
    slot = runtime.slot()
    return slot, active_pins(slot.session.entries)


@command("pin", group=CONTEXT)
@magic_arguments()
@argument("text", nargs="*", help="the instruction, as written after 'pin' (quotes are kept)")
def agent_pin(runtime: AgentRuntime, rest: str) -> None:
    """Keep an instruction in the system prompt for the whole session (it survives compaction)."""
    text = rest.strip()
    if text in ("-h", "--help"):
        print(agent_pin.__doc__)
        return
    if not text:
        raise UsageError("%agent pin needs the instruction, e.g. %agent pin Answer in British English.")
    slot, pins = _pins(runtime)
    number = next((n for n, pin in enumerate(pins, 1) if pin.text == text), None)
    if number is not None and text in _pinned_on_path(slot.session):
        print(f"already pinned as #{number}")
        return
    # A pin in force but made on another branch is recorded again here, so that Restart & Run All
    # (each re-run %%agent cell forks) rebuilds the path the visible cells describe.
    slot.session.append(pin_entry(text))
    runtime.persist(slot)
    cut = (f"; it is cut to {MAX_PIN_BYTES // 1024} KB there, as instruction files are"
           if Pin("", text).cut else "")
    print(f"pinned #{number or len(pins) + 1} ({chars4(text)} tokens) in session {slot.name!r}; "
          f"it goes into the system prompt of every request{cut}")


def _pinned_on_path(session: Session) -> set[str]:
    return {e["data"]["text"] for e in session.path() if e.get("type") == "custom"
            and e.get("customType") == PIN_TYPE and isinstance(e.get("data"), dict)
            and isinstance(e["data"].get("text"), str)}


@command("pins", group=CONTEXT)
@magic_arguments()
def agent_pins(runtime: AgentRuntime, rest: str) -> None:
    """The pinned instructions of the active session, numbered for %agent unpin."""
    parse_argstring(agent_pins, rest)
    slot, pins = _pins(runtime)
    if not pins:
        print(f"no pinned instructions in session {slot.name!r} (%agent pin TEXT adds one)")
        return
    for number, pin in enumerate(pins, 1):
        cut = f"; cut to {MAX_PIN_BYTES // 1024} KB in the system prompt" if pin.cut else ""
        print(f"{number}. {pin.text}  ({chars4(pin.text)} tokens, entry {pin.id}{cut})")


@command("unpin", group=CONTEXT)
@magic_arguments()
@argument("number", help="the pin's number in %agent pins (or its entry id)")
def agent_unpin(runtime: AgentRuntime, rest: str) -> None:
    """Remove pinned instruction N (see %agent pins)."""
    args = parse_argstring(agent_unpin, rest)
    slot, pins = _pins(runtime)
    chosen = next((p for p in pins if p.id == args.number), None)
    if chosen is None:
        try:
            number = int(args.number)
        except ValueError:
            number = 0
        if not 1 <= number <= len(pins):
            raise UsageError(f"no pin {args.number!r}: session {slot.name!r} has {len(pins)} "
                             "(%agent pins lists them)")
        chosen = pins[number - 1]
    slot.session.append(unpin_entry(chosen.id))
    runtime.persist(slot)
    print(f"unpinned: {chosen.text}")
