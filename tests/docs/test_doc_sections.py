"""The site's sections: the index lists section pages only, each section page has a toctree, and
every page sits in exactly one toctree — so pydata-sphinx-theme's "Section Navigation" sidebar
lists a page's siblings (it shows the toctree of the page's top-level section, which is empty when
the page itself is one of the index's entries)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from support.sphinx_pages import DOCS, ROOT, toctree_entries

SECTIONS = ["using", "how-it-works", "teaching-notebooks", "reference", "developing"]


def test_the_index_lists_the_section_pages_and_each_has_a_toctree():
    assert toctree_entries("index") == SECTIONS
    for section in SECTIONS:
        assert toctree_entries(section), f"docs/{section}.md has no toctree"


def test_every_page_is_in_exactly_one_toctree():
    listed = Counter(entry for page in DOCS.glob("*.md") for entry in toctree_entries(page.stem))
    pages = {page.stem for page in DOCS.glob("*.md")} - {"index"}
    notebooks = {f"notebooks/{nb.stem}" for nb in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(listed) == pages | notebooks
    assert [entry for entry, count in listed.items() if count > 1] == []
    for page in pages - set(SECTIONS):  # a leaf page is no section of its own
        assert page not in toctree_entries("index"), page


def test_a_page_of_a_section_shows_its_siblings_in_the_sidebar(reference_section: Path):
    html = (reference_section / "cli.html").read_text(encoding="utf-8")
    nav = html.split('class="bd-docs-nav', 1)[1].split("</nav>", 1)[0]
    linked = re.findall(r'href="([^"#]+)\.html"', nav)
    assert set(toctree_entries("reference")) - {"cli"} <= set(linked), linked  # cli itself links to "#"
