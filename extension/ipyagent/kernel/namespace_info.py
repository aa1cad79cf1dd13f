"""What a kernel variable is, in a few words ("DataFrame, shape (100, 3)", "list, len 39"), for
the artifact ledger a compaction writes. Cheap by construction: a type name, a ``shape`` that is
already a tuple of ints, ``len`` of built-in containers only; nothing is computed or printed."""

from __future__ import annotations

import collections
import types
from typing import Any, Callable, Mapping

__all__ = ["describe_value", "namespace_describer"]

_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset, range, collections.deque)


def describe_value(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {getattr(value, '__name__', '?')}"
    if isinstance(value, type):
        return f"class {getattr(value, '__qualname__', value.__name__)}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return "function"
    name = type(value).__name__
    try:
        shape = getattr(value, "shape", None)
    except Exception:
        shape = None
    if isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        return f"{name}, shape {tuple(shape)}"
    if isinstance(value, _SIZED):
        try:
            return f"{name}, len {len(value)}"
        except Exception:
            return name
    return name


def namespace_describer(namespace: Mapping[str, Any]) -> Callable[[list[str]], dict[str, str]]:
    """A ``describe`` callback over ``namespace`` (the kernel's ``user_ns``): the names defined
    in it now, each with its description."""

    def describe(names: list[str]) -> dict[str, str]:
        return {name: describe_value(namespace[name]) for name in names if name in namespace}

    return describe
