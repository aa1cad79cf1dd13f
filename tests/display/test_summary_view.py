"""A summary as people read it (display/summary_view.py): each tagged block of the appendix a
titled list, cell ids shortened, and the result still safe once rendered (issue 28, item 10)."""

from __future__ import annotations

from ipyagent.display.budget_widget import BudgetFacts, static_bundle
from ipyagent.display.summary_view import readable_summary
from ipyagent.display.untrusted import markdown_html

CELL = "9f1c2b3a-0d4e-4f5a-8b6c-7d8e9f0a1b2c"
SUMMARY = ("## Goal\nLoad the data.\n\n<read-files>\ndata/a.csv\ndata/b.csv\n</read-files>\n\n"
           f"<notebook-cells>\ncell 3 (id {CELL}): load the data\ncell 4 (id {CELL[::-1]}): plot it\n</notebook-cells>")


def test_each_block_is_a_titled_list_and_cell_ids_are_short():
    text = readable_summary(SUMMARY)
    assert "**Read files**\n\n- data/a.csv\n- data/b.csv\n" in text
    assert "**Notebook cells**\n\n- cell 3 (id 9f1c2b3a…): load the data\n- cell 4 (id c2b1a0f9…): plot it\n" in text
    assert "<read-files>" not in text and CELL not in text
    html = markdown_html(text)
    assert "<li>cell 3 (id 9f1c2b3a…): load the data</li>" in html and "<li>data/b.csv</li>" in html


def test_an_unclosed_tag_and_untrusted_html_stay_text():
    text = readable_summary("<read-files>\n<script>alert(1)</script>\nno closing tag")
    assert text == "<read-files>\n<script>alert(1)</script>\nno closing tag"
    hostile = readable_summary("<tool-errors>\n<img src=x onerror=alert(1)>\n</tool-errors>")
    assert "<img" not in markdown_html(hostile)


def test_the_widget_shows_the_readable_summary():
    facts = BudgetFacts(window=4096, total=100, latest_summary=SUMMARY)
    bundle = static_bundle(facts)
    assert "- data/a.csv" in bundle["text/markdown"]
    assert "<li>data/a.csv</li>" in bundle["text/html"]
