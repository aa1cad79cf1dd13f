"""Old path of :mod:`ipyagent.store.ipynb` (the ``.ipynb`` reader string of older releases)."""

from ipyagent.store.ipynb import read_notebook, session_from_notebook_file

__all__ = ["read_notebook", "session_from_notebook_file"]
