"""Stored XSS, end to end: hostile model, tool and metadata text in a real JupyterLab never runs.

Every payload of ``tests/support/hostile.py`` sets ``window.__pwned`` if a browser ever runs it.
A fake model streams them as the reply and its thinking, as a tool call's code (whose output
prints them), as an error message and as the compaction summary; the session's name holds a
backtick and an ``<img onerror>``. The notebook shows the live streamed reply, the tool block, the
error, ``%compact``'s result, ``%agent summary`` and ``status`` (the live widget), the Markdown-only
views (transcript, widget, journal) as bare ``text/markdown`` outputs, and a replayed reply — all
trusted, since the user ran them. A canary cell shows what a trusted handler does: it must run.

Checked after running, after save + close + reopen (outputs re-rendered, trusted), in a fresh
page, and after a kernel restart that takes the session from the saved metadata and replays it:
``window.__pwned`` stays undefined and no output element carries an event handler, a script, an
image, an iframe or a link to anything but http(s)/mailto.
"""

from __future__ import annotations

import json

from ipyagent.testing.specs import Reply, ToolCallSpec
from support.hostile import HOSTILE, HOSTILE_NAME, SENTINEL
from support.lab_pages import ARTIFACTS, open_notebook, run_cell, save_notebook, write_notebook
from support.outputs import outputs_text

CANARY = ("from IPython.display import HTML, display\n"
          "display(HTML('<img alt=\"canary\" src=\"x-canary\" "
          "onerror=\"window.__canary = (window.__canary || 0) + 1\">'))")

CELLS = [
    # 0: setup; the session gets its hostile name (kept when the kernel already has it)
    ("%load_ext ipyagent\n"
    "%config Agent.tool_approval = 'auto'\n"
    "%config Agent.keep_recent_tokens = 50\n"
    "import json\n"
    "from ipyagent.kernel.extension import get_runtime\n"
    f"NAME = json.loads({json.dumps(json.dumps(HOSTILE_NAME))})\n"
    "if NAME not in get_runtime(get_ipython()).slots:\n"
    "    get_ipython().run_line_magic('agent', 'new ' + NAME)\n"
    "print('ACTIVE', get_runtime(get_ipython()).active == NAME)"),
    # 1: the canary: a trusted output's handler does run
    CANARY,
    # 2: the live run: a tool call, then the streamed reply with thinking
    "%%agent\nShow me everything.",
    # 3: a model error
    "%%agent\nAnd now fail.",
    # 4: %compact (the summary is the model's)
    "%compact",
    # 5, 6: the summary and the live widget
    "%agent summary",
    "%agent status",
    # 7: the Markdown-only views, shown bare as text/markdown (JupyterLab renders those raw too)
    ("from ipyagent.display.journal_view import journal_bundle\n"
    "from ipyagent.display.budget_widget import budget_facts, static_markdown\n"
    "get_ipython().run_line_magic('agent', 'export --format markdown -o transcript.md')\n"
    "_rt = get_runtime(get_ipython()); _slot = _rt.slot()\n"
    "_facts = budget_facts(_slot.session, _rt.run_config(), window=100000, session_name=_slot.name,\n"
    "                      status=_slot.session.latest_summary())\n"
    "_journal, _ = journal_bundle(_slot.name, _slot.session.header, _slot.session.leaf_id, {}, _slot.session.entries)\n"
    "for _text in (open('transcript.md').read(), static_markdown(_facts), _journal['text/markdown']):\n"
    "    display({'text/markdown': _text, 'text/plain': 'markdown view'}, raw=True)"),
    # 8: replay the recorded responses from now on
    "%agent replay on",
    # 9: the canary again (the last output rendered)
    CANARY,
]
RUN, ERROR, COMPACT, VIEWS, REPLAY, LAST = 2, 3, 4, 7, 8, 9

AUDIT = r"""
() => {
  const problems = [];
  const urlAttrs = ['href', 'src', 'xlink:href', 'action', 'formaction', 'data', 'srcset', 'poster', 'background'];
  const banned = ['script', 'iframe', 'object', 'embed', 'style', 'base', 'form', 'frame', 'meta', 'link'];
  for (const area of document.querySelectorAll('.jp-OutputArea')) {
    for (const el of area.querySelectorAll('*')) {
      const tag = el.tagName.toLowerCase();
      const canary = tag === 'img' && el.getAttribute('alt') === 'canary';
      if (banned.includes(tag) || (tag === 'img' && !canary)) problems.push('element <' + tag + '>');
      for (const attr of el.attributes) {
        const name = attr.name.toLowerCase();
        if (name.startsWith('on') && !canary) problems.push(name + '=' + attr.value + ' on <' + tag + '>');
        if (urlAttrs.includes(name)) {
          const value = attr.value.replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, '').replace(/[\t\n\r]/g, '');
          const scheme = /^([a-z][a-z0-9+.\-]*):/i.exec(value);
          if (scheme && !['http', 'https', 'mailto'].includes(scheme[1].toLowerCase())) {
            problems.push(name + '=' + attr.value + ' on <' + tag + '>');
          }
        }
      }
      if ((tag === 'a' || tag === 'area') && el.hasAttribute('href')
          && !['http:', 'https:', 'mailto:'].includes(el.protocol)) {
        problems.push('link to ' + el.protocol + ' ' + el.getAttribute('href'));
      }
    }
  }
  return problems;
}
"""


def _run(page, name: str, index: int, *, fails: bool = False) -> list[dict]:
    """The cell's outputs; a cell that ``fails`` (a model error) ends with one AgentCellError, an
    error output the page shows as plain text."""
    out = run_cell(page, name, index)
    errors = [o for o in out if o.get("output_type") == "error"]
    assert [e.get("ename") for e in errors] == (["AgentCellError"] if fails else []), (index, errors)
    return out


