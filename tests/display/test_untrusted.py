"""Untrusted text in trusted outputs (ipyagent.display.untrusted, and every renderer wired to it).

The gate's functions are checked by properties over generated hostile Markdown: their HTML (or,
for Markdown source, the HTML that two renderers which DO allow raw HTML and every link make of
it — markdown-it-py in HTML mode, mistune with escaping off) has no element Markdown does not
make, no event handler, no unsafe URL and no end tag closing what it did not open. Then the same
payloads go through every renderer: the reply, tool, error and note bundles, the widget's views
and live values, the journal, the transcript, the %compact result and the %agent commands.
"""

from __future__ import annotations

import html
import json
import re
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from IPython.utils.capture import capture_output

from ipyagent.agent import run_events as ev
from ipyagent.display.budget_widget import BudgetFacts, BudgetWidget, static_bundle
from ipyagent.display.journal_view import journal_bundle, transcript_markdown
from ipyagent.display.stream import (
    RunRenderer,
    StreamedMarkdown,
    error_bundle,
    note_bundle,
    reply_bundle,
    tool_bundle,
)
from ipyagent.display.untrusted import (
    code_span,
    escape_html,
    escape_markdown,
    is_safe_url,
    markdown_html,
    safe_markdown,
    sanitize_html,
)
from ipyagent.kernel.magics.compact_magic import _summary_bundle
from ipyagent.providers.provider import TextDelta, ThinkingDelta
from support.builders import assistant, call, new_session, tool_result, user
from support.hostile import (
    HOSTILE,
    HOSTILE_NAME,
    MARKDOWN_TAGS,
    PAYLOADS,
    SENTINEL,
    audit_html,
    dangerous_url,
    markdown_oracles,
)
from support.shell import runtime_of

ORACLES = markdown_oracles()
NO_IMAGES = MARKDOWN_TAGS  # markdown_html and safe_markdown never let an image load
# what ipyagent's own HTML around the untrusted parts uses
OWN_TAGS = MARKDOWN_TAGS | {"b", "details", "div", "i", "span", "summary", "sub"}


def _assert_clean_html(fragment: str, allowed: set[str] = OWN_TAGS) -> None:
    problems = audit_html(fragment, allowed)
    assert not problems, (problems, fragment)


def _assert_clean_markdown(source: str, allowed: set[str] = NO_IMAGES | {"details", "summary", "sub"}) -> None:
    for name, render in ORACLES.items():
        rendered = render(source)
        problems = audit_html(rendered, allowed)
        assert not problems, (name, problems, source, rendered)


# ---- the gate's functions ----------------------------------------------------------------------

FRAGMENTS = [
    "<script>", "</script>", "<img src=x onerror=alert(1)>", "<svg onload=alert(1)>", "</details>", "<!--", "-->",
    "<", ">", "</", "<a href='javascript:alert(1)'>", "<javascript:alert(1)>",
    "[x](", "](", "]:", "[", "]", "(", ")", "![", "javascript:", "JaVaScRiPt:", "java&#115;cript:", "&#106;",
    "&colon;", "javascript&colon;", "\\:", "vbscript:", "data:text/html,", "http://ok.example/",
    "```", "````", "~~~", "```~", "`", "``", "    ", "  ", "\t", "\n", "\n\n", "- ", "* ", "1. ", "> ",
    "| a | b |\n|---|---|\n", "|", "---", "\\", "\\\\", "&", "&lt;", "&#60;", "&amp;lt;", "*", "_", "#", "$",
    "\r\n", "\r", "\u2028", "\u200b",
]
_SCHEMES = ["javascript:", "JaVaScRiPt:", "java&#115;cript:", "javascript\\:", "javascript&colon;", "&#106;avascript:",
            "java\tscript:", "&#x09;javascript:", "vbscript:", "data:text/html,", "https://ok.example/", "", "#x"]
_DESTINATIONS = st.builds("".join, st.tuples(
    st.sampled_from(["", " ", "\n", "<", "&lt;", "\\"]), st.sampled_from(_SCHEMES),
    st.sampled_from(["alert(1)", "x", "", ")", "a b"]), st.sampled_from(["", ">", ' "t"', "\n"])))
