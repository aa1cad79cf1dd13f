"""End to end: the ipyagent-bridge labextension in a real JupyterLab, with a real kernel.

The kernel side is driven directly with ``ipyagent.bridge.comm.KernelBridge`` (what the
notebook magics use), so these tests exercise exactly the comm contract of docs/protocol.md:
entries → ``metadata["ipyagent"]`` → saved file; the silent push after a restart, queued before a
user cell; a second tab; close and reopen; journal outputs lifted on open.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from ipyagent.store.chunks import assemble, store_value
from ipyagent.store.keyed_chunks import keyed_key
from support.lab_pages import ARTIFACTS, open_notebook, run_cell, save_notebook, saved_notebook, write_notebook
from support.outputs import output_line, outputs_text

pytestmark = pytest.mark.usefixtures("fresh_kernels")


# ---- Pi-shaped entries ------------------------------------------------------------------------

HEADER = {
    "type": "session",
    "version": 3,
    "id": "3f0c9a52-7c1e-4a8e-9d7b-2b8f3f1d0a11",
    "timestamp": "2026-11-30T08:00:00.000Z",
    "cwd": "/tmp",
}
SETTINGS = {"model": "openai:gpt-4.1-mini", "context_window": 8000}


def _msg(eid, parent, message, ts="2026-11-30T08:00:01.000Z"):
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message}


ENTRIES = [
    _msg("a1b2c3d4", None, {"role": "user", "content": [{"type": "text", "text": "Plot x**2"}],
                            "timestamp": 1764489601000, "cellId": "c-1", "executionCount": 1}),
    _msg("b2c3d4e5", "a1b2c3d4", {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Use matplotlib."},
            {"type": "toolCall", "id": "call_1", "name": "python",
             "arguments": {"code": "print('''quoted''', r'C:\\tmp\\')"}},
        ],
        "api": "openai-completions", "provider": "openai", "model": "gpt-4.1-mini",
        "usage": {"input": 120, "output": 30, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 150,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 1764489602000}),
    _msg("c3d4e5f6", "b2c3d4e5", {
        "role": "toolResult", "toolCallId": "call_1", "toolName": "python",
        "content": [{"type": "text", "text": "quoted C:\\tmp\\ ✓ '''"}], "isError": False,
        "timestamp": 1764489603000}),
    {"type": "compaction", "id": "d4e5f6a7", "parentId": "c3d4e5f6",
     "timestamp": "2026-11-30T08:00:04.000Z",
     "summary": "## Goal\nPlot x**2.\n\n## Progress\n- [x] ran the code",
     "firstKeptEntryId": "b2c3d4e5", "tokensBefore": 1234},
]
EXTRA = [_msg("e5f6a7b8", "d4e5f6a7", {"role": "user", "content": [{"type": "text", "text": "more"}],
                                       "timestamp": 1764489605000})]
EXTRA2 = [_msg("f6a7b8c9", "e5f6a7b8", {"role": "user", "content": [{"type": "text", "text": "after reopen"}],
                                        "timestamp": 1764489606000})]
ALL_IDS = [e["id"] for e in ENTRIES]

CELLS = [
    # 0: open the bridge (the notebook magics will do this on %load_ext ipyagent)
    ("import json\n"
    "from ipyagent.bridge.comm import KernelBridge\n"
    f"ENTRIES = json.loads({json.dumps(ENTRIES)!r})\n"
    f"EXTRA = json.loads({json.dumps(EXTRA)!r})\n"
    f"EXTRA2 = json.loads({json.dumps(EXTRA2)!r})\n"
    f"HEADER = json.loads({json.dumps(HEADER)!r})\n"
    f"SETTINGS = json.loads({json.dumps(SETTINGS)!r})\n"
    "b = KernelBridge().open()\n"
    "print('OPEN', b.connected)"),
    # 1: the first two entries, with header and settings
    ("seq = b.send_entries('default', ENTRIES[:2], leaf=ENTRIES[1]['id'], header=HEADER, settings=SETTINGS)\n"
    "print('SENT', seq)"),
    # 2: state
    ("print('STATE', json.dumps({'connected': b.connected, 'unacked': b.unacked(), "
    "'hello_ack': b.hello_ack, 'acks': len(b.acks), 'sent': b.seq}))"),
    # 3: all entries again (the first two are already stored: idempotent)
    ("b.send_entries('default', ENTRIES, leaf=ENTRIES[-1]['id'])\n"
    "b.send_entries('default', ENTRIES, leaf=ENTRIES[-1]['id'])"),
    # 4: what the frontend pushed into this kernel
    ("import json, ipyagent.bridge.comm as B\n"
    "print('PUSH', json.dumps(B.pending_push()))"),
    # 5: one more entry
    "b.send_entries('default', EXTRA, leaf=EXTRA[-1]['id'])",
    # 6: another one
    "b.send_entries('default', EXTRA2, leaf=EXTRA2[-1]['id'])",
]



def _ids(meta) -> list[str]:
    return [e["id"] for e in meta["sessions"]["default"]["entries"]]


def _saved_meta(path: Path, want_ids: list[str], timeout: float = 120) -> dict:
    def held(nb: dict) -> bool:
        meta = assemble(nb.get("metadata", {}))
        return bool(meta) and _ids(meta) == want_ids

    return assemble(saved_notebook(path, held, timeout, what=str(want_ids)).get("metadata", {}))


def _state(page, name: str, until=None, timeout: float = 120) -> dict:
    """Run the STATE cell (again, until ``until(state)`` holds: acks arrive asynchronously)."""
    deadline = time.time() + timeout
    while True:
        state = json.loads(output_line(run_cell(page, name, 2), "STATE"))
        if until is None or until(state) or time.time() > deadline:
            return state
        time.sleep(0.3)


def test_entries_restart_push_second_tab_reopen(jupyterlab, context):
    lab = jupyterlab
    name = "x.ipynb"
    path = lab.root / name
    write_notebook(path, CELLS)
    page = context.new_page()
    console: list[str] = []  # what the pages log: the kernel must not close a comm a page never knew
    page.on("console", lambda m: console.append(m.text))
    open_notebook(page, lab, name)

    out = run_cell(page, name, 0)
    assert output_line(out, "OPEN") in ("False", "True"), out
    out = run_cell(page, name, 1)
    assert output_line(out, "SENT") == "1", out
    state = _state(page, name, until=lambda s: s["connected"] and not s["unacked"])
    assert state["connected"] is True, state
    assert state["unacked"] == {}, state
    assert state["hello_ack"]["frontend"] == "jupyterlab"
    assert state["hello_ack"]["path"] == name

    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    assert _ids(meta) == ALL_IDS[:2]
    assert meta["active"] == "default" and meta["version"] == 4  # chunks of entries' JSON text, keyed by their ids
    chunk = page.evaluate("([p, k]) => window.__ipa.panel(p).context.model.getMetadata(k)",
                          [name, keyed_key("default", ALL_IDS[:2])])
    assert isinstance(chunk["entries"], str) and chunk["ids"] == [e["id"] for e in json.loads(chunk["entries"])]
    sess = meta["sessions"]["default"]
    assert sess["header"] == HEADER and sess["settings"] == SETTINGS and sess["leaf"] == ALL_IDS[1]

    run_cell(page, name, 3)
    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    assert _ids(meta) == ALL_IDS  # no duplicates although everything was sent three times
    assert meta["sessions"]["default"]["leaf"] == ALL_IDS[-1]
    assert meta["sessions"]["default"]["entries"] == ENTRIES  # stored verbatim
    state = _state(page, name, until=lambda s: not s["unacked"])
    assert state["unacked"] == {}, state

    # Ctrl+S writes the metadata to disk
    save_notebook(page, name)
    saved = _saved_meta(path, ALL_IDS)
    assert saved["sessions"]["default"]["header"] == HEADER
    assert saved["sessions"]["default"]["settings"] == SETTINGS
    assert saved["sessions"]["default"]["entries"] == ENTRIES
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "bridge-saved.png"))

    # restart: the push reaches the new kernel before a cell submitted during the restart
    out = page.evaluate("([p, i]) => window.__ipa.restartThenRun(p, i)", [name, 4])
    pushed = json.loads(output_line(out, "PUSH"))
    assert pushed is not None, "the cell ran before the push arrived"
    assert _ids(pushed) == ALL_IDS
    assert pushed["sessions"]["default"]["entries"] == ENTRIES  # ''' and backslashes survived

    # the restarted kernel opens a new bridge; a second tab of the same notebook connects
    run_cell(page, name, 0)
    page2 = context.new_page()
    page2.on("console", lambda m: console.append(m.text))
    open_notebook(page2, lab, name, reset=False)
    meta2 = page2.evaluate("(p) => window.__ipa.meta(p)", name)
    assert _ids(meta2) == ALL_IDS
    # the kernel re-opened its comm for the new tab; both tabs answer its hello
    state = _state(page, name, until=lambda s: s["connected"])
    assert state["connected"] is True, state
    run_cell(page, name, 3)  # everything again
    run_cell(page, name, 5)  # one new entry
    want = ALL_IDS + [EXTRA[0]["id"]]
    page2.wait_for_function(
        f"() => JSON.stringify(window.__ipa.meta({json.dumps(name)}).sessions.default.entries.map(e => e.id)) === {json.dumps(json.dumps(want, separators=(',', ':')))}",
        timeout=90_000,
    )
    for pg in (page, page2):
        assert _ids(pg.evaluate("(p) => window.__ipa.meta(p)", name)) == want
    state = _state(page, name, until=lambda s: not s["unacked"])
    assert state["unacked"] == {}, state
    save_notebook(page, name)
    _saved_meta(path, want)
    page2.close()

    # close the notebook and open it again: the running kernel gets the push, the bridge says
    # hello to the new panel, and new entries keep arriving
    page.evaluate(
        "async (path) => { const p = window.__ipa.panel(path); await p.context.save(); p.close(); }", name
    )
    page.wait_for_function(f"() => !window.__ipa.panel({json.dumps(name)})")
    page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path})", name)
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=60_000)
    assert _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)) == want
    state = _state(page, name, until=lambda s: s["connected"])
    assert state["connected"] is True, state
    run_cell(page, name, 6)
    want2 = want + [EXTRA2[0]["id"]]
    page.wait_for_function(
        f"() => window.__ipa.meta({json.dumps(name)}).sessions.default.entries.length === {len(want2)}",
        timeout=90_000,
    )
    assert _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)) == want2
    save_notebook(page, name)
    _saved_meta(path, want2)
    page.screenshot(path=str(ARTIFACTS / "bridge-reopened.png"))
    lab.shutdown_kernels()
    # no "Comm not found" from the bridge's own comms (this notebook never loads ipyagent, so
    # ipywidgets' control comm is still refused here: test_agent_magic_end_to_end checks the rest)
    bridge_comms = [line for line in console if "Comm not found" in line and "-" not in line.split()[-1]]
    assert not bridge_comms, console


# the page's fetch with the reply to a save (a PUT to the contents API) held back 3 s: a loaded
# machine, where the file is written before the page hears so
SLOW_SAVE_REPLY = """(() => {
  const fetch0 = window.fetch;
  window.fetch = async (...args) => {
    const reply = await fetch0(...args);
    const req = args[0];
    if (req instanceof Request && req.method === 'PUT' && req.url.includes('/api/contents/')) {
      await new Promise(done => setTimeout(done, 3000));
    }
    return reply;
  };
})()"""


def test_a_save_after_a_slow_save_asks_nothing(jupyterlab, context):
    """save_notebook returns once the page has finished its save: the reopen step above saved
    again as soon as the file on disk held the entries, and when the reply to the first save was
    slow (CI under load) the page still held the old hash, took the file for changed on disk and
    waited on JupyterLab's File Changed dialog until pytest-timeout."""
    name = "slow-save.ipynb"
    path = jupyterlab.root / name
    write_notebook(path, ["x = 1"])
    page = context.new_page()
    page.add_init_script(SLOW_SAVE_REPLY)
    open_notebook(page, jupyterlab, name)
    run_cell(page, name, 0)
    save_notebook(page, name)
    saved_notebook(path, lambda nb: nb["cells"][0]["execution_count"] == 1, what="the run cell")
    page.evaluate("(path) => { window.__ipa.watchSave(path); window.__ipa.panel(path).context.save(); }", name)
    page.wait_for_function(
        f"() => window.__ipa.saves[{json.dumps(name)}] || document.querySelector('.jp-Dialog')", timeout=120_000
    )
    dialogs = page.evaluate("() => [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText)")
    assert dialogs == []
    assert page.evaluate("(p) => window.__ipa.saves[p]", name) == "completed"


