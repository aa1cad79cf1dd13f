"""Real-time collaboration (jupyter-collaboration) with a long session: two pages on one notebook
holding 2,000 entries (layout 2), three ``%%agent`` turns run from one page. One page writes each
entry (no duplicate acks, no entry in two chunks), nothing is lost or duplicated in the saved
file, and the server's Y store grows per turn by at most twice the new entries' JSON together
with the cell's outputs (which any notebook stores; the store's own part is about 1x the entries).

And a compaction in the kernel's idle time with two pages open: the second page's own requests
while it runs (an ordinary cell) neither cancel it nor start another, and its entry, sent from the
kernel's worker thread, is stored by one page only.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import nbformat

from ipyagent.store.chunks import assemble, chunk_entries, chunk_keys, store_value
from ipyagent.testing.specs import Reply
from support.lab_pages import PAGE_HELPERS, run_text, saved_notebook
from support.sessiongen import generate_session

VIEW = """
window.__ipaView = (path) => {
  const p = window.__ipa.panel(path);
  if (!p) return null;
  const m = p.context.model;
  const keys = Object.keys(m.metadata).filter(k => /^ipyagent\\/\\d{6,}$/.test(k)).sort();
  const out = {};
  for (const k of keys) {
    const c = m.getMetadata(k);
    const list = typeof c.entries === 'string' ? JSON.parse(c.entries) : c.entries;
    (out[c.session] ??= []).push(...list);
  }
  return out;
};
"""


def _ystore_bytes(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COALESCE(SUM(LENGTH(yupdate)), 0) FROM yupdates").fetchone()[0]


def _settled(db: Path, timeout: float = 30) -> int:
    """The Y store's size once the server has written what it received (unchanged over 1 s)."""
    deadline = time.time() + timeout
    last, same_since = -1, time.time()
    while time.time() < deadline:
        now = _ystore_bytes(db)
        if now != last:
            last, same_since = now, time.time()
        elif time.time() - same_since >= 1.0:
            return now
        time.sleep(0.2)
    return last


def _compact(v) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _two_pages(context, lab, name: str) -> list:
    """The notebook opened in two pages of one browser, each ready and collaborative."""
    pages = []
    for _ in range(2):
        page = context.new_page()
        page.add_init_script(PAGE_HELPERS)
        page.add_init_script(VIEW)
        page.goto(lab.url(f"/lab/tree/{name}"))
        page.wait_for_function(f"() => window.__ipa && window.__ipa.ready({json.dumps(name)})", timeout=180_000)
        pages.append(page)
    assert all(page_collaborative(page, name) for page in pages)
    return pages