_LABELS = st.sampled_from(["x", "", "x\\", "\\", "a [b] c", "`", "*", "<b>", "x`"])
_LINKS = st.builds(lambda bang, label, dest, close: f"{bang}[{label}]({dest}{close}",
                   st.sampled_from(["", "!", "\\", "\\\\"]), _LABELS, _DESTINATIONS, st.sampled_from([")", ""]))
_DEFINITIONS = st.builds(lambda indent, label, dest: f"{indent}[{label}]:{dest}",
                         st.sampled_from(["", "  ", "> ", "- ", "    "]), _LABELS, _DESTINATIONS)
_FENCE_LINES = st.builds("".join, st.tuples(
    st.sampled_from(["", " ", "   ", "    ", "- ", "> ", "1. ", "  - "]),
    st.sampled_from(["```", "~~~", "````", "``", "```~", "~~~`"]), st.sampled_from(["", "py", "`", "~", " x", " mermaid"])))
_HTML = st.sampled_from(["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<svg onload=alert(1)>",
                         "</details>", "<details>", "<!--", "-->", "<", ">", "</", "<a href='javascript:alert(1)'>",
                         "<javascript:alert(1)>", "<pre>", "</pre>", "<style>", "<iframe src=x>", "<b", "<B>"])
_OTHER = st.sampled_from([
    "[", "]", "(", ")", "![", "](", "]:", "`", "``", "    ", "\t", "- ", "* ", "1. ", "> ", "| a | b |\n|---|---|",
    "|", "---", "\\", "&", "&lt;", "&#60;", "&amp;lt;", "*", "_", "#", "$", "\r\n", "\r", "\u2028", "\u200b",
])
_BLOCKS = st.one_of(_LINKS, _DEFINITIONS, _FENCE_LINES, _HTML, _OTHER, st.text(alphabet="ab <>`~[]():!\\-*|&#;", max_size=5))
hostile_markdown = st.lists(st.tuples(_BLOCKS, st.sampled_from(["", "", " ", "\n", "\n", "\n\n"])), max_size=30).map(
    lambda parts: "".join(block + sep for block, sep in parts))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown)
def test_safe_markdown_property(text):
    _assert_clean_markdown(safe_markdown(text), NO_IMAGES)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown)
def test_markdown_html_property(text):
    _assert_clean_html(markdown_html(text), NO_IMAGES)


def _text_of(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", rendered))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(hostile_markdown, st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)))
def test_escape_markdown_shows_exactly_the_text(text):
    escaped = escape_markdown(text)
    want = " ".join(re.sub(r"\r\n|\r|\n", " ", text).split())
    for name, render in ORACLES.items():
        rendered = render(escaped)
        assert not audit_html(rendered, {"p"}), (name, rendered)
        assert " ".join(_text_of(rendered).split()) == want, (name, escaped, rendered)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(hostile_markdown, st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)))
@example(" \t ")  # found by Hypothesis: markdown-it kept the padding around a tab, CommonMark strips it
def test_code_span_is_one_span_holding_the_text(text):
    import markdown_it

    span = code_span(text)
    want = re.sub(r"\r\n|\r|\n", " ", text).replace("\t", " ")  # line breaks and tabs are shown as spaces
    for name, render in [("markdown-it inline", markdown_it.MarkdownIt("commonmark", {"html": True}).renderInline),
                         *ORACLES.items()]:
        rendered = render("before " + span + " after").strip()
        body = re.sub(r"^<p>|</p>$", "", rendered)
        assert body.count("<code>") == 1 and body.startswith("before <code>") and body.endswith("</code> after"), (
            name, span, rendered)
        inner = body[len("before <code>"):-len("</code> after")]
        if want.strip(" "):
            assert html.unescape(inner) == want, (name, span, rendered)


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_payloads_through_each_function(name):
    payload = PAYLOADS[name]
    _assert_clean_html(markdown_html(payload), NO_IMAGES)
    _assert_clean_html(f"<p>{escape_html(payload)}</p>", {"p"})
    _assert_clean_html(sanitize_html(payload), {"a", "div", "p", "details", "summary", "table", "tbody", "tr", "td"})
    _assert_clean_markdown(safe_markdown(payload), NO_IMAGES)
    _assert_clean_markdown(escape_markdown(payload), {"p"})
    _assert_clean_markdown("name " + code_span(payload), {"p", "code"})