# beyond a double's precision (next++ stays put), 1e+22 as a number, Infinity as a number
HOSTILE_KEYS = ["ipyagent/" + "1" * 17, "ipyagent/1" + "0" * 21, "ipyagent/" + "9" * 400]


def test_hostile_chunk_keys_are_set_aside_and_new_chunks_are_keyed_by_their_entries(jupyterlab, context):
    """A layout-3 notebook with three stray chunk keys: two turns' entries go into new chunks
    under layout 4's keys, derived from the entries they hold (not one key overwritten, not a key
    no reader reads), the keys are said once, and the saved notebook holds every entry with the
    stray keys set aside."""
    lab = jupyterlab
    name = "hostile-keys.ipynb"
    path = lab.root / name
    md: dict = {}
    store_value(md, {"version": 1, "active": "default", "sessions": {"default": {
        "header": HEADER, "leaf": ALL_IDS[-1], "settings": SETTINGS, "entries": ENTRIES}}}, 3)
    for key in HOSTILE_KEYS:
        md[key] = {"session": "default", "ids": [], "entries": "[]"}
    write_notebook(path, CELLS, metadata=md)
    page = context.new_page()
    open_notebook(page, lab, name)
    assert output_line(run_cell(page, name, 0), "OPEN") in ("False", "True")
    _state(page, name, until=lambda s: s["connected"])
    for cell in (5, 6):
        run_cell(page, name, cell)
        state = _state(page, name, until=lambda s, n=cell - 4: not s["unacked"] and s["acks"] >= n)
        assert state["unacked"] == {}, state
    keys = page.evaluate(
        "(p) => Object.keys(window.__ipa.panel(p).context.model.metadata).filter(k => k.startsWith('ipyagent/')).sort()",
        name)
    turns = [keyed_key("default", [EXTRA[0]["id"]]), keyed_key("default", [EXTRA2[0]["id"]])]
    assert keys == sorted(["ipyagent/000000", *turns, *HOSTILE_KEYS])
    want = ALL_IDS + [EXTRA[0]["id"], EXTRA2[0]["id"]]
    save_notebook(page, name)
    saved = _saved_meta(path, want)
    assert saved["sessions"]["default"]["leaf"] == EXTRA2[0]["id"]
    assert sorted(item["where"] for item in saved["set_aside"]) == sorted(HOSTILE_KEYS)
    said = [line for line in context.logs if "3 key(s) of this notebook's metadata" in line]
    assert said and all(line.startswith("warning") for line in said), context.logs
    assert len(said) == 1, said  # once, however often the store is read


