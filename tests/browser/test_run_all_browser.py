"""Run All and kernel deaths in a real JupyterLab (issue 21, items 1 and 5).

- Restart & Run All of a notebook with three ``%%agent`` cells and of the quick start: the first
  ``%%agent`` cell already writes through the bridge (its handshake and acks are answered on the
  comm's subshell while the main shell works through the queued cells), so no cell has a journal
  output, every entry the kernel holds is in the page's metadata, and ``%agent status`` says the
  bridge is connected.
- A kernel SIGKILLed during the 6th tool round: the five rounds before are in the saved notebook.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ipyagent.store.chunks import assemble
from support.lab_pages import ARTIFACTS, open_notebook, run_cell, save_notebook, saved_notebook, write_notebook
from support.outputs import outputs_text

MIME = "application/vnd.ipyagent.entries+json"
ROOT = Path(__file__).resolve().parents[2]
SETUP = '%load_ext ipyagent\n%config Agent.tool_approval = "auto"'

RUN_ALL = """
window.__ipa.runAll = {
  done(path) {
    // every code cell ran (has an execution count) and the kernel is idle again
    const p = window.__ipa.panel(path);
    const k = p && p.sessionContext.session && p.sessionContext.session.kernel;
    if (!p || !k || k.status !== 'idle') return false;
    return p.content.widgets.every(w => w.model.type !== 'code' || w.model.executionCount !== null);
  },
  outputs(path) {
    const p = window.__ipa.panel(path);
    return p.content.widgets.map(w => (w.model.type === 'code' ? w.model.outputs.toJSON() : []));
  },
  async kernelEntries(path) {
    // the entry ids of every session the kernel holds, asked with a silent request
    const k = window.__ipa.panel(path).sessionContext.session.kernel;
    const code = 'import json as _j\\nfrom ipyagent.kernel.extension import get_runtime as _g\\n' +
      "print(_j.dumps({n: [e['id'] for e in s.session.entries] for n, s in _g(get_ipython()).slots.items()}))";
    const future = k.requestExecute({ code, silent: false, store_history: false });
    let text = '';
    future.onIOPub = msg => { if (msg.header.msg_type === 'stream') text += msg.content.text; };
    await future.done;
    return JSON.parse(text);
  }
};
"""


def _restart_and_run_all(page, name: str) -> None:
    page.evaluate(
        "(path) => { const p = window.__ipa.panel(path); window.jupyterapp.shell.activateById(p.id);"
        " p.content.widgets.forEach(w => { if (w.model.type === 'code') w.model.executionCount = null; }); }",
        name,
    )
    page.evaluate("() => { void window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click(timeout=90_000)  # "Restart Kernel?"


def _journals(outputs: list[list[dict]]) -> list[int]:
    return [i for i, cell in enumerate(outputs) for o in cell if MIME in (o.get("data") or {})]


def _run_all_and_check(page, lab, name: str) -> list[list[dict]]:
    open_notebook(page, lab, name)
    page.evaluate(RUN_ALL)
    _restart_and_run_all(page, name)
    page.wait_for_function(f"() => window.__ipa.runAll.done({json.dumps(name)})", timeout=240_000)
    outputs = page.evaluate("(p) => window.__ipa.runAll.outputs(p)", name)
    assert _journals(outputs) == [], "journal outputs although the bridge is installed"
    kernel = page.evaluate("(p) => window.__ipa.runAll.kernelEntries(p)", name)
    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    assert kernel and set(kernel) <= set(meta["sessions"])
    for session, ids in kernel.items():
        stored = {e["id"] for e in meta["sessions"][session]["entries"]}
        assert set(ids) <= stored, f"{session}: {len(set(ids) - stored)} entries the metadata lacks"
    return outputs


def test_restart_and_run_all_of_three_agent_cells_writes_through_the_bridge(jupyterlab, context):
    lab = jupyterlab
    name = "three-cells.ipynb"
    write_notebook(lab.root / name, [SETUP, "%%agent\nOne.", "%%agent\nTwo.", "%%agent\nThree.",
                                      "%agent status"])
    for text in ("First answer.", "Second answer.", "Third answer."):
        lab.fake.enqueue_text(text)
    page = context.new_page()
    try:
        outputs = _run_all_and_check(page, lab, name)
        meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
        texts = [json.dumps(e["message"]["content"]) for e in meta["sessions"]["default"]["entries"]
                 if e["type"] == "message" and e["message"]["role"] == "assistant"]
        assert [t for t in texts if "answer." in t] and len(texts) == 3
        status = outputs_text(outputs[4])
        assert "bridge connected" in status and "no frontend acknowledged" not in status, status
        page.screenshot(path=str(ARTIFACTS / "run-all-three-cells.png"))
    finally:
        lab.shutdown_kernels()


def test_restart_and_run_all_of_the_quick_start(jupyterlab, context):
    lab = jupyterlab
    name = "quickstart.ipynb"
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", lab.root / name)
    lab.fake.policy = lambda body: "An answer from the loopback model."
    page = context.new_page()
    try:
        outputs = _run_all_and_check(page, lab, name)
        status = [outputs_text(cell) for cell in outputs if "Context window" in outputs_text(cell) or "bridge" in outputs_text(cell)]
        assert any("bridge connected" in s for s in status), status
        assert not any("no frontend acknowledged" in s for s in status), status
    finally:
        lab.fake.policy = None
        lab.shutdown_kernels()


def _entries(nb: dict) -> list[dict]:
    return (assemble(nb.get("metadata", {})) or {}).get("sessions", {}).get("default", {}).get("entries", [])


def _tool_results(entries: list[dict]) -> list[str]:
    return [b["text"] for e in entries if e.get("type") == "message" and e["message"]["role"] == "toolResult"
            for b in e["message"]["content"] if b.get("type") == "text"]


KILL = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"


def test_a_kernel_killed_in_the_sixth_tool_round_leaves_the_five_before_in_the_saved_notebook(
        jupyterlab, context):
    lab = jupyterlab
    name = "killed.ipynb"
    path = lab.root / name
    write_notebook(path, [SETUP, "%%agent\nRun the six rounds."])
    for i in range(1, 6):
        lab.fake.enqueue_tool_call("python", {"code": f"print('round {i}', {i} * {i})"}, text=f"Round {i}.")
    lab.fake.enqueue_tool_call("python", {"code": KILL}, text="The last round.")
    page = context.new_page()
    try:
        open_notebook(page, lab, name)
        run_cell(page, name, 0)
        page.evaluate(
            "(p) => { const sc = window.__ipa.panel(p).sessionContext; window.__ipa.statuses = [];"
            " sc.statusChanged.connect((_, s) => window.__ipa.statuses.push(s)); }", name)
        page.evaluate("([p, i]) => { void window.__ipa.run(p, i); }", [name, 1])
        # the kernel dies; JupyterLab restarts it (a dialog says so) and the bridge pushes the metadata
        page.wait_for_function(
            "() => window.__ipa.statuses.some(s => ['restarting', 'autorestarting', 'dead'].includes(s))",
            timeout=120_000)
        dialog = page.locator(".jp-Dialog .jp-mod-accept")  # "The kernel … appears to have died"
        dialog.click(timeout=90_000)
        page.wait_for_function(f"() => window.__ipa.ready({json.dumps(name)})", timeout=90_000)
        save_notebook(page, name)
        saved = saved_notebook(path, lambda nb: len(_tool_results(_entries(nb))) >= 5, 120, what="five tool results")
        entries = _entries(saved)
        results = _tool_results(entries)
        assert [r.split()[:3] for r in results] == [["round", str(i), str(i * i)] for i in range(1, 6)], results
        roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
        assert roles[:12] == ["system", "user"] + ["assistant", "toolResult"] * 5, roles
        assert lab.fake.pending() == 0  # the sixth call was answered: the kernel died running it
    finally:
        lab.shutdown_kernels()
