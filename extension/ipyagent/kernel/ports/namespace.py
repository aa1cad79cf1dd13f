"""The user namespace, cheaply: a snapshot of which object each name holds, the difference between
two snapshots, a short description of a value (type, ``shape`` or ``len`` where that is cheap and
safe: "DataFrame, shape (100, 3)", "list, len 39", for the notebook-activity block and the artifact
ledger alike) or a bounded repr of it.

A snapshot keeps ``id()`` and the type, never the objects (so nothing is kept alive). Names that
``%who`` hides are left out: those starting with ``_`` and IPython's own (``In``, ``Out``,
``get_ipython``…).
"""

from __future__ import annotations

import collections
import reprlib
import types
from collections.abc import Callable, Mapping
from typing import Any

from ipyagent.agent.prompt.notebook_context import NamespaceChange

Snapshot = dict[str, tuple[int, type]]

_SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray, range, collections.deque)
_MISSING = object()


def visible_names(user_ns: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> dict[str, Any]:
    hidden = hidden or {}
    return {name: value for name, value in list(user_ns.items())
            if not name.startswith("_") and hidden.get(name, _MISSING) is not value}


def snapshot(user_ns: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> Snapshot:
    return {name: (id(value), type(value)) for name, value in visible_names(user_ns, hidden).items()}


def type_name(value: Any) -> str:
    return type(value).__name__


def size_of(value: Any) -> str:
    """``shape (3, 2)`` for array-likes, ``len 4`` for the builtin containers; "" otherwise (a
    ``len()`` or attribute that could compute something expensive is never called)."""
    try:
        if getattr(type(value), "shape", None) is not None:
            shape = value.shape
            if isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
                return f"shape {tuple(shape)}"
            return ""
        if isinstance(value, _SIZED):
            return f"len {len(value):,}"
    except Exception:  # noqa: BLE001 - a value's own attribute failing is "no size", never an error
        return ""
    return ""


def describe_value(value: Any) -> str:
    """What a value is, in a few words: "module json", "class Grid", "function", or its type's
    name with :func:`size_of` ("list, len 39")."""
    if isinstance(value, types.ModuleType):
        return f"module {getattr(value, '__name__', '?')}"
    if isinstance(value, type):
        return f"class {getattr(value, '__qualname__', value.__name__)}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return "function"
    size = size_of(value)
    return f"{type_name(value)}, {size}" if size else type_name(value)


def namespace_describer(namespace: Mapping[str, Any]) -> Callable[[list[str]], dict[str, str]]:
    """A ``describe`` callback over ``namespace`` (the kernel's ``user_ns``) for the artifact
    ledger: the names defined in it now, each with its description."""

    def describe(names: list[str]) -> dict[str, str]:
        return {name: describe_value(namespace[name]) for name in names if name in namespace}

    return describe


def diff(before: Snapshot, user_ns: Mapping[str, Any], hidden: Mapping[str, Any] | None = None,
         ) -> tuple[list[NamespaceChange], Snapshot]:
    """The changes from ``before`` to the namespace now (added, rebound, removed; sorted by name
    within each kind) and the snapshot of now."""
    now = visible_names(user_ns, hidden)
    changes: list[NamespaceChange] = []
    for name in sorted(now):
        value = now[name]
        old = before.get(name)
        if old is None or old[0] != id(value):
            changes.append(NamespaceChange(name, "added" if old is None else "rebound", type_name(value),
                                           size_of(value)))
    for name in sorted(set(before) - set(now)):
        changes.append(NamespaceChange(name, "removed", before[name][1].__name__))
    return changes, {name: (id(value), type(value)) for name, value in now.items()}


_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 60
_REPR.maxdict = 40
_REPR.maxarray = 60
_REPR.maxstring = 2000
_REPR.maxlong = 400
_REPR.maxother = 4000


def bounded_repr(value: Any) -> str:
    """A repr that never walks a whole huge container (long lists, dicts and strings are elided)."""
    try:
        return _REPR.repr(value)
    except Exception as exc:  # noqa: BLE001 - the user's __repr__ may raise anything
        return f"<{type_name(value)} object; its repr failed: {type(exc).__name__}: {exc}>"
