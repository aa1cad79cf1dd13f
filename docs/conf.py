"""Sphinx configuration of ipyagent's documentation (MyST Markdown, myst-nb, pydata-sphinx-theme).

    pip install ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The teaching notebooks render from their committed outputs (nothing is executed); they are
copied from ``notebooks/`` into ``docs/notebooks/`` (not committed) before the sources are read.

With the JupyterLite site (``python docs/lite/build_lite.py --docs``, which sets
``IPYAGENT_DOCS_LITE`` to the Lite folder it prepared), jupyterlite-sphinx builds the site into
``lite/`` and the tour's page gets "Run it in your browser", which opens the tour there. The plain
build above needs none of it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT / "extension")]

import ipyagent  # noqa: E402  (after the path: the package of this checkout, also uninstalled)

project = "ipyagent"
author = "the ipyagent authors"
copyright = "the ipyagent authors"
version = release = ipyagent.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "ipyagent_docs", "ipyagent_settings"]
# _contents: where jupyterlite-sphinx stages the Lite site's notebooks (a --docs build leaves it)
exclude_patterns = ["_build", "_ext", "images/*.py", "lite", "_contents"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked like every other internal link
nb_execution_mode = "off"  # the notebooks' committed outputs are the pages
nb_merge_streams = True
suppress_warnings = ["mystnb.unknown_mime_type"]  # the journal's entries (application/vnd.ipyagent.entries+json)

autodoc_typehints = "description"
autodoc_member_order = "bysource"
# api.md names the members each class shows: nothing renders that the page does not list
autodoc_default_options: dict[str, object] = {}

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

# ---- the tour in the browser (JupyterLite), only when docs/lite/build_lite.py asks -------------

LITE_DIR = os.environ.get("IPYAGENT_DOCS_LITE")
LITE_NOTEBOOKS = ["how-compaction-works"]  # the pages that get "Run it in your browser"
if LITE_DIR:
    extensions.append("jupyterlite_sphinx")
    jupyterlite_dir = LITE_DIR
    jupyterlite_bind_ipynb_suffix = False  # myst-nb renders the notebooks; Lite only runs them
    jupyterlite_silence = False


def _run_in_browser(app: Any, docname: str, source: list[str]) -> None:
    """The tour's page opens with a button that runs the committed notebook itself in JupyterLite
    (jupyterlite-sphinx's ``notebooklite`` directive, in a new tab); the page's file is unchanged."""
    name = docname.removeprefix("notebooks/")
    if not LITE_DIR or not docname.startswith("notebooks/") or name not in LITE_NOTEBOOKS:
        return
    nb = json.loads(source[0])
    button = (f"```{{notebooklite}} /notebooks/{name}.ipynb\n:new_tab: True\n"
              ":new_tab_button_text: Run it in your browser\n```\n\n"
              "Nothing to install: the page runs Python (Pyodide) and ipyagent itself, and replays the "
              "recorded session offline.")
    nb["cells"].insert(1, {"cell_type": "markdown", "id": "run-in-browser", "metadata": {}, "source": button})
    source[0] = json.dumps(nb)


def setup(app: Any) -> None:
    app.connect("source-read", _run_in_browser)
