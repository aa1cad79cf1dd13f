"""Long sessions in a real JupyterLab (headless Chromium, the bridge installed, the fake model server).

For each size (entries of one stored session, in layout 3 as the bridge writes it, or in each of
``--layouts``) prints one table row:

- open: ``page.goto`` until the notebook is ready and the push of the stored session has arrived
  in the kernel (a probe request queued after the push has its reply);
- push: from the bridge sending the push until that probe's reply;
- save: ``context.save()`` of the notebook (median of 3), next to the save of a plain notebook of
  the same size (the session's JSON text in a raw cell, no ipyagent metadata) and their ratio;
- longest main-thread task during each of two ``%%agent`` turns (PerformanceObserver ``longtask``
  entries collected in the page: "none" when no task took over 50 ms; the page's first turn also
  pays one-off costs, which the baseline size 0 shows);
- the bridge's own main-thread time in each turn (a CPU profile of the page over the turn: the
  samples with a frame of the ipyagent-bridge labextension on their stack), in all and its longest
  run — what of the longest task is ipyagent's, and what is JupyterLab's (rendering the answer);
- bytes written into the notebook model by each turn: the JSON of each metadata key the turn
  changed (the new chunk keys and the index if it changed), and how many
  metadata changes the model signalled;
- the JS heap (``performance.memory.usedJSHeapSize``, after a garbage collection) once open;
- for layout 1 (``--layouts 1``): the bridge's move of the notebook into layout 3 while the page is
  idle, before the first turn: how long it ran, in how many steps, its longest step (the bridge's
  own time), and the longest main-thread task while it ran (anyone's: the push and JupyterLab's
  own work fall in that time too); "none" where no move comes within 30 s of the push (an older
  bridge: the first turn converts the notebook);
- with collaboration (jupyter-collaboration, a second JupyterLab): the growth of the server's Y
  store per turn (both turns: the bytes of its stored updates, once unchanged for 1 s).

    python tests/benchmarks/long_notebook.py [--sizes 1000,5000,10000] [--collab all|none|1000,5000]
                                             [--layouts 3|2,3]

``--layouts 2,3`` measures each size twice: layout 2 (chunks of entry objects, this round's first
chunked layout) is the anchor the text chunks of layout 3 are compared with in the same run.

``--sizes 1000`` runs in a few minutes. Size 0 (no stored session: no push) is a baseline for
what a turn costs the page without a long session, e.g. ``--sizes 0,1000``. Run it with
``PYTHONPATH`` pointing at the ``extension`` folder of the checkout being measured (the
JupyterLab and its kernels inherit it); it needs what the browser tests need.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

import nbformat
from playwright.sync_api import sync_playwright

from browser.test_collaboration_browser import _settled
from ipyagent.store.chunks import assemble, store_value
from ipyagent.testing import FakeProviderServer
from support.lab_pages import PAGE_HELPERS, run_text
from support.lab_server import CHROMIUM, CHROMIUM_ARGS, FAKE_KEY, NO_RTC, JupyterLab, start_server
from support.sessiongen import generate_session

PROBE = "import ipyagent.bridge.comm as _C; print('PUSHED', _C.peek_push() is not None)"

BENCH = """
window.__bench = { tasks: [], all: [], pushSent: null, writes: 0, keys: {}, moveStart: null, moved: null };
new PerformanceObserver(list => {
  for (const e of list.getEntries()) {
    window.__bench.tasks.push(e.duration);
    window.__bench.all.push([e.startTime, e.duration]);
  }
}).observe({ type: 'longtask', buffered: true });
const __debug = console.debug.bind(console);
console.debug = (...args) => {
  if (args.some(a => String(a).includes('pushed the stored session'))) window.__bench.pushSent = performance.now();
  const took = args.find(a => a && typeof a.longest === 'number');
  if (took) window.__bench.steps = took;
  if (args.some(a => String(a).includes('moving the sessions into layout'))) {
    window.__bench.moveStart = (args.find(a => a && typeof a.since === 'number') || { since: performance.now() }).since;
  }
  __debug(...args);
};
const __info = console.info.bind(console);
console.info = (...args) => {
  if (args.some(a => String(a).includes('has been converted to the current one'))) window.__bench.moved = performance.now();
  __info(...args);
};
window.__benchOps = {
  probe(path, code) {
    const k = window.__ipa.panel(path).sessionContext.session.kernel;
    let text = '';
    const f = k.requestExecute({ code, silent: false, store_history: false });
    f.onIOPub = m => { if (m.header.msg_type === 'stream') text += m.content.text; };
    return f.done.then(() => ({ text, at: performance.now() }));
  },
  watch(path) {
    const m = window.__ipa.panel(path).context.model;
    m.metadataChanged.connect((_, change) => {
      window.__bench.writes += 1;
      window.__bench.keys[change.key] = true;
    });
  },
  reset() { window.__bench.tasks = []; window.__bench.writes = 0; window.__bench.keys = {}; },
  written(path) {
    const m = window.__ipa.panel(path).context.model;
    const enc = new TextEncoder();
    let bytes = 0;
    const keys = Object.keys(window.__bench.keys);
    for (const k of keys) {
      const v = m.getMetadata(k);
      bytes += v === undefined ? 0 : enc.encode(JSON.stringify(v)).length;
    }
    return { bytes, keys: keys.length, names: keys.sort(), writes: window.__bench.writes,
             longest: window.__bench.tasks.length ? Math.max(...window.__bench.tasks) : 0 };
  },
  async save(path) {
    const t = performance.now();
    await window.__ipa.panel(path).context.save();
    return performance.now() - t;
  },
  move() {
    const b = window.__bench;
    if (b.moved === null) return null;
    const during = b.all.filter(([at, d]) => at + d >= b.moveStart && at <= b.moved).map(([, d]) => d);
    return { ms: b.moved - b.moveStart, longest: during.length ? Math.max(...during) : 0,
             steps: b.steps ? b.steps.steps : null, step: b.steps ? b.steps.longest : null };
  },
  heap() {
    if (window.gc) window.gc();
    return performance.memory.usedJSHeapSize;
  }
};
"""

PROMPTS = ["%%agent --session work\nSummarise what we know so far.", "%%agent --session work\nWhat follows from it?"]
ANSWER = "ANSWER " + " ".join(f"finding {i} of this turn holds." for i in range(80))


def _notebooks(root: Path, n: int, layout: int = 3) -> tuple[str, str, int, int]:
    """The agent notebook (one session of ``n`` entries in ``layout``; none stored for 0) and its
    plain twin; the sizes of both."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in ["%load_ext ipyagent", *PROMPTS]]
    raw = json.loads(nbformat.writes(nb))
    if n:
        header, entries = generate_session(21, n)
        store_value(raw["metadata"], {"version": 1, "active": "archive", "sessions": {"archive": {
            "header": header, "leaf": entries[-1]["id"], "settings": {}, "entries": entries}}}, layout)
    name = f"long-{n}-{layout}.ipynb"
    text = json.dumps(raw)
    (root / name).write_text(text)
    plain = nbformat.v4.new_notebook()
    plain.metadata["kernelspec"] = nb.metadata["kernelspec"]
    plain.cells = [nbformat.v4.new_raw_cell(json.dumps(assemble(raw["metadata"])))]
    plain_name = f"plain-{n}-{layout}.ipynb"
    nbformat.write(plain, str(root / plain_name))
    return name, plain_name, len(text.encode()), (root / plain_name).stat().st_size