def test_markdown_keeps_tables_code_and_links():
    text = ("| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nif a < b:\n    pass\n```\n\n[docs](https://example.org) "
            "and `x < y` and **bold**\n\n1. one\n2. two")
    rendered = markdown_html(text)
    assert "<table>" in rendered and '<td style="text-align:right">2</td>' in rendered
    assert "if a &lt; b:" in rendered and "<pre><code>" in rendered and "<code>x &lt; y</code>" in rendered
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">docs</a>' in rendered
    assert "<strong>bold</strong>" in rendered and "<ol>" in rendered
    kept = safe_markdown(text)
    assert "```python\nif a < b:\n    pass\n```" in kept and "[docs](https://example.org)" in kept
    assert "| a | b |\n|:--|--:|" in kept


def test_unsafe_links_stay_text_and_images_become_links():
    rendered = markdown_html("[a](javascript:alert(1)) [b](JAVA&#83;cript:x) [c](javascript\\:x) "
                             "![pic](https://example.org/p.png) ![bad](javascript:x)")
    assert "<a" not in rendered.split("[image: pic]")[0].replace('<a href="https://example.org/p.png"', "")
    assert '<a href="https://example.org/p.png" rel="noopener noreferrer nofollow">[image: pic]</a>' in rendered
    assert "<img" not in rendered and "javascript" not in re.sub(r">[^<]*<", "><", rendered)
    source = safe_markdown("[a](javascript:alert(1)) ![pic](https://example.org/p.png) [ok](https://example.org)")
    assert "]\\(javascript" in source and "!\\[pic]" in source and "[ok](https://example.org)" in source


def test_fences_are_rewritten_so_no_renderer_reads_them_differently():
    # CommonMark: "```~" does not close the fence, marked: it does (and would show <i> raw after it)
    source = safe_markdown("text\n```py extra\nx = '<b>'\n```~\n<i>\n```\nafter <b>")
    assert source == "text\n\n````py\nx = '<b>'\n```~\n<i>\n````\n\nafter &lt;b>"
    assert safe_markdown("~~~mermaid\ngraph\n~~~") == "\n```\ngraph\n```\n"


def test_sanitize_html_keeps_a_table_and_drops_handlers():
    cleaned = sanitize_html('<table class="dataframe"><tr><td onclick="x()">1</td></tr></table>'
                            '<script>x()</script><img src="javascript:x()" onerror="x()">'
                            '<a href="javascript:x()">l</a><style>td{}</style>')
    assert "<table" in cleaned and "<td>1</td>" in cleaned
    assert "onclick" not in cleaned and "<script" not in cleaned and "onerror" not in cleaned
    assert "javascript" not in cleaned and "<style" not in cleaned and "<img" not in cleaned


def test_safe_urls():
    assert is_safe_url("https://a.b") and is_safe_url("#x") and is_safe_url("relative/path.html")
    for bad in ["javascript:x", "JaVaScRiPt:x", "java\tscript:x", "java&#115;cript:x", "vbscript:x", "data:text/html,x",
                " javascript:x", "javascript\\:x", "javascript&colon;x", "java&amp;#115;cript:x", "\u200bjavascript:x"]:
        assert not is_safe_url(bad), bad
        assert dangerous_url(html.unescape(html.unescape(bad)).replace("\\", "").replace("\u200b", "")), bad


# ---- every renderer ----------------------------------------------------------------------------


def _hostile_session():
    """A session whose every text field a renderer shows holds the payloads."""
    session = new_session(
        user(HOSTILE),
        assistant(HOSTILE, call("c1", "python", code=HOSTILE), thinking=HOSTILE),
        tool_result("c1", HOSTILE, name=HOSTILE_NAME, is_error=True),
        assistant("", stop="error", errorMessage=HOSTILE),
    )
    first_kept = session.entries[1]["id"]
    session.append({"type": "compaction", "summary": HOSTILE, "firstKeptEntryId": first_kept, "tokensBefore": 999})
    session.append({"type": "branch_summary", "summary": HOSTILE, "fromId": HOSTILE_NAME})
    session.append({"type": "custom_message", "customType": HOSTILE_NAME, "content": HOSTILE, "display": True})
    session.append({"type": "label", "targetId": first_kept, "label": HOSTILE})
    session.append_message({"role": "bashExecution", "command": HOSTILE, "output": HOSTILE, "exitCode": 0,
                            "timestamp": 1})
    return session


