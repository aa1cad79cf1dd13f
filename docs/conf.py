"""Sphinx configuration of ipyagent's documentation (MyST Markdown, myst-nb, pydata-sphinx-theme).

    pip install ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The teaching notebooks render from their committed outputs (nothing is executed); they are
copied from ``notebooks/`` into ``docs/notebooks/`` (not committed) before the sources are read.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT / "extension")]

import ipyagent  # noqa: E402  (after the path: the package of this checkout, also uninstalled)

project = "ipyagent"
author = "the ipyagent authors"
copyright = "the ipyagent authors"
version = release = ipyagent.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "ipyagent_docs"]
exclude_patterns = ["_build", "_ext", "images/*.py"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked like every other internal link
nb_execution_mode = "off"  # the notebooks' committed outputs are the pages
nb_merge_streams = True
suppress_warnings = ["mystnb.unknown_mime_type"]  # the journal's entries (application/vnd.ipyagent.entries+json)

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "pydata_sphinx_theme"
html_title = f"ipyagent {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
}


def _copy_notebooks() -> None:
    """The committed teaching notebooks, as pages (a copy only when its bytes changed)."""
    target = DOCS / "notebooks"
    target.mkdir(exist_ok=True)
    for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = target / source.name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copyfile(source, copy)


_copy_notebooks()
