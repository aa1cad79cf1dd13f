"""The Reference section of the documentation, built once per test session (real ``docs/conf.py``,
real extensions, the pydata theme): what the API, settings and sidebar tests read."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.sphinx_pages import build_pages, toctree_entries


@pytest.fixture(scope="session")
def reference_section(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built HTML of docs/reference.md and the pages its toctree lists (an index that lists only it)."""
    pages = ["reference", *toctree_entries("reference")]
    return build_pages(tmp_path_factory.mktemp("reference"), pages, index="# test\n\n```{toctree}\nreference\n```\n")
