"""The gate for untrusted text (ipyagent.notebook.untrusted): no raw HTML and no unsafe link gets
through, checked by rendering the result with two independent Markdown parsers that DO allow raw
HTML (markdown-it-py in HTML mode, mistune)."""

from __future__ import annotations

import re

import markdown_it
import mistune
import pytest

from ipyagent.notebook.untrusted import code_span, escape_html, is_safe_url, markdown_html, safe_markdown, sanitize_html

PAYLOADS = [
    "<script>window.pwned = 1</script>",
    "<img src=x onerror=\"window.pwned=1\">",
    "<svg onload=\"window.pwned=1\"></svg>",
    "</details><script>window.pwned=1</script>",
    "[click](javascript:window.pwned=1)",
    "[click]( java&#115;cript:window.pwned=1)",
    "[click][r]\n\n[r]: javascript:window.pwned=1",
    "<a href=\"javascript:window.pwned=1\">x</a>",
    "`code` <iframe src=javascript:1>",
    "```\n<b>inside code</b>\n```\n<img src=x onerror=1>",
    "```py`\n<img src=x onerror=1>\n```",  # not a fence (backtick in the info string)
    "| a | b |\n|---|---|\n| <img src=x onerror=1> | [x](javascript:1) |",
]
_RAW_TAG = re.compile(r"<(script|img|svg|iframe|details|/details|a\s+href=\"javascript)", re.IGNORECASE)


def _renders() -> list:
    return [markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render, mistune.html]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_safe_markdown_leaves_no_raw_html_and_no_unsafe_link(payload):
    for render in _renders():
        rendered = render(safe_markdown(payload))
        assert not _RAW_TAG.search(rendered), rendered
        assert "javascript:" not in re.sub(r">[^<]*<", "><", rendered).lower()  # only as visible text


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_html_and_escape(payload):
    assert not _RAW_TAG.search(markdown_html(payload))
    assert not _RAW_TAG.search(escape_html(payload))


def test_markdown_keeps_tables_code_and_links():
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nif a < b:\n    pass\n```\n\n[docs](https://example.org)"
    rendered = markdown_html(text)
    assert "<table>" in rendered and "<td>1</td>" in rendered
    assert "if a &lt; b:" in rendered and "<pre><code" in rendered
    assert '<a href="https://example.org">docs</a>' in rendered
    kept = safe_markdown(text)
    assert "```python\nif a < b:" in kept and "[docs](https://example.org)" in kept


def test_sanitize_html_keeps_a_table_and_drops_handlers():
    cleaned = sanitize_html('<table class="dataframe"><tr><td onclick="x()">1</td></tr></table>'
                            '<script>x()</script><img src="javascript:x()" onerror="x()">'
                            '<a href="javascript:x()">l</a><style>td{}</style>')
    assert "<table" in cleaned and "<td>1</td>" in cleaned
    assert "onclick" not in cleaned and "<script" not in cleaned and "onerror" not in cleaned
    assert "javascript" not in cleaned and "<style" not in cleaned


def test_code_span_cannot_be_broken_out_of():
    for value in ["plain", "a`b", "``x``", "`"]:
        rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).renderInline(code_span(value + "<b>x</b>"))
        assert rendered.startswith("<code>") and rendered.endswith("</code>") and rendered.count("<code>") == 1


def test_safe_urls():
    assert is_safe_url("https://a.b") and is_safe_url("#x") and is_safe_url("relative/path.html")
    for bad in ["javascript:x", "JaVaScRiPt:x", "java\tscript:x", "java&#115;cript:x", "vbscript:x", "data:text/html,x",
                " javascript:x"]:
        assert not is_safe_url(bad), bad