def test_two_pages_three_turns_one_writer(collaborative_lab, context):
    lab = collaborative_lab
    server = lab.fake
    name = "shared.ipynb"
    path = lab.root / name
    header, entries = generate_session(5, 2000)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    prompts = [f"%%agent --session work\nTurn {t}: summarise what we know so far." for t in (1, 2, 3)]
    acks_cell = ("import json, ipyagent.bridge.comm as B\nb = B.active_bridge()\n"
                 "print('ACKS', json.dumps([a['seq'] for a in b.acks], separators=(',', ':')),"
                 " json.dumps(b.unacked(), separators=(',', ':')))")
    nb.cells = [nbformat.v4.new_code_cell(src) for src in ["%load_ext ipyagent", *prompts, acks_cell]]
    nbformat.write(nb, str(path))
    raw = json.loads(path.read_text())
    store_value(raw["metadata"], {"version": 1, "active": "archive", "sessions": {"archive": {
        "header": header, "leaf": entries[-1]["id"], "settings": {}, "entries": entries}}}, 2)
    path.write_text(json.dumps(raw))

    pages = _two_pages(context, lab, name)
    one, two = pages
    assert "from push" in run_text(one, name, 0)

    seen: list[str] = []
    for turn in (1, 2, 3):
        before = _settled(lab.ystore)
        answer = f"ANSWER-{turn} " + " ".join(f"finding {i} of turn {turn} holds." for i in range(80))
        server.enqueue_text(answer)
        out = run_text(one, name, turn)
        assert "ERROR" not in out, out
        # the other page sees the answer through the shared document
        two.wait_for_function(
            f"() => JSON.stringify((window.__ipaView({json.dumps(name)}) || {{}}).work || []).includes('ANSWER-{turn} ')",
            timeout=60_000,
        )
        grown = _settled(lab.ystore) - before
        work = one.evaluate("(p) => window.__ipaView(p).work", name)
        new = [e for e in work if e["id"] not in seen]
        seen += [e["id"] for e in new]
        new_json = len(_compact(new).encode())
        # the cell's own outputs (the reply as displayed) go into the shared document too
        shown = len(_compact(one.evaluate("([p, i]) => window.__ipa.panel(p).content.widgets[i].model"
                                          ".outputs.toJSON()", [name, turn])).encode())
        print(f"turn {turn}: {len(new)} new entries, {new_json} bytes of JSON; the cell's outputs "
              f"{shown} bytes; Y store +{grown} bytes")
        assert new and grown <= 2 * (new_json + shown), (turn, grown, new_json, shown)

    acks = run_text(one, name, 4)
    line = next(x for x in acks.splitlines() if x.startswith("ACKS "))
    seqs = json.loads(line.split(" ", 2)[1])
    assert seqs and len(seqs) == len(set(seqs)), line  # each message acked by one page only
    assert json.loads(line.split(" ", 2)[2]) == {}, line

    # both pages hold the same entries, each written once (no entry in two chunks)
    for page in pages:
        view = page.evaluate("(p) => window.__ipaView(p)", name)
        assert [e["id"] for e in view["work"]] == seen
        assert len(view["archive"]) == 2000

    # (not awaited: under collaboration a save promise once never settled; the file is polled below)
    one.evaluate("(p) => { void window.__ipa.panel(p).context.save(); }", name)
    saved = saved_notebook(path, lambda nb: _session_ids(nb, "work") == seen, 60, what=str(seen))["metadata"]
    held = assemble(saved)
    all_ids = [e["id"] for k in chunk_keys(saved) for e in chunk_entries(saved[k])[1] or []]
    assert len(all_ids) == len(set(all_ids)) == 2000 + len(seen)  # nothing duplicated, nothing lost
    assert [e["id"] for e in held["sessions"]["archive"]["entries"]] == [e["id"] for e in entries]
    lab.shutdown_kernels()


def _session_ids(nb: dict, session: str) -> list[str]:
    held = assemble(nb.get("metadata", {})) or {}
    return [e["id"] for e in (held.get("sessions", {}).get(session) or {}).get("entries", [])]


def page_collaborative(page, name: str) -> bool:
    return page.evaluate("(p) => window.__ipa.panel(p).context.model.collaborative", name)


IDLE_SETUP = ("%load_ext ipyagent\n%config Agent.context_window = 6000\n%config Agent.reserve_tokens = 1000\n"
              "%config Agent.keep_recent_tokens = 1500\n")
IDLE_ANSWER = "The columns hold measurements with consistent units and few gaps. " * 66
IDLE_SUMMARY = "## Goal\nDescribe the measurements.\n\n## Progress\n- [x] the columns (idle summary)"
RUNTIME = "get_ipython()._ipyagent_runtime"


def _compactions(page, name: str) -> list[dict]:
    view = page.evaluate("(p) => window.__ipaView(p)", name) or {}
    return [e for e in view.get("default", []) if e["type"] == "compaction"]