def _data(outputs: list[dict], mime: str) -> str:
    return "\n".join(o["data"][mime] if isinstance(o["data"][mime], str) else "".join(o["data"][mime])
                     for o in outputs if mime in (o.get("data") or {}))


def _untouched(page, name: str, stage: str, canaries: int) -> None:
    """No payload ran, no output holds a live payload, and the trusted canary ran ``canaries`` times."""
    page.wait_for_function(f"() => (window.__canary || 0) >= {canaries}", timeout=90_000)
    problems = page.evaluate(AUDIT)
    assert page.evaluate(f"() => typeof window.{SENTINEL}") == "undefined", (stage, problems)
    assert not problems, (stage, problems)
    rendered = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea')].map(a => a.innerText).join('\\n')")
    assert SENTINEL in rendered, (stage, "the payloads are not shown as text")  # shown, not run


def _trusted(page, name: str) -> list[bool]:
    return page.evaluate(
        "(path) => { const p = window.__ipa.panel(path); const cells = p.content.model.cells; const out = [];"
        " for (let i = 0; i < cells.length; i++) out.push(cells.get(i).trusted); return out; }", name)


def _enqueue_run(server) -> None:
    code = f"import json\nprint(json.loads({json.dumps(json.dumps(HOSTILE))}))"
    server.enqueue(Reply(text=HOSTILE, thinking=HOSTILE, tool_calls=[ToolCallSpec("python", {"code": code})],
                         delay=0.005))
    server.enqueue(Reply(text=HOSTILE, thinking=HOSTILE, delay=0.005))


def test_hostile_text_never_runs(jupyterlab, context):
    lab = jupyterlab
    server = lab.fake
    name = "xss.ipynb"
    path = lab.root / name
    write_notebook(path, CELLS)
    page = context.new_page()
    open_notebook(page, lab, name)
    assert page.evaluate(f"() => typeof window.{SENTINEL}") == "undefined"

    assert "ACTIVE True" in outputs_text(_run(page, name, 0))
    _run(page, name, 1)
    page.wait_for_function("() => window.__canary === 1", timeout=90_000)  # trusted handlers do run here

    _enqueue_run(server)
    out = _run(page, name, RUN)
    reply = _data(out, "text/html")
    assert "ipyagent-reply" in reply and "ipyagent-tool" in reply and "ipyagent-thinking" in reply
    assert "text/markdown" not in json.dumps([o.get("data", {}) for o in out if "ipyagent-reply" in json.dumps(o)])
    server.enqueue_error(400, body={"error": {"message": HOSTILE, "type": "invalid_request_error"}})
    out = _run(page, name, ERROR, fails=True)
    assert "Model error" in outputs_text(out) and SENTINEL in outputs_text(out)
    server.enqueue_summary(HOSTILE)
    assert "Compacted:" in outputs_text(_run(page, name, COMPACT))
    assert SENTINEL in _data(_run(page, name, 5), "text/html")
    _run(page, name, 6)
    views = _run(page, name, VIEWS)
    assert len([o for o in views if "text/markdown" in (o.get("data") or {})]) == 3
    _run(page, name, REPLAY)
    calls = server.chat_calls
    out = _run(page, name, RUN)  # the same cell again: replayed from the recording
    assert "Replaying this cell's recorded responses" in outputs_text(out), outputs_text(out)
    assert "ipyagent-reply" in _data(out, "text/html") and server.chat_calls == calls
    _run(page, name, LAST)
    _untouched(page, name, "after running", canaries=2)
    ARTIFACTS.mkdir(exist_ok=True)
    reply_cell = page.locator(".jp-Notebook .jp-Cell").nth(RUN)
    reply_cell.scroll_into_view_if_needed()
    reply_cell.screenshot(path=str(ARTIFACTS / "xss-reply.png"))

    # save (JupyterLab signs the notebook: every output is trusted on the next open), close, reopen
    save_notebook(page, name)
    page.wait_for_function(f"() => !window.__ipa.panel({json.dumps(name)}).context.model.dirty", timeout=90_000)
    saved = json.loads(path.read_text())
    assert "Replaying this cell" in json.dumps(saved["cells"][RUN]["outputs"])
    page.evaluate("(path) => window.__ipa.panel(path).close()", name)
    page.wait_for_function(f"() => !window.__ipa.panel({json.dumps(name)})")
    page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path})", name)
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=60_000)
    assert all(_trusted(page, name)), _trusted(page, name)
    _untouched(page, name, "after reopening", canaries=4)

    # a fresh page: the saved, signed notebook renders from disk
    page.close()
    page = context.new_page()
    open_notebook(page, lab, name)
    assert all(_trusted(page, name)), _trusted(page, name)
    _untouched(page, name, "in a fresh page", canaries=2)

    # a new kernel gets the session from the saved metadata; the reply is replayed from there
    page.evaluate("(p) => window.__ipa.panel(p).sessionContext.restartKernel()", name)
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=60_000)
    assert "ACTIVE True" in outputs_text(_run(page, name, 0))
    _run(page, name, REPLAY)
    out = _run(page, name, RUN)
    assert "Replaying this cell's recorded responses" in outputs_text(out) and server.chat_calls == calls
    _run(page, name, 5)
    _run(page, name, LAST)
    _untouched(page, name, "after a restart and a replay from the metadata", canaries=3)
    page.screenshot(path=str(ARTIFACTS / "xss-replayed.png"), full_page=True)
    lab.shutdown_kernels()
