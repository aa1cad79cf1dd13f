"""Long sessions in a real JupyterLab: the push of a 15 MB and a 50 MB session into the kernel (in
parts, each far below the server's 10 MiB websocket limit), after the first start and after a
restart; and a turn that was run but never saved, which the kernel must still know after a restart
(it continues from the page's model, not from the older file on disk).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from ipyagent.store.chunks import assemble, chunk_number, layout_of
from support.lab_pages import open_notebook, restart_kernel, run_text
from support.sessiongen import generate_session

pytestmark = pytest.mark.usefixtures("fresh_kernels")



def _notebook(path: Path, cells: list[str], sessions: dict | None = None) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    if sessions:
        nb.metadata["ipyagent"] = {"version": 1, "active": next(iter(sessions)), "sessions": sessions}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbformat.write(nb, str(path))


def _archive(n: int) -> dict:
    header, entries = generate_session(21, n)
    return {"header": header, "leaf": entries[-1]["id"], "settings": {}, "entries": entries}


@pytest.mark.parametrize("entries", [5000, pytest.param(17500, marks=pytest.mark.slow)],
                         ids=["5000-entries-15MB", "17500-entries-50MB"])
def test_a_long_session_is_pushed_into_the_kernel(jupyterlab, context, entries):
    lab = jupyterlab
    name = f"long-{entries}.ipynb"
    archive = _archive(entries)
    size = len(json.dumps(archive))
    assert size > 14e6 if entries == 5000 else size > 45e6  # either is over the 10 MiB limit
    _notebook(lab.root / name, ["%load_ext ipyagent", "print('STILL', 1 + 1)"], {"archive": archive})
    page = context.new_page()
    open_notebook(page, lab, name)
    for attempt in ("first start", "restart"):
        out = run_text(page, name, 0)
        assert f"resumed archive ({entries} entries, from push)" in out, (attempt, out)
        assert "could not" not in out and "incomplete" not in out, (attempt, out)
        assert "STILL 2" in run_text(page, name, 1)  # the kernel's connection survived the push
        if attempt == "first start":
            # (a restart itself reconnects the kernel's websocket: only the first start can tell)
            assert not [line for line in context.logs if "Connection lost" in line]
            restart_kernel(page, name)
    lab.shutdown_kernels()


def test_a_turn_run_but_not_saved_survives_a_restart(jupyterlab, context):
    """The notebook holds a 15 MB session (so the push is large); a turn in another session is
    run and not saved; after a restart the model's next request carries that turn."""
    lab = jupyterlab
    server = lab.fake
    name = "unsaved.ipynb"
    path = lab.root / name
    _notebook(path, ["%load_ext ipyagent", "%%agent --session work\nRemember the word PELICAN.",
                     "%%agent --session work\nWhat was the word?"], {"archive": _archive(5000)})
    on_disk = path.read_text()
    page = context.new_page()
    open_notebook(page, lab, name)
    assert "from push" in run_text(page, name, 0)
    server.enqueue_text("Noted: the word is in my notes.")
    out = run_text(page, name, 1)
    assert "ERROR" not in out, out
    page.wait_for_function(
        f"() => !!(window.__ipa.panel({json.dumps(name)}).context.model.getMetadata('ipyagent')"
        ".sessions || {}).work",
        timeout=90_000,
    )
    assert path.read_text() == on_disk  # not saved: the turn is only in the page's model

    restart_kernel(page, name)
    out = run_text(page, name, 0)
    assert "work (" in out and "from push" in out, out
    server.enqueue_text("PELICAN.")
    out = run_text(page, name, 2)
    assert "ERROR" not in out, out
    sent = json.dumps(server.requests[-1].body)
    assert "Remember the word PELICAN." in sent and "Noted: the word is in my notes." in sent
    assert "What was the word?" in sent
    lab.shutdown_kernels()


WATCH = """
window.__ipaWrites = [];
window.__ipaWatch = (path) => {
  const m = window.__ipa.panel(path).context.model;
  m.metadataChanged.connect((_, c) => window.__ipaWrites.push(
    [c.key, c.newValue === undefined ? 0 : new TextEncoder().encode(JSON.stringify(c.newValue)).length]));
};
"""
MOVED = "was in an older storage format and has been converted to the current one"


def _said(page, text: str, timeout: float) -> list[str]:
    """The page's console lines holding ``text``, once there is one (the context fixture records
    them all, also those logged before this is called; Playwright delivers them while it waits)."""
    deadline = time.monotonic() + timeout
    while not (lines := [line for line in page.context.logs if text in line]) and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    return lines


def test_a_layout_1_notebook_moves_to_layout_3_while_idle_and_the_first_turn_writes_little(jupyterlab, context):
    """5,000 entries in layout 1 (before chunks): the page moves them into layout 3 a chunk at a
    time while idle, and says so once; the first turn then writes only its own entries (its
    conversion used to write the whole session in that turn); saved, nothing is lost."""
    lab = jupyterlab
    server = lab.fake
    name = "layout-1.ipynb"
    path = lab.root / name
    archive = _archive(5000)
    _notebook(path, ["%load_ext ipyagent", "%%agent --session archive\nWhat follows from it?"], {"archive": archive})
    page = context.new_page()
    page.add_init_script(WATCH)
    open_notebook(page, lab, name)
    said = _said(page, MOVED, timeout=180)
    assert said, "the notebook was not moved into layout 3 before a turn"
    index = page.evaluate("(p) => window.__ipa.panel(p).context.model.getMetadata('ipyagent')", name)
    assert index["version"] == 3 and "entries" not in index["sessions"]["archive"]
    chunks = page.evaluate(
        "(p) => Object.keys(window.__ipa.panel(p).context.model.metadata).filter(k => k.startsWith('ipyagent/'))", name)
    assert sorted(chunks) == [f"ipyagent/{i:06d}" for i in range(50)]

    page.evaluate("(p) => window.__ipaWatch(p)", name)
    assert "from push" in run_text(page, name, 0)
    server.enqueue_text("It follows that the archive holds.")
    out = run_text(page, name, 1)
    assert "ERROR" not in out, out
    page.wait_for_function("() => window.__ipaWrites.some(([k]) => k === 'ipyagent/000050')", timeout=180_000)
    writes = page.evaluate("() => window.__ipaWrites")
    # new chunks after the 50 moved ones (as the turn's entries came), maybe the small index
    assert all(k == "ipyagent" or (chunk_number(k) or 0) >= 50 for k, _ in writes), writes
    assert sum(size for _, size in writes) < 100_000, writes  # its own entries, not the session (15 MB)

    page.evaluate("(p) => window.__ipa.panel(p).context.save()", name)
    saved = json.loads(path.read_text())["metadata"]
    assert layout_of(saved) == 3
    ids = [e["id"] for e in assemble(saved)["sessions"]["archive"]["entries"]]
    assert ids[:5000] == [e["id"] for e in archive["entries"]] and len(ids) > 5000
    assert len([line for line in context.logs if MOVED in line]) == 1  # said once