def _facts() -> BudgetFacts:
    return BudgetFacts(session_name=HOSTILE_NAME, model=HOSTILE, window=8000, reserve=1000, total=4000,
                       parts={"system": 100, "summary": 200, "history": 300, "tail": 400}, compactions=1,
                       latest_summary=HOSTILE, status=HOSTILE)


def _assert_bundle(data: dict) -> None:
    assert "text/plain" in data
    if "text/html" in data:
        _assert_clean_html(data["text/html"])
    if "text/markdown" in data:
        _assert_clean_markdown(data["text/markdown"])


def test_run_bundles_reply_tool_error_note():
    _assert_bundle(reply_bundle(HOSTILE, HOSTILE))
    _assert_bundle(reply_bundle("", HOSTILE))
    _assert_bundle(tool_bundle(HOSTILE_NAME, {"code": HOSTILE, "other": HOSTILE}, None))
    _assert_bundle(tool_bundle("bash", {"command": HOSTILE}, {"content": [{"type": "text", "text": HOSTILE}],
                                                              "isError": True}))
    _assert_bundle(error_bundle(HOSTILE, title=HOSTILE_NAME))
    _assert_bundle(note_bundle(HOSTILE))
    reply = reply_bundle("| a |\n|---|\n| `x` |\n\n[ok](https://example.org)", "thinking *hard*")
    assert "<table>" in reply["text/html"] and "<em>hard</em>" in reply["text/html"]
    assert "text/markdown" not in reply