def _open(context, lab: JupyterLab, name: str, stored: bool) -> tuple[object, float, float | None]:
    """A page on ``name``; seconds from goto until the push arrived (``stored``: there is one),
    and of the push itself."""
    page = context.new_page()
    page.add_init_script(PAGE_HELPERS)
    page.add_init_script(BENCH)
    start = time.perf_counter()
    page.goto(lab.url(f"/lab/tree/{name}?reset"))
    page.wait_for_function(f"() => window.__ipa && window.__ipa.ready({json.dumps(name)})", timeout=900_000)
    if stored:
        page.wait_for_function("() => window.__bench.pushSent !== null", timeout=900_000)
    probe = page.evaluate("([p, c]) => window.__benchOps.probe(p, c)", [name, PROBE])
    opened = time.perf_counter() - start
    if not stored:
        return page, opened, None
    if "PUSHED True" not in probe["text"]:
        raise SystemExit(f"{name}: the push did not arrive: {probe['text']!r}")
    push = (probe["at"] - page.evaluate("() => window.__bench.pushSent")) / 1000
    return page, opened, push


OWN_CODE = "/ipyagent-bridge/static/"  # the labextension's chunks (served under /lab/extensions/)


def own_time(profile: dict) -> tuple[float, float]:
    """(all, longest run) in ms of a CPU profile's samples that have a frame of the bridge's code
    on their stack (a run: consecutive such samples)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    parent = {child: node["id"] for node in profile["nodes"] for child in node.get("children", ())}
    ours: dict[int, bool] = {}

    def is_ours(node_id: int) -> bool:
        if node_id not in ours:
            chain, x = [], node_id
            while x is not None and x not in ours:
                chain.append(x)
                x = parent.get(x)
            known = ours.get(x, False) if x is not None else False
            for y in reversed(chain):
                known = known or OWN_CODE in nodes[y]["callFrame"]["url"]
                ours[y] = known
        return ours[node_id]

    total = run = longest = 0.0
    deltas = profile["timeDeltas"][1:] + [0]
    for sample, delta in zip(profile["samples"], deltas):
        if is_ours(sample):
            total += delta
            run += delta
            longest = max(longest, run)
        else:
            run = 0.0
    return total / 1000, longest / 1000


def _turns(page, lab: JupyterLab, name: str, stored: bool, before_each=lambda: None) -> list[dict]:
    """``%load_ext`` (resuming from the push), then two ``%%agent`` turns, ``before_each()`` before
    each: what each turn wrote into the model, its longest main-thread task and the bridge's own
    time in it."""
    page.evaluate("(p) => window.__benchOps.watch(p)", name)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    out = run_text(page, name, 0)
    if stored and "from push" not in out:
        raise SystemExit(f"{name}: %load_ext did not resume from the push: {out!r}")
    measured = []
    for cell in range(1, len(PROMPTS) + 1):
        before_each()
        page.evaluate("() => window.__benchOps.reset()")
        cdp.send("Profiler.start")
        lab.fake.enqueue_text(ANSWER)
        out = run_text(page, name, cell)
        if "ERROR" in out:
            raise SystemExit(f"{name}: the turn failed: {out!r}")
        # the entries' last writes may follow the cell's end: wait until no write came for 1 s
        last, since = -1, time.time()
        while time.time() - since < 1.0:
            now = page.evaluate("() => window.__bench.writes")
            if now != last:
                last, since = now, time.time()
            time.sleep(0.1)
        own, own_longest = own_time(cdp.send("Profiler.stop")["profile"])
        measured.append({**page.evaluate("(p) => window.__benchOps.written(p)", name),
                         "own": own, "own_longest": own_longest})
    cdp.detach()
    return measured


def _save(page, name: str) -> float:
    return statistics.median(page.evaluate("(p) => window.__benchOps.save(p)", name) for _ in range(3)) / 1000


def _lab(base: Path, server: FakeProviderServer, extra: list[str]) -> JupyterLab:
    base.mkdir()
    lab = start_server(base, "jupyterlab", ["--LabApp.expose_app_in_browser=True", *extra], env_extra={
        "OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": FAKE_KEY,
        "IPYAGENT_MODEL": "openai:fake-model"})
    lab.fake = server  # type: ignore[attr-defined]
    return lab


def _sizes(text: str) -> list[int]:
    return [] if text.strip().lower() in ("", "none") else [int(s) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000,10000", help="entries per notebook, comma-separated")
    parser.add_argument("--collab", default="all",
                        help="the sizes (of --sizes) also measured with collaboration on: 'all', 'none' or a list")
    parser.add_argument("--layouts", default="3", help="the store layouts to measure each size in: 3, or 2,3")
    args = parser.parse_args()
    layouts = _sizes(args.layouts)
    sizes = _sizes(args.sizes)
    collab = sizes if args.collab == "all" else [n for n in _sizes(args.collab) if n in sizes]
    work = Path(tempfile.mkdtemp(prefix="ipyagent-long-notebook-"))
    rows = []
    with FakeProviderServer() as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            *CHROMIUM_ARGS, "--enable-precise-memory-info", "--js-flags=--expose-gc"])
        lab = _lab(work / "lab", server, [NO_RTC])
        rtc = None
        if collab:
            ystore = work / "rtc" / "ystore.db"
            rtc = _lab(work / "rtc", server, ["--YDocExtension.disable_rtc=False", f"--SQLiteYStore.db_path={ystore}"])
        try:
            for n, layout in itertools.product(sizes, layouts):
                name, plain_name, size, plain_size = _notebooks(lab.root, n, layout)
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page, opened, push = _open(context, lab, name, n > 0)
                move = _move(page) if layout == 1 and n else None
                heap = page.evaluate("() => window.__benchOps.heap()")
                turns = _turns(page, lab, name, n > 0)
                save = _save(page, name)
                page.close()
                plain_page = _open_plain(context, lab, plain_name)
                plain = _save(plain_page, plain_name)
                context.close()
                lab.shutdown_kernels()
                grown = None
                if rtc is not None and n in collab:
                    _notebooks(rtc.root, n, layout)
                    context = browser.new_context(viewport={"width": 1280, "height": 800})
                    page, _, _ = _open(context, rtc, name, n > 0)
                    seen: list[int] = []
                    _turns(page, rtc, name, n > 0, lambda: seen.append(_settled(ystore)))
                    seen.append(_settled(ystore))
                    grown = [b - a for a, b in itertools.pairwise(seen)]
                    context.close()
                    rtc.shutdown_kernels()
                rows.append((n, layout, size, plain_size, opened, push, save, plain, turns, heap, grown, move))
                print(f"measured {n} entries (layout {layout}); the turns changed "
                      f"{' / '.join(', '.join(t['names']) for t in turns)}", file=sys.stderr, flush=True)
        finally:
            lab.stop()
            if rtc is not None:
                rtc.stop()
            browser.close()
    _table(rows)


def _move(page) -> dict | str:
    """The move into layout 3 (its time, steps, longest step and task), or "none" when none came."""
    try:
        page.wait_for_function("() => window.__bench.moved !== null", timeout=30_000)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: no move (an older bridge)
        return "none"
    return page.evaluate("() => window.__benchOps.move()")


def _open_plain(context, lab: JupyterLab, name: str):
    page = context.new_page()
    page.add_init_script(PAGE_HELPERS)
    page.add_init_script(BENCH)
    page.goto(lab.url(f"/lab/tree/{name}?reset"))
    page.wait_for_function(f"() => window.__ipa && window.__ipa.ready({json.dumps(name)})", timeout=900_000)
    return page


def _table(rows: list[tuple]) -> None:
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; per turn: the first / the second %%agent turn")
    print("| entries | layout | notebook (plain) | open | push | save (plain, ratio) | longest task per turn | "
          "the bridge's own JS per turn (longest run) | model bytes per turn (keys, writes) | JS heap after open | "
          "Y store per turn | move into layout 3 (longest task) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, layout, size, plain_size, opened, push, save, plain, turns, heap, grown, move in rows:
        longest = " / ".join(f"{t['longest']:.0f} ms" if t["longest"] else "none over 50 ms" for t in turns)
        written = " / ".join(f"{t['bytes']:,} B ({t['keys']}, {t['writes']})" for t in turns)
        own = " / ".join(f"{t['own']:.0f} ms ({t['own_longest']:.0f} ms)" for t in turns)
        ystore = "—" if grown is None else " / ".join(f"{g / 1e3:,.1f} KB" for g in grown)
        pushed = "—" if push is None else f"{push:.2f} s"
        print(f"| {n:,} | {layout} | {size / 1e6:.1f} MB ({plain_size / 1e6:.1f} MB) | {opened:.2f} s | {pushed} | {save:.2f} s ({plain:.2f} s, "
              f"{save / plain:.2f}×) | {longest} | {own} | {written} | {heap / 1e6:.0f} MB | {ystore} | "
              f"{_moved(move)} |")


def _moved(move: dict | str | None) -> str:
    if move is None or isinstance(move, str):
        return move or "—"
    longest = f"{move['longest']:.0f} ms" if move["longest"] else "none over 50 ms"
    return (f"{move['ms'] / 1000:.2f} s, {move['steps']} steps, the longest {move['step']:.0f} ms "
            f"(longest task meanwhile: {longest})")

if __name__ == "__main__":
    main()
