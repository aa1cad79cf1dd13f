"""Which reader :meth:`Session.from_file <ipyagent.core.Session.from_file>` uses, by file suffix.

A Pi session file (``.jsonl``, and any suffix without a reader here) is read by the core itself.
A layer that owns another format registers its reader here, so the core never imports that layer:
``ipyagent/__init__.py`` registers the notebook reader for ``.ipynb``, imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["SessionLoader", "loader_for", "register_loader"]

SessionLoader = Callable[..., Any]  # loader(path, name=None, **session_kwargs) -> Session

_LOADERS: dict[str, SessionLoader | str] = {}


def register_loader(suffix: str, loader: SessionLoader | str) -> None:
    """Read files whose suffix is ``suffix`` (``".ipynb"``) with ``loader``.

    ``loader(path, name=None, **session_kwargs)`` returns a ``Session`` (``name`` picks one
    session of a file that holds several); ``"package.module:function"`` names one that is
    imported the first time such a file is read.
    """
    _LOADERS[suffix] = loader


def loader_for(suffix: str) -> SessionLoader | None:
    """The reader registered for ``suffix`` (imported now if it was registered by name), or None."""
    loader = _LOADERS.get(suffix)
    if isinstance(loader, str):
        module, _, name = loader.partition(":")
        loader = _LOADERS[suffix] = getattr(importlib.import_module(module), name)
    return loader
