"""Driving a notebook in a real JupyterLab page, for the browser tests: the page's helpers
(``window.__ipa``, installed before the app loads), opening a notebook, running a cell, saving,
restarting, and writing the notebook files they open.

    open_notebook(page, lab, "x.ipynb")
    outputs = run_cell(page, "x.ipynb", 1)          # the cell's outputs as nbformat dicts
    assert "done" in run_text(page, "x.ipynb", 2)   # … as text (support/outputs.py)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

from support.outputs import outputs_text

ARTIFACTS = Path(__file__).resolve().parents[1] / "browser" / "artifacts"  # screenshots, console logs

# window.__ipa: panel(path), ready(path), meta(path) (the store as one value, whatever its layout),
# outputs(panel, i), run(path, i), watchSave(path) (how the next save ends, in saves[path]), restartThenRun(path, i)
PAGE_HELPERS = r"""
window.__ipa = {
  panel(path) {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) {
      if (w.context && w.context.path === path && !w.isDisposed) return w;
    }
    return null;
  },
  ready(path) {
    const p = this.panel(path);
    const k = p && p.sessionContext.session && p.sessionContext.session.kernel;
    return !!(p && p.context.isReady && k && k.status === 'idle' && k.connectionStatus === 'connected');
  },
  meta(path) {
    // the store as one value: the chunked layout's index with each session's entries from its chunks
    // (layout 3's and 4's chunks hold them as JSON text, layout 2's as a list): the numbered chunks
    // in number order, then the keyed ones (layout 4) parents first; docs/protocol.md says which leaf counts
    const p = this.panel(path);
    if (!p) return null;
    const m = p.context.model;
    const index = m.getMetadata('ipyagent');
    if (!index || !(index.version >= 2)) return index;
    const out = {...index, sessions: {}};
    for (const [n, s] of Object.entries(index.sessions || {})) out.sessions[n] = {...s, entries: []};
    const read = k => { const c = m.getMetadata(k); return {k, c, list: typeof c.entries === 'string' ?
      JSON.parse(c.entries) : c.entries}; };
    const numbered = Object.keys(m.metadata).filter(k => /^ipyagent\/\d{6,9}$/.test(k)).sort()
      .map(k => ({...read(k), num: Number(k.slice(9))}));
    let keyed = Object.keys(m.metadata).filter(k => /^ipyagent\/[0-9a-f]{16}$/.test(k)).sort().map(read);
    const rank = x => [x.c.at || 0, x.k];
    const before = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
    const ordered = [];
    while (keyed.length) {  // parents first: a chunk once no other waiting chunk holds a parent of its entries
      const owner = new Map(); keyed.forEach(x => x.list.forEach(e => owner.set(e.id, x)));
      const free = keyed.filter(x => !x.list.some(e => owner.has(e.parentId) && owner.get(e.parentId) !== x));
      const pool = free.length ? free : keyed;
      const next = pool.reduce((a, b) => (before(rank(b), rank(a)) ? b : a));
      ordered.push(next); keyed = keyed.filter(x => x !== next);
    }
    const latest = {};
    for (const {k, c, list, num} of [...numbered, ...ordered]) {
      const s = (out.sessions[c.session] ??= {leaf: null, entries: []});
      for (const e of list) s.entries.push(e);
      if ('leaf' in c && num !== undefined && num >= (index.next_chunk || 0)) s.leaf = c.leaf;
      if ('leaf' in c && num === undefined && (c.at || 0) > (index.at || 0) && !(latest[c.session] && before([c.at, k],
          latest[c.session]))) { latest[c.session] = [c.at, k]; s.leaf = c.leaf; }
    }
    delete out.next_chunk;
    delete out.at;
    return out;
  },
  outputs(p, i) {
    return p.content.widgets[i].model.outputs.toJSON();
  },
  async run(path, i) {
    const app = window.jupyterapp;
    const p = this.panel(path);
    app.shell.activateById(p.id);
    p.content.activeCellIndex = i;
    await app.commands.execute('notebook:run-cell');
    return this.outputs(p, i);
  },
  // per path, how the save watched by watchSave ended ('completed' or 'failed'; null: not yet)
  saves: {},
  watchSave(path) {
    const p = this.panel(path);
    this.saves[path] = null;
    const seen = (_, state) => {
      if (state === 'completed' || state === 'failed') {
        this.saves[path] = state;
        p.context.saveState.disconnect(seen);
      }
    };
    p.context.saveState.connect(seen);
  },
  async restartThenRun(path, i) {
    const app = window.jupyterapp;
    const p = this.panel(path);
    app.shell.activateById(p.id);
    const restarted = p.sessionContext.restartKernel();
    // a user cell submitted while the kernel is still restarting
    await new Promise(r => setTimeout(r, 0));
    p.content.activeCellIndex = i;
    const ran = app.commands.execute('notebook:run-cell');
    await restarted;
    await ran;
    return this.outputs(p, i);
  }
};
"""


def open_notebook(page: Any, lab: Any, name: str, reset: bool = True, url: str | None = None) -> None:
    """Open ``name`` in ``page`` (with the helpers) and wait until its kernel is idle and connected."""
    page.add_init_script(PAGE_HELPERS)
    page.goto(lab.url(url or (f"/lab/tree/{name}" + ("?reset" if reset else ""))))
    page.wait_for_function(f"() => window.__ipa && window.__ipa.ready({json.dumps(name)})", timeout=180_000)


def run_cell(page: Any, name: str, index: int) -> list[dict[str, Any]]:
    """Run cell ``index`` of the open notebook ``name``; its outputs once it has run."""
    return page.evaluate("([p, i]) => window.__ipa.run(p, i)", [name, index])


def run_text(page: Any, name: str, index: int) -> str:
    return outputs_text(run_cell(page, name, index))


def save_notebook(page: Any, name: str) -> None:
    """Save as a user does: command mode in the notebook's panel, then Ctrl+S; return once the page
    has finished that save. The file is on disk before the page has read back its new hash: a save
    started in between (a test's next step) finds the disk changed "since the last time it was
    opened or saved" and waits on JupyterLab's File Changed dialog for ever."""
    page.evaluate(
        "(path) => { const p = window.__ipa.panel(path); window.jupyterapp.shell.activateById(p.id);"
        " p.content.activeCellIndex = 0; p.content.mode = 'command'; p.content.node.focus();"
        " window.__ipa.watchSave(path); }",
        name,
    )
    page.keyboard.press("Control+s")
    try:
        page.wait_for_function("(p) => window.__ipa.saves[p]", arg=name, timeout=120_000)
        ended = page.evaluate("(p) => window.__ipa.saves[p]", name)
    except Exception as exc:  # noqa: BLE001 - Playwright's TimeoutError: say what the page shows
        ended = f"not finished ({exc.__class__.__name__})"
    if ended != "completed":
        dialogs = page.evaluate("() => [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText)")
        raise AssertionError(f"saving {name}: {ended}; dialogs on the page: {dialogs}")


def restart_kernel(page: Any, name: str) -> None:
    page.evaluate("(p) => window.__ipa.panel(p).sessionContext.restartKernel()", name)
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=180_000)


def write_notebook(path: Path, cells: list[str], outputs: dict[int, list[Any]] | None = None,
                   metadata: dict[str, Any] | None = None) -> None:
    """A notebook of code cells with a kernelspec (JupyterLab asks for a kernel without one)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    if metadata:
        nb.metadata.update(metadata)
    for i, src in enumerate(cells):
        cell = nbformat.v4.new_code_cell(src)
        if outputs and i in outputs:
            cell.outputs = outputs[i]
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


def saved_notebook(path: Path, want: Callable[[dict[str, Any]], bool], timeout: float = 120,
                   what: str = "what was expected") -> dict[str, Any]:
    """The notebook file at ``path`` once ``want(notebook)`` holds: the server writes it after a
    save, so a read that finds it missing or half written is "not yet"."""
    deadline = time.time() + timeout
    last: dict[str, Any] | None = None
    while time.time() < deadline:
        try:
            last = json.loads(path.read_text())
        except (OSError, ValueError):
            last = None
        if last is not None and want(last):
            return last
        time.sleep(0.25)
    raise AssertionError(f"{path.name} on disk never held {what}; last: {json.dumps(last)[:3000]}")