def test_two_views_of_one_notebook_share_one_bridge(jupyterlab, context):
    """File ▸ New View: two panels share one document model; exactly one comm handler answers."""
    lab = jupyterlab
    name = "views.ipynb"
    write_notebook(lab.root / name, CELLS)
    page = context.new_page()
    open_notebook(page, lab, name)
    page.evaluate(
        "async (path) => { const p = window.__ipa.panel(path); window.jupyterapp.shell.activateById(p.id);"
        " await window.jupyterapp.commands.execute('docmanager:clone'); }",
        name,
    )
    views = f"() => [...window.jupyterapp.shell.widgets('main')].filter(w => w.context && w.context.path === {json.dumps(name)}).length"
    page.wait_for_function(f"() => ({views})() === 2")
    run_cell(page, name, 0)
    run_cell(page, name, 3)  # two messages
    state = _state(page, name, until=lambda s: s["connected"] and not s["unacked"])
    # one ack per message, not two (2 messages; 3 when the hello_ack, on its subshell, came after
    # them and the unacknowledged entries went once more). A message the page already held is
    # acked once or not at all, never twice: when the first message reached the page before its
    # handler and went again with the second, one ack answers both (seen at load 8)
    assert state["unacked"] == {} and 1 <= state["acks"] <= state["sent"], state
    assert _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)) == ALL_IDS
    lab.shutdown_kernels()