def _until(check, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, "the awaited event never came"
        time.sleep(0.1)


def test_an_idle_compaction_under_collaboration_is_made_once_and_stored_once(collaborative_lab, context):
    """Page one runs three ``%%agent`` cells that take the session past the idle share of its
    threshold; the kernel compacts once it has been idle for ``Agent.idle_compaction_delay`` (the
    default). While the summary is held, page two runs an ordinary cell: it answers at once, and
    it makes the kernel's latest request page two's, so the entry's message (sent from the
    compaction's thread) names page two's connection as its parent. Exactly one compaction entry
    results (idle), acked once, in one chunk, the same on both pages and in the saved file; page
    two's activity armed no other job and asked for no other summary."""
    lab = collaborative_lab
    server = lab.fake
    name = "idle-shared.ipynb"
    path = lab.root / name
    cells = [IDLE_SETUP, "%%agent\nDescribe the data set, column by column.", "%%agent\nWhich columns have gaps?",
             "%%agent\nWhich are measured, which derived?", "x = 6 * 7\nprint('ANSWER', x)",
             ("import json, ipyagent.bridge.comm as B\nb = B.active_bridge()\n"
              "print('ACKS', json.dumps([a['seq'] for a in b.acks], separators=(',', ':')),"
              " json.dumps(b.unacked(), separators=(',', ':')))"),
             f"rt = {RUNTIME}\nprint('JOB', rt.idle.job is None, '|', rt.idle.last)"]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbformat.write(nb, str(path))

    pages = _two_pages(context, lab, name)
    one, two = pages

    first = len(server.requests)
    hold = threading.Event()
    try:
        for _ in range(3):
            server.enqueue_text(IDLE_ANSWER)
        server.enqueue_summary(Reply(text=IDLE_SUMMARY, hold=hold))
        for i in range(4):
            out = run_text(one, name, i)
            assert "ERROR" not in out, out
        # the pause: the kernel starts the summary on its own (it is held after its first tokens)
        _until(lambda: any(r.kind == "summary" for r in server.requests[first:]))
        assert not _compactions(one, name)
        plain = run_text(two, name, 4)  # page two's own request while the summary is made
        assert "ANSWER 42" in plain, plain
    finally:
        hold.set()
    for page in pages:
        page.wait_for_function(
            "(p) => ((window.__ipaView(p) || {}).default || []).some(e => e.type === 'compaction')",
            arg=name, timeout=120_000)
    # the run's widget became the static view that says so (page one ran the cell; page two sees it
    # through the shared document)
    for page in pages:  # (the panel's own cells: the workspace may have reopened another notebook too)
        panel = page.evaluate("(p) => window.__ipa.panel(p).id", name)
        page.locator(f"[id='{panel}'] .jp-Notebook .jp-Cell").nth(3) \
            .locator(".ipyagent-budget", has_text="Compacted in the background").wait_for(state="visible", timeout=60_000)

    acks = run_text(two, name, 5)
    line = next(x for x in acks.splitlines() if x.startswith("ACKS "))
    seqs = json.loads(line.split(" ", 2)[1])
    assert seqs and len(seqs) == len(set(seqs)), line  # each message (the idle entry's too) acked by one page
    assert json.loads(line.split(" ", 2)[2]) == {}, line
    job = run_text(two, name, 6)
    assert "JOB True | compacted in the background" in job, job  # no job armed by page two's cells

    kinds = [r.kind for r in server.requests[first:]]
    assert kinds[:3] == ["chat"] * 3 and set(kinds[3:]) == {"summary"}, kinds  # one compaction's requests only
    views = [page.evaluate("(p) => window.__ipaView(p)", name)["default"] for page in pages]
    ids = [e["id"] for e in views[0]]
    assert [e["id"] for e in views[1]] == ids and len(ids) == len(set(ids))  # no entry in two chunks
    for view in views:
        compactions = [e for e in view if e["type"] == "compaction"]
        assert len(compactions) == 1 and compactions[0]["trigger"] == "idle", compactions

    # (not awaited: under collaboration a save promise once never settled; the file is polled below)
    one.evaluate("(p) => { void window.__ipa.panel(p).context.save(); }", name)
    saved = saved_notebook(path, lambda nb: _session_ids(nb, "default") == ids, 60, what=str(ids))["metadata"]
    all_ids = [e["id"] for k in chunk_keys(saved) for e in chunk_entries(saved[k])[1] or []]
    assert len(all_ids) == len(set(all_ids)) == len(ids)
    lab.shutdown_kernels()


def _mid_move_notebook(path: Path, moved: int) -> list[dict]:
    """A notebook whose store is in layout 1 (1,501 entries in session ``archive``; a session
    ``broken`` whose ``entries`` is a dict) while the chunk keys of a move into layout 3 cut short
    already hold its first ``moved`` entries: what a page's idle move leaves on disk when the
    notebook is saved (or the page closed) before its last step writes the index. Returns the
    archive's entries."""
    header, entries = generate_session(11, 1501)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in
                ["%load_ext ipyagent", "%%agent --session work\nWhat does the archive hold?"]]
    nbformat.write(nb, str(path))
    raw = json.loads(path.read_text())
    staged: dict = {}
    store_value(staged, {"version": 1, "active": "archive", "sessions": {"archive": {
        "header": header, "leaf": entries[moved - 1]["id"], "settings": {}, "entries": entries[:moved]}}}, 3)
    for key in chunk_keys(staged):
        raw["metadata"][key] = staged[key]
    raw["metadata"]["ipyagent"] = {"version": 1, "active": "archive", "sessions": {
        "archive": {"header": header, "leaf": entries[-1]["id"], "settings": {}, "entries": entries},
        "broken": {"header": header, "leaf": None, "settings": {}, "entries": {"not": "a list"}}}}
    path.write_text(json.dumps(raw))
    return entries


