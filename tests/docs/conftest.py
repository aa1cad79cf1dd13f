"""The Reference section of the documentation and the magics page, built once per test session
(the real ``docs/conf.py`` and extensions, the pydata theme): what the tests of the generated pages
and the sidebar read."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.sphinx_pages import build_pages, toctree_entries


@pytest.fixture(scope="session")
def reference_section(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built HTML of docs/reference.md, the pages its toctree lists, and docs/magics.md (the
    other generated page) beside it."""
    pages = ["reference", *toctree_entries("reference"), "magics"]
    index = "# test\n\n```{toctree}\nreference\nmagics\n```\n"
    return build_pages(tmp_path_factory.mktemp("reference"), pages, index=index)