def test_streamed_reply_through_the_renderer():
    shown: list[dict] = []

    class Handle:
        def update(self, data, **kwargs):
            shown.append(data)

    def display(data, **kwargs):
        shown.append(data)
        return Handle()

    renderer = RunRenderer(display_func=display, max_updates_per_second=0)
    for start in range(0, len(HOSTILE), 7):  # every prefix a stream could stop at is shown on its own
        renderer(ThinkingDelta(HOSTILE[start:start + 7]))
    for start in range(0, len(HOSTILE), 7):
        renderer(TextDelta(HOSTILE[start:start + 7]))
    renderer(ev.AgentError(HOSTILE))
    renderer(ev.AgentEnd([]))
    assert len(shown) > 2 * len(HOSTILE) // 7
    for data in shown:
        _assert_bundle(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown, st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_streamed_markdown_pieces_are_clean_and_the_end_is_the_whole_render(text, steps):
    view = StreamedMarkdown()
    position = 0
    for step in steps:
        position = min(len(text), position + step)
        _assert_clean_html(view.render(text[:position]), NO_IMAGES)
    assert view.render(text, final=True) == markdown_html(text)


def test_streamed_markdown_renders_only_the_newest_blocks():
    text = "".join(f"Paragraph {i} with `code` and *emphasis*.\n\n" for i in range(50)) + "```\nopen fence\n\nstill"
    view = StreamedMarkdown()
    for end in range(0, len(text), 50):
        view.render(text[:end])
    assert view._done > len(text) // 2  # the paragraphs are done; the open fence is not cut
    assert "open fence" not in text[:view._done]
    piecewise = view.render(text)
    assert piecewise == markdown_html(text) == view.render(text, final=True)
    # where pieces differ from the whole (a later link definition), the end renders the whole
    linked = "See [the docs][d].\n\nMore text.\n\n[d]: https://example.org\n"
    view = StreamedMarkdown()
    for end in range(1, len(linked) + 1):
        view.render(linked[:end])
    assert 'href="https://example.org"' not in view.render(linked)
    assert 'href="https://example.org"' in view.render(linked, final=True)
    shown: list[dict] = []

    class Handle:
        def update(self, data, **kwargs):
            shown.append(data)

    renderer = RunRenderer(display_func=lambda data, **kwargs: shown.append(data) or Handle(), max_updates_per_second=0)
    for end in range(0, len(linked), 5):
        renderer(TextDelta(linked[end:end + 5]))
    renderer(ev.AgentEnd([]))
    assert shown[-1] == reply_bundle(linked)


def test_widget_views_and_live_values():
    facts = _facts()
    bundle = static_bundle(facts)
    _assert_bundle(bundle)
    assert "<details><summary>Latest summary</summary>" in bundle["text/html"]
    widget = BudgetWidget(facts)
    try:
        for value in (widget._head.value, widget._status.value, widget._summary.value):
            _assert_clean_html(value)
        widget.set_status(HOSTILE)
        _assert_clean_html(widget._status.value)
        data = widget.bundle()
        _assert_bundle({k: v for k, v in data.items() if k.startswith("text/")})
    finally:
        widget.close()


def test_journal_and_transcript():
    session = _hostile_session()
    data, _ = journal_bundle(HOSTILE_NAME, session.header, session.leaf_id, {"model": HOSTILE}, session.entries)
    _assert_bundle(data)
    assert data["text/markdown"].count("\n| ") == len(session.entries) + 1  # header row + one row per entry
    transcript = transcript_markdown(session, HOSTILE_NAME, {"model": HOSTILE})
    _assert_clean_markdown(transcript)
    for render in ORACLES.values():  # the session's code span holds the whole name, backticks and all
        for markdown in (data["text/markdown"], transcript):
            assert f"<code>{html.escape(HOSTILE_NAME, quote=False)}</code>" in render(markdown).replace("&quot;", '"')


def test_compact_result():
    _assert_bundle(_summary_bundle({"summary": HOSTILE, "firstKeptEntryId": HOSTILE_NAME}, 9000, 3000, 1.5))


# ---- the magics, in process (the fixtures ip and server: tests/conftest.py) ---------------------


def test_agent_commands_show_metadata_text_safely(ip, server, tmp_path):
    runtime = runtime_of(ip)
    runtime.new_session(HOSTILE_NAME)
    slot = runtime.slot()
    hostile = _hostile_session()
    for entry in hostile.entries:
        slot.session.append(dict(entry))
    outputs = []
    for command in ("summary", "status", "context", "tree", "sessions", "config"):
        with capture_output() as cap:
            ip.run_line_magic("agent", command)
        outputs += [o.data for o in cap.outputs]
        assert SENTINEL in cap.stdout + "".join(json.dumps(o.data) for o in cap.outputs) or command in (
            "sessions", "config"), command
    assert outputs
    for data in outputs:
        _assert_bundle({k: v for k, v in data.items() if k.startswith("text/")})
    summary = [d for d in outputs if "ipyagent-summary" in d.get("text/html", "")]
    assert summary and "text/markdown" not in summary[0]
    ip.run_line_magic("agent", f"export --format markdown -o {tmp_path / 'out.md'}")
    _assert_clean_markdown((tmp_path / "out.md").read_text())


# ---- where nh3 is missing (a Pyodide kernel in a browser page: issue 36) ------------------------


@pytest.fixture
def without_nh3(monkeypatch):
    """The gate as a browser page's kernel has it: ``import nh3`` fails (no WebAssembly wheel)."""
    from ipyagent.display import untrusted

    monkeypatch.setitem(sys.modules, "nh3", None)  # None in sys.modules: the import raises ImportError
    untrusted._markdown_cleaner.cache_clear()
    untrusted._tool_cleaner.cache_clear()
    yield
    untrusted._markdown_cleaner.cache_clear()
    untrusted._tool_cleaner.cache_clear()


def test_without_nh3_tool_html_is_shown_as_its_text(without_nh3):
    fragment = '<table><tr><td onclick="x()">1</td></tr></table><script>x()</script><img src=x onerror=y()>'
    shown = sanitize_html(fragment)
    assert shown == "<pre>" + html.escape(fragment, quote=True) + "</pre>"
    _assert_clean_html(shown, {"pre"})


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_without_nh3_every_payload_stays_inert(without_nh3, name):
    payload = PAYLOADS[name]
    _assert_clean_html(markdown_html(payload), NO_IMAGES)
    _assert_clean_html(sanitize_html(payload), {"pre"})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(hostile_markdown)
def test_without_nh3_markdown_is_rendered_with_raw_html_off(without_nh3, text):
    _assert_clean_html(markdown_html(text), NO_IMAGES)


def test_without_nh3_markdown_keeps_tables_and_links(without_nh3):
    rendered = markdown_html("| a |\n|---|\n| 1 |\n\n[docs](https://example.org) <b>raw</b>")
    assert "<table>" in rendered and '<a href="https://example.org">docs</a>' in rendered
    assert "&lt;b&gt;raw&lt;/b&gt;" in rendered
