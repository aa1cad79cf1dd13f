"""The one gate between untrusted text and a trusted output.

Everything that came from a model, a tool or a notebook's metadata is untrusted: a notebook is a
shared file, and JupyterLab renders the ``text/html`` and ``text/markdown`` outputs of cells the
user ran without sanitising them (and signs them on save, so they render again on every open).
No such text reaches those MIME types except through a function of this module:

* :func:`escape_html` — text shown as text inside HTML.
* :func:`markdown_html` — Markdown rendered to HTML here (tables, code, emphasis, links), with raw
  HTML shown as text, no ``javascript:``/``vbscript:``/``data:``/``file:`` link made a link and
  images shown as links (an image loads by itself: a model could leak data through its URL);
  the result also passes an allowlist sanitiser.
* :func:`sanitize_html` — HTML that tools produce (a DataFrame's table): an allowlist of tags and
  attributes, no scripts, no event handlers, no unsafe URLs.

Where ``nh3`` is not installed (a Pyodide kernel in a browser page: it has no WebAssembly build),
tool HTML is escaped, shown as its text, never passed through; Markdown is still rendered with
raw HTML off and unsafe links refused, only without the second check.
* :func:`safe_markdown` — Markdown *source* for places that only take Markdown (the widget's
  Markdown view, ``export --format markdown``): raw HTML neutralised, unsafe links and images
  unlinked, fenced code re-fenced so that no renderer can disagree about where it ends.
* :func:`escape_markdown` — text shown as plain text inside Markdown (a table cell, a status
  line): every ASCII punctuation character backslash-escaped, one line.
* :func:`code_span` — a value shown as inline code that no backtick in it can break out of.

Renderers never build HTML or Markdown by concatenating raw text; they call these.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

__all__ = ["code_span", "escape_html", "escape_markdown", "is_safe_url", "markdown_html", "safe_markdown",
           "sanitize_html"]

_SAFE_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # CommonMark: every ASCII punctuation char
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def escape_html(text: Any) -> str:
    """``text`` as HTML text (quotes escaped too, so it is safe inside attribute values)."""
    return html.escape(str(text), quote=True)


def _decoded(url: str) -> str:
    """``url`` as a browser could end up reading it: backslash escapes and entities undone (twice
    over, for renderers that decode once more), invisible characters dropped."""
    value = url
    for _ in range(4):
        decoded = html.unescape(_BACKSLASH_ESCAPE.sub(r"\1", value))
        if decoded == value:
            break
        value = decoded
    return _INVISIBLE.sub("", value)


def is_safe_url(url: str) -> bool:
    """A link target that may become a link: relative, ``#fragment``, or http(s)/mailto.

    Entities and backslash escapes are decoded and invisible characters dropped first, as
    Markdown renderers and browsers do (``java&#115;cript:``, ``javascript\\:``, ``java\\tscript:``)."""
    match = _SCHEME.match(_decoded(str(url)))
    return match is None or match.group(1).lower() in _SAFE_SCHEMES


# ---- Markdown rendered to HTML -----------------------------------------------------------------

_MARKDOWN_TAGS = {
    "a", "blockquote", "br", "code", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p", "pre", "s",
    "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}
_ALIGN = {"style": {"text-align:left", "text-align:right", "text-align:center"}}


def _image_as_link(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    label = escape_html(f"[image: {alt}]")
    return f'<a href="{escape_html(src)}">{label}</a>' if src else label


@lru_cache(maxsize=1)
def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    renderer.enable(["table", "strikethrough"])
    # markdown-it-py's own way to replace its link check: an unsafe link stays literal text
    renderer.validateLink = is_safe_url  # type: ignore[method-assign]
    renderer.add_render_rule("image", _image_as_link)
    return renderer


def _nh3() -> Any:
    """The nh3 module, or None where it is not installed (the browser)."""
    try:
        import nh3
    except ImportError:
        return None
    return nh3


@lru_cache(maxsize=1)
def _markdown_cleaner() -> Any:
    nh3 = _nh3()
    if nh3 is None:
        return None

    return nh3.Cleaner(tags=_MARKDOWN_TAGS, attributes={"a": {"href", "title"}, "ol": {"start"}},
                       tag_attribute_values={"td": _ALIGN, "th": _ALIGN}, url_schemes=set(_SAFE_SCHEMES),
                       link_rel="noopener noreferrer nofollow")


def markdown_html(text: Any) -> str:
    """Markdown → HTML that is safe to put in a trusted output.

    markdown-it-py renders it with raw HTML off and unsafe links refused; the nh3 allowlist of
    the tags Markdown makes then checks the result once more (a renderer bug must not be enough)
    where nh3 is installed."""
    rendered = str(_markdown_renderer().render(str(text)))
    cleaner = _markdown_cleaner()
    return str(cleaner.clean(rendered)) if cleaner is not None else rendered


# ---- tool HTML ---------------------------------------------------------------------------------

_ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div",
    "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s",
    "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
    "ul",
}
_ALLOWED_ATTRIBUTES = {
    "*": {"title", "align"},
    "a": {"href"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    "ol": {"start"},
}


@lru_cache(maxsize=1)
def _tool_cleaner() -> Any:
    nh3 = _nh3()
    if nh3 is None:
        return None

    return nh3.Cleaner(tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRIBUTES, url_schemes=set(_SAFE_SCHEMES),
                       link_rel="noopener noreferrer nofollow")


def sanitize_html(fragment: Any) -> str:
    """Tool-made HTML (a DataFrame's ``_repr_html_``, a styled table) reduced to an allowlist:
    structure and formatting stay; scripts, styles, event handlers, images and unsafe URLs go.
    Without nh3 (the browser) the fragment is escaped: shown as its text, never run."""
    cleaner = _tool_cleaner()
    if cleaner is None:
        return f"<pre>{escape_html(fragment)}</pre>"
    return str(cleaner.clean(str(fragment)))


# ---- Markdown source ---------------------------------------------------------------------------


def escape_markdown(text: Any) -> str:
    """``text`` as one line of Markdown that every renderer shows as exactly that text: line
    breaks become spaces and each ASCII punctuation character is backslash-escaped, so nothing
    in it can start a tag, a link, an image, a code span, emphasis or a table cell."""
    one_line = _LINE_BREAK.sub(" ", str(text)).strip()
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", one_line)


def code_span(text: Any) -> str:
    """``text`` as one Markdown inline code span, whatever backticks it holds (CommonMark: the
    fence is one backtick longer than the longest run inside; a space pads each side where the
    text starts or ends with a backtick, or with spaces at both ends, since one is stripped).

    Line breaks and tabs become spaces: renderers disagree on whether a tab is a space when they
    strip the padding (markdown-it does not strip around ``" \t "``, CommonMark's reference does).

    The span only holds if the same paragraph has no other unescaped backtick of untrusted
    origin before it: put it next to your own text or :func:`escape_markdown` output only."""
    value = _LINE_BREAK.sub(" ", str(text)).replace("\t", " ")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    if not value.strip(" "):
        return f"{fence}{value or ' '}{fence}"
    pad = value[0] == "`" or value[-1] == "`" or (value[0] == " " and value[-1] == " ")
    return f"{fence} {value} {fence}" if pad else f"{fence}{value}{fence}"


_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+.#\-]{1,40}")
_NOT_LANGUAGES = {"mermaid"}  # a fence some frontends turn into live SVG: shown as code


def _fence_opener(line: str) -> tuple[int, str, int, str] | None:
    match = _FENCE_OPEN.match(line)
    if not match:
        return None
    indent, fence, info = match.groups()
    if fence[0] == "`" and "`" in info:  # CommonMark: not a fence
        return None
    return len(indent), fence[0], len(fence), info


def _closes(line: str, char: str, length: int) -> bool:
    stripped = line.rstrip(" \t")
    body = stripped.lstrip(" ")
    return len(stripped) - len(body) <= 3 and len(body) >= length and set(body) == {char}


def _dedent(line: str, indent: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, indent):]


def _fenced(body: list[str], info: str) -> list[str]:
    """A code block in a form no renderer reads differently: blank lines around, a backtick fence
    at column 0 longer than any backtick run inside, a plain language word."""
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    words = info.split()
    match = _LANGUAGE.fullmatch(words[0]) if words else None
    language = match.group(0) if match and match.group(0).lower() not in _NOT_LANGUAGES else ""
    return ["", fence + language, *body, fence, ""]


_INLINE_LINK = re.compile(r"\]\((?=([ \t]*\n?[ \t]*)(\S*))")
_DEFINITION = re.compile(r"\]:(?=([ \t]*\n?[ \t]*)(\S*))")


def _unsafe_destination(text: str) -> bool:
    return not is_safe_url(_decoded(text).lstrip("<"))


def _neutralise_prose(text: str) -> str:
    """Prose (outside fenced code): every ``<`` becomes ``&lt;`` (no tag, comment or autolink can
    form); an inline link or link definition whose destination is unsafe gets a backslash that
    escapes its ``(`` or ``:`` (whatever precedes the ``]``, that backslash is a fresh escape);
    every image gets one before its ``[``."""
    out = text.replace("<", "&lt;")
    out = _INLINE_LINK.sub(lambda m: "]\\(" if _unsafe_destination(m.group(2)) else m.group(0), out)
    out = _DEFINITION.sub(lambda m: "]\\:" if _unsafe_destination(m.group(2)) else m.group(0), out)
    return out.replace("![", "!\\[")


def safe_markdown(text: Any) -> str:
    """Markdown source in which no raw HTML can take effect, no unsafe link is a link and no
    image loads.

    Fenced code blocks keep their content (literal in every renderer) but are written anew
    (:func:`_fenced`), so a fence that one renderer would close early (``marked`` closes a
    backtick fence on a line of backticks and tildes), or would read as part of a list or a
    table, cannot leave raw text behind. Everywhere else every ``<`` is escaped, so inline code there
    shows ``&lt;`` where the text had ``<`` — the price of never guessing wrong about where a code
    span ends."""
    lines = _LINE_BREAK.split(str(text))
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        opener = _fence_opener(lines[i])
        if opener is None:
            prose.append(lines[i])
            i += 1
            continue
        indent, char, length, info = opener
        body: list[str] = []
        i += 1
        while i < len(lines) and not _closes(lines[i], char, length):
            body.append(_dedent(lines[i], indent))
            i += 1
        i += 1  # the closing fence (or the end: CommonMark closes an open fence there)
        if prose:
            out.append(_neutralise_prose("\n".join(prose)))
            prose = []
        out.extend(_fenced(body, info))
    if prose:
        out.append(_neutralise_prose("\n".join(prose)))
    return "\n".join(out)
