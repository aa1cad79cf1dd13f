"""The one gate between untrusted text and a trusted output.

Everything that came from a model, a tool or a notebook's metadata is untrusted: a notebook is a
shared file, and JupyterLab renders the ``text/html`` and ``text/markdown`` outputs of cells the
user ran without sanitising them (and signs them on save, so they render again on every open).
No such text reaches those MIME types except through a function of this module:

* :func:`escape_html` — text shown as text inside HTML.
* :func:`markdown_html` — Markdown rendered to HTML here (tables, code, emphasis, links), with raw
  HTML shown as text and no ``javascript:``/``vbscript:``/``data:``/``file:`` link made a link.
* :func:`sanitize_html` — HTML that tools produce (a DataFrame's table): an allowlist of tags and
  attributes, no scripts, no event handlers, no unsafe URLs.
* :func:`safe_markdown` — Markdown *source* for places that only take Markdown (the journal's
  readable view, ``export --format markdown``): raw HTML neutralised, unsafe links unlinked.
* :func:`code_span` — a value shown as inline code that no backtick in it can break out of.

Renderers never build HTML by concatenating raw text; they call these.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

__all__ = ["code_span", "escape_html", "is_safe_url", "markdown_html", "safe_markdown", "sanitize_html"]

_SAFE_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def escape_html(text: Any) -> str:
    """``text`` as HTML text (quotes escaped too, so it is safe inside attribute values)."""
    return html.escape(str(text), quote=True)


def is_safe_url(url: str) -> bool:
    """A link target that may become a link: relative, ``#fragment``, or http(s)/mailto.

    Entities are decoded and invisible characters dropped first, as browsers do
    (``java&#115;cript:``, ``java\\tscript:``)."""
    cleaned = _INVISIBLE.sub("", html.unescape(url)).strip()
    match = _SCHEME.match(cleaned)
    return match is None or match.group(1).lower() in _SAFE_SCHEMES


@lru_cache(maxsize=1)
def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    renderer.enable(["table", "strikethrough"])
    renderer.validateLink = is_safe_url  # an unsafe link stays literal text
    return renderer


def markdown_html(text: str) -> str:
    """Markdown → HTML that is safe to put in a trusted output."""
    return _markdown_renderer().render(str(text))


_ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div",
    "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s",
    "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
    "ul",
}
_ALLOWED_ATTRIBUTES = {
    "*": {"title", "align"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    "ol": {"start"},
}


def sanitize_html(fragment: str) -> str:
    """Tool-made HTML (a DataFrame's ``_repr_html_``, a styled table) reduced to an allowlist:
    structure and formatting stay, scripts, styles, event handlers and unsafe URLs go."""
    import nh3

    return nh3.clean(str(fragment), tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRIBUTES,
                     url_schemes=set(_SAFE_SCHEMES), link_rel="noopener noreferrer nofollow")


def code_span(text: Any) -> str:
    """``text`` as one Markdown inline code span, whatever backticks it holds (CommonMark: the
    fence is one backtick longer than the longest run inside, padded with spaces)."""
    value = str(text).replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {value} {fence}" if value else fence + " " + fence


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _fence_opener(line: str) -> tuple[str, int] | None:
    match = _FENCE_OPEN.match(line)
    if not match:
        return None
    fence, info = match.group(1), match.group(2)
    if fence[0] == "`" and "`" in info:  # CommonMark: not a fence
        return None
    return fence[0], len(fence)


def _closes(line: str, char: str, length: int) -> bool:
    stripped = line.rstrip(" \t")
    body = stripped.lstrip(" ")
    return len(stripped) - len(body) <= 3 and len(body) >= length and set(body) == {char}


_LINK_OPEN = re.compile(r"\]\(\s*<?([^)\s>]*)")
_LINK_DEFINITION = re.compile(r"^( {0,3})\[([^\]]*)\]:\s*<?(\S*)")


def _neutralise_prose(text: str) -> str:
    """Prose lines (outside fenced code): every ``<`` becomes ``&lt;`` (no tag, comment or
    autolink can form), and a link or link definition to an unsafe URL loses its bracket."""
    out = text.replace("<", "&lt;")
    out = _LINK_OPEN.sub(lambda m: m.group(0) if is_safe_url(m.group(1)) else "\\]" + m.group(0)[1:], out)
    lines = []
    for line in out.split("\n"):
        match = _LINK_DEFINITION.match(line)
        if match and not is_safe_url(match.group(3)):
            line = match.group(1) + "\\" + line[len(match.group(1)):]
        lines.append(line)
    return "\n".join(lines)


def safe_markdown(text: str) -> str:
    """Markdown source in which no raw HTML can take effect and no unsafe link is a link.

    Fenced code blocks are kept as they are (their content is literal in every renderer); in
    the rest every ``<`` is escaped, so inline code there shows ``&lt;`` where the text had
    ``<`` — the price of never guessing wrong about where a code span ends."""
    lines = str(text).split("\n")
    out: list[str] = []
    prose: list[str] = []
    fence: tuple[str, int] | None = None
    for line in lines:
        if fence is None:
            opener = _fence_opener(line)
            if opener is None:
                prose.append(line)
                continue
            if prose:
                out.append(_neutralise_prose("\n".join(prose)))
                prose = []
            fence = opener
            out.append(line)
        else:
            out.append(line)
            if _closes(line, *fence):
                fence = None
    if prose:
        out.append(_neutralise_prose("\n".join(prose)))
    return "\n".join(out)
