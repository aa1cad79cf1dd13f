"""The approval question in a real JupyterLab: the whole call is on screen (wrapped, nothing cut
or scrolled away, hidden spaces marked) above a short y/N input, "n" runs nothing, and the saved
outputs record each decision in one line before the call's result."""

from __future__ import annotations

import json

from support.lab_pages import ARTIFACTS, open_notebook, run_cell, write_notebook

HIDDEN = "echo SHOWN" + " " * 50 + "; touch pwned.txt"
LONG_LINE = "total = " + " + ".join(f"value_{i}" for i in range(60))


def test_the_whole_call_is_shown_before_the_question(jupyterlab, context):
    lab = jupyterlab
    name = "approval.ipynb"
    write_notebook(lab.root / name, ["%load_ext ipyagent", "%%agent\nTidy up."])
    page = context.new_page()
    open_notebook(page, lab, name)
    run_cell(page, name, 0)
    lab.fake.enqueue_tool_calls([("bash", {"command": HIDDEN}), ("python", {"code": f"{LONG_LINE}\nprint(total)"})])
    lab.fake.enqueue_text("Nothing was run.")
    # run the agent cell without waiting for it: it stops at the first question
    page.evaluate("([p, i]) => { const w = window.__ipa.panel(p); window.jupyterapp.shell.activateById(w.id);"
                  " w.content.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }",
                  [name, 1])
    cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
    questions = [("bash", "  command: echo SHOWN«50 spaces»; touch pwned.txt"),
                 ("python", "  code:\n    │ total = value_0 + value_1")]
    for tool, expected in questions:
        # the question for this call, and an input box waiting for the answer (the question comes on
        # IOPub, the input request on the stdin channel: wait for both, their order is not fixed)
        page.wait_for_function(
            "([tool]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[1];"
            " const p = c.querySelector('.jp-Stdin-prompt');"
            " const shown = [...c.querySelectorAll('.jp-RenderedText')].map(e => e.innerText).join('\\n');"
            " return p && p.innerText.includes('Allow `' + tool + '`') && c.querySelector('.jp-Stdin-input')"
            " && shown.includes('approve this `' + tool + '` call?'); }",
            arg=[tool], timeout=90_000)
        assert cell.locator(".jp-Stdin-prompt").inner_text().strip() == f"Allow `{tool}` as shown above? [y/N]"
        shown = "\n".join(cell.locator(".jp-OutputArea-output").all_inner_texts())
        assert f"ipyagent: approve this `{tool}` call?" in shown and expected in shown, shown
        # nothing of the question is cut off or scrolled out of sight
        overflow = cell.locator(".jp-RenderedText").evaluate_all(
            "els => els.filter(e => e.innerText.includes('approve this')).map(e => e.scrollWidth - e.clientWidth)")
        assert overflow and max(overflow) <= 0, overflow
        if tool == "python":
            assert "↪" in shown and "value_59" in shown  # the long line, wrapped onto the next row
            ARTIFACTS.mkdir(exist_ok=True)
            cell.screenshot(path=str(ARTIFACTS / "approval-question.png"))
        answer = cell.locator(".jp-Stdin-input")
        answer.fill("n")
        answer.press("Enter")
    page.wait_for_function(
        "(p) => { const s = (window.__ipa.meta(p) || {}).sessions; return s && s.default.entries"
        ".filter(e => e.type === 'message' && e.message.role === 'assistant').length >= 2; }",
        arg=name, timeout=90_000)
    meta = page.evaluate("(p) => window.__ipa.meta(p)", name)
    results = [e["message"] for e in meta["sessions"]["default"]["entries"]
               if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert [r["isError"] for r in results] == [True, True]
    assert all("declined" in json.dumps(r) for r in results)
    assert not (lab.root / "pwned.txt").exists()

    # the saved record reads question, answer, result: each decision in one line before its call's
    # block (JupyterLab wrote the prompt and the typed "n" in between), no question left below
    outputs_js = "([p, i]) => window.__ipa.panel(p).content.widgets[i].model.outputs.toJSON()"
    page.wait_for_function(f"(a) => JSON.stringify(({outputs_js})(a)).includes('Nothing was run.')",
                           arg=[name, 1], timeout=90_000)
    outputs = page.evaluate(outputs_js, [name, 1])
    plain = [(o.get("data") or {}).get("text/plain", "") if "data" in o else "".join(o.get("text", ""))
             for o in outputs]
    plain = ["".join(t) if isinstance(t, list) else t for t in plain]
    for tool in ("bash", "python"):
        decision = [i for i, t in enumerate(plain) if t.startswith(f"declined: {tool} (")]
        answer = [i for i, o in enumerate(outputs) if o.get("name") == "stdin" and f"Allow `{tool}`" in plain[i]]
        result = [i for i, t in enumerate(plain) if t.startswith(f"✗ {tool}(")]
        assert len(decision) == len(answer) == len(result) == 1, plain
        assert decision[0] < answer[0] < result[0], plain
        assert "<details class='ipyagent-approval'>" in outputs[decision[0]]["data"]["text/html"]
    last = max(i for i, t in enumerate(plain) if t.startswith("✗ python("))
    assert not any("approve this" in t for t in plain[last:]), plain
    lab.shutdown_kernels()