def test_a_move_into_layout_3_skips_what_sits_in_chunks_and_sets_aside_what_it_cannot_move(
        collaborative_lab, context):
    """Issue 35, item 7, with two real pages on one collaborative notebook: the store is in layout
    1 with 500 of its entries already in chunks (a move cut short). Whichever page moves it (one in
    its idle time, the one that ran the cell at its first write, or both), every entry is in one
    chunk once (before: the 500 again, 2,001 chunk entries for 1,501), and the session whose
    ``entries`` is a dict is set aside with it, not dropped."""
    lab = collaborative_lab
    name = "mid-move.ipynb"
    path = lab.root / name
    entries = _mid_move_notebook(path, 500)
    one, two = _two_pages(context, lab, name)
    assert "from push" in run_text(two, name, 0)
    lab.fake.enqueue_text("It holds the earlier work.")
    assert "ERROR" not in run_text(two, name, 1)  # page two ran the cell: it stores the run's entries

    version = "(p) => (window.__ipa.panel(p).context.model.getMetadata('ipyagent') || {}).version"
    for page in (one, two):
        page.wait_for_function(f"(p) => ({version})(p) === 3", arg=name, timeout=60_000)
    ids = [e["id"] for e in entries]
    for page in (one, two):  # each page's view of the shared document: every entry once
        view = page.evaluate("(p) => window.__ipaView(p)", name)
        assert [e["id"] for e in view["archive"]] == ids, (len(view["archive"]), len(set(e["id"] for e in view["archive"])))
        assert view["work"] and len({e["id"] for e in view["work"]}) == len(view["work"])

    one.evaluate("(p) => { void window.__ipa.panel(p).context.save(); }", name)
    saved = saved_notebook(path, lambda nb: _session_ids(nb, "work") and (nb["metadata"].get("ipyagent") or {})
                           .get("version") == 3, 60, what="the moved store")["metadata"]
    all_ids = [e["id"] for k in chunk_keys(saved) for e in chunk_entries(saved[k])[1] or []]
    assert len(all_ids) == len(set(all_ids)), f"{len(all_ids) - len(set(all_ids))} entries in two chunks"
    held = assemble(saved)
    assert [e["id"] for e in held["sessions"]["archive"]["entries"]] == ids
    aside = [item for item in saved["ipyagent"].get("set_aside", []) if item.get("session") == "broken"]
    assert aside and aside[0]["raw"] == {"not": "a list"}, saved["ipyagent"].get("set_aside")
    from ipyagent.store.ipynb import sessions_from_notebook

    _, report = sessions_from_notebook({"cells": [], "metadata": saved}, source=name)
    assert not [p for p in report.problems if "duplicate" in p.message], report.summary()
    lab.shutdown_kernels()
