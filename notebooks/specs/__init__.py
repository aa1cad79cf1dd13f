"""The teaching notebooks, one spec module each (cells, the scripted turn of each ``%%agent``
cell, and the build's checks), in the order ``build.py`` builds them."""

from __future__ import annotations

from . import custom_compaction, how_compaction_works, quickstart, reproducible_session

NOTEBOOKS = [quickstart.NOTEBOOK, how_compaction_works.NOTEBOOK, custom_compaction.NOTEBOOK,
             reproducible_session.NOTEBOOK]