def test_push_on_first_start_and_after_a_crash(jupyterlab, context):
    """A notebook that already holds a session: its kernel gets the push before the first user
    cell, and again after the kernel dies and the server restarts it."""
    lab = jupyterlab
    name = "crash.ipynb"
    path = lab.root / name
    meta = {"version": 1, "active": "default", "sessions": {"default": {
        "header": HEADER, "leaf": ALL_IDS[-1], "settings": SETTINGS, "entries": ENTRIES}}}
    write_notebook(path, [CELLS[4], "import os\nos._exit(1)"], metadata={"ipyagent": meta})
    page = context.new_page()
    open_notebook(page, lab, name)
    out = run_cell(page, name, 0)
    pushed = json.loads(output_line(out, "PUSH"))
    assert pushed == meta

    page.evaluate(
        """(path) => {
            const p = window.__ipa.panel(path);
            window.__statuses = [];
            p.sessionContext.statusChanged.connect((_, s) => window.__statuses.push(s));
            p.content.activeCellIndex = 1;
            void window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        name,
    )
    page.wait_for_function(
        f"() => window.__statuses.includes('autorestarting') && window.__ipa.ready({json.dumps(name)})",
        timeout=60_000,
    )
    out = run_cell(page, name, 0)
    assert json.loads(output_line(out, "PUSH")) == meta, page.evaluate("() => window.__statuses")
    lab.shutdown_kernels()


def test_agent_magic_end_to_end(jupyterlab, context):
    """The real flow: %load_ext ipyagent, %%agent against the fake model server; the entries reach
    the metadata through the bridge (no journal output), survive a save and a kernel restart, and
    the session continues after the restart."""
    lab = jupyterlab
    server = lab.fake
    name = "agent.ipynb"
    path = lab.root / name
    write_notebook(path, ["%load_ext ipyagent", "%%agent\nSay hello.", "%%agent\nAgain."])
    page = context.new_page()
    console: list[str] = []  # the kernel closes no comm a page never knew (no "Comm not found")
    page.on("console", lambda m: console.append(m.text))
    open_notebook(page, lab, name)
    mime = "application/vnd.ipyagent.entries+json"

    def roles():
        meta = page.evaluate("(p) => window.__ipa.meta(p)", name) or {}
        entries = ((meta.get("sessions") or {}).get("default") or {}).get("entries") or []
        roles = [e["message"]["role"] for e in entries if e.get("type") == "message"]
        return [r for r in roles if r != "system"]  # the recorded system prompt comes first

    run_cell(page, name, 0)
    server.enqueue_text("Hello from the model.")
    out = run_cell(page, name, 1)
    assert not [o for o in out if o.get("output_type") == "error"], out
    page.wait_for_function(
        f"() => ((window.__ipa.meta({json.dumps(name)}) || {{}}).sessions || {{}}).default",
        timeout=90_000,
    )
    assert roles() == ["user", "assistant"]
    assert not [o for o in out if mime in (o.get("data") or {})], "a journal although the bridge is there"
    save_notebook(page, name)
    first = _saved_meta(path, _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)))
    assert first["active"] == "default"

    # a second tab of the running kernel: the bridge says hello again (a new comm)
    page2 = context.new_page()
    page2.on("console", lambda m: console.append(m.text))
    open_notebook(page2, lab, name, reset=False)
    page2.wait_for_function(  # the kernel's new hello comm reached this tab
        f"() => {{ const k = window.__ipa.panel({json.dumps(name)}).sessionContext.session.kernel;"
        " return [...k._comms.values()].some(c => c.targetName === 'ipyagent'); }",
        timeout=90_000,
    )
    page2.close()

    page.evaluate("(p) => window.__ipa.panel(p).sessionContext.restartKernel()", name)
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=60_000)
    run_cell(page, name, 0)
    server.enqueue_text("Second answer.")
    out = run_cell(page, name, 2)
    assert not [o for o in out if o.get("output_type") == "error"], out
    page.wait_for_function(
        f"() => window.__ipa.meta({json.dumps(name)}).sessions.default.entries"
        ".filter(e => e.type === 'message' && e.message.role !== 'system').length >= 4",
        timeout=90_000,
    )
    # the same prompt after the restart: no second system message
    assert roles() == ["user", "assistant", "user", "assistant"]
    # the model saw the conversation from before the restart
    sent = json.dumps(server.requests[-1].body)
    assert "Say hello." in sent and "Hello from the model." in sent
    save_notebook(page, name)
    final = _saved_meta(path, _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)))
    assert _ids(final)[: len(_ids(first))] == _ids(first)
    cells = json.loads(path.read_text())["cells"]
    assert not [o for c in cells for o in c.get("outputs", []) if mime in (o.get("data") or {})]
    page.screenshot(path=str(ARTIFACTS / "agent-end-to-end.png"))
    lab.shutdown_kernels()
    assert not [line for line in console if "Comm not found" in line], console


def test_journal_outputs_lifted_on_open(jupyterlab, context):
    lab = jupyterlab
    name = "journal.ipynb"
    path = lab.root / name
    mime = "application/vnd.ipyagent.entries+json"

    def journal(entries, leaf):
        return nbformat.v4.new_output(
            "display_data",
            data={
                mime: {"version": 1, "session": "default", "header": HEADER, "leaf": leaf,
                       "settings": SETTINGS, "entries": entries},
                "text/markdown": f"**ipyagent** · {len(entries)} entries",
            },
            metadata={"ipyagent": {"entry_ids": [e["id"] for e in entries], "final": True}},
        )

    outputs = {
        0: [journal(ENTRIES[:2], ENTRIES[1]["id"])],
        1: [journal(ENTRIES[1:], ENTRIES[-1]["id"])],  # overlaps the first journal by one entry
    }
    write_notebook(path, ["%%agent\nPlot x**2", "%%agent\ncontinue"], outputs=outputs)
    before = json.loads(path.read_text())["cells"]

    page = context.new_page()
    open_notebook(page, lab, name)
    page.wait_for_function(f"() => !!window.__ipa.meta({json.dumps(name)})", timeout=90_000)
    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    assert _ids(meta) == ALL_IDS
    assert meta["sessions"]["default"]["leaf"] == ALL_IDS[-1]
    assert meta["active"] == "default"
    page.screenshot(path=str(ARTIFACTS / "journal-lifted.png"))

    save_notebook(page, name)
    saved = _saved_meta(path, ALL_IDS)
    assert saved["sessions"]["default"]["entries"] == ENTRIES
    after = json.loads(path.read_text())["cells"]
    assert [c["outputs"] for c in after] == [c["outputs"] for c in before]  # outputs untouched
    lab.shutdown_kernels()


def test_notebook7(notebook7, context):
    """The same prebuilt extension works in Jupyter Notebook 7 (only INotebookTracker is used)."""
    srv = notebook7
    name = "n7.ipynb"
    path = srv.root / name
    write_notebook(path, CELLS)
    page = context.new_page()
    open_notebook(page, srv, name, url=f"/notebooks/{name}")
    run_cell(page, name, 0)
    run_cell(page, name, 3)
    state = _state(page, name, until=lambda s: s["connected"] and not s["unacked"])
    assert state["connected"] is True and state["unacked"] == {}, state
    assert state["hello_ack"]["frontend"] == "notebook"
    assert _ids(page.evaluate("(p) => window.__ipa.meta(p)", name)) == ALL_IDS
    save_notebook(page, name)
    _saved_meta(path, ALL_IDS)
    out = page.evaluate("([p, i]) => window.__ipa.restartThenRun(p, i)", [name, 4])
    assert _ids(json.loads(output_line(out, "PUSH"))) == ALL_IDS
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "notebook7.png"))
    srv.shutdown_kernels()


def test_status_follows_the_notebook_path_after_a_rename(jupyterlab, context):
    """JupyterLab names a new notebook on its first save (a rename of Untitled.ipynb): the kernel
    keeps running, and `%agent status` names the notebook by its new path (issue 28, item 9)."""
    lab = jupyterlab
    name, renamed = "Untitled3.ipynb", "named-on-first-save.ipynb"
    write_notebook(lab.root / name, ["%load_ext ipyagent", "%agent status"])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    before = outputs_text(run_cell(page, name, 1))
    assert "notebook path:" in before and name in before, before
    # what the first save's "Rename file" dialog does: the contents API renames the file
    page.evaluate("([a, b]) => window.jupyterapp.serviceManager.contents.rename(a, b)", [name, renamed])
    page.wait_for_function(f"() => window.__ipa.ready({json.dumps(renamed)})", timeout=90_000)
    after = outputs_text(run_cell(page, renamed, 1))
    assert f"notebook path: {renamed}" in after and name not in after, after
    lab.shutdown_kernels()
