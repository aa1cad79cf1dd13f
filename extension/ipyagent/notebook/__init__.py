"""Old import paths, kept for notebooks saved before the house move (third round).

The former flat ``notebook/`` folder is now ``kernel/`` (with ``kernel/magics/``), ``display/``,
``explorer/``, ``store/`` and ``bridge/``. What saved notebooks, older ``tour_helpers.py`` copies,
an older bridge's push code and the ``.ipynb`` reader string name still imports from here; new code
imports from the new places.
"""
