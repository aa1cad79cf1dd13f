"""The labextension's push (extension/frontend/src/push.ts), run with Node on the compiled module,
and the code it makes executed by Python: hostile strings (''' , trailing backslashes, quotes,
control and non-BMP characters) and pushes cut into parts arrive whole. (The rest of the
labextension's pure logic, the store and its layout vectors included, is tested with jest in
extension/frontend/src/__tests__: `jlpm test`.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.shell import fresh_inbox, start_ipython

PUSH_JS = Path(__file__).resolve().parents[2] / "extension" / "frontend" / "lib" / "push.js"

# tsc writes the modules' imports without an extension (`./json`), as bundlers and JupyterLab
# take them; plain Node wants one, so this resolve hook adds `.js` to a relative import Node
# cannot find (module.register, Node >= 20.6).
RESOLVE_JS = (
    "export async function resolve(specifier, context, next) {"
    " try { return await next(specifier, context); }"
    " catch (error) { if (specifier.startsWith('.')) return next(specifier + '.js', context); throw error; } }"
)


def node(script: str, payload) -> object:
    if shutil.which("node") is None:
        pytest.fail("node is needed to test the labextension's push (it also builds it)", pytrace=False)
    if not PUSH_JS.exists():
        pytest.fail(f"{PUSH_JS} is missing: pip install -e . (or jlpm build:prod in extension/frontend)",
                    pytrace=False)
    # lib/ is tsc output with ES module syntax: import it from an inline module
    wrapper = (
        "import { register } from 'node:module';\n"
        "import { readFileSync } from 'node:fs';\n"
        f"register('data:text/javascript,' + encodeURIComponent({json.dumps(RESOLVE_JS)}));\n"
        f"const S = await import({json.dumps(PUSH_JS.as_uri())});\n"
        "const input = JSON.parse(readFileSync(0, 'utf8'));\n"
        f"const out = (() => {{ {script} }})();\n"
        "process.stdout.write(JSON.stringify(out));\n"
    )
    res = subprocess.run(
        ["node", "--input-type=module", "-e", wrapper],
        input=json.dumps(payload), capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def e(i, parent=None, **extra):
    return {"type": "message", "id": f"{i:08x}", "parentId": parent, "timestamp": "t",
            "message": {"role": "user", "content": f"m{i}"}, **extra}


@pytest.mark.parametrize("text", [
    "'''", "a''' b", "ends with backslash \\", "\\", "'", "\"'\"", "''''''", "\\'''\\",
    "line\nbreak\r\ttab \u2028 \u2029", "emoji 😀 and \U0010ffff", "nul \x00 char", "r'''x'''",
])
def test_push_code_round_trips_through_python(text):
    meta = {"version": 1, "sessions": {"default": {"leaf": None, "entries": [e(1, None, note=text)]}},
            "k'''": text}
    code = node("return S.pushCode(input, 'jupyterlab');", meta)
    shell = start_ipython()
    inbox = fresh_inbox(shell)
    shell.run_cell(code, silent=True)  # as the kernel runs the silent request
    assert inbox.errors() == []
    assert inbox.take() == meta


@pytest.mark.parametrize("part", [1, 2, 3, 7, 64])
def test_push_in_parts_round_trips_through_python(part):
    """A push cut into many parts (here tiny ones, so every cut lands somewhere awkward: inside a
    `\\uXXXX` escape, between backslashes) is taken whole once its last part arrives."""
    text = "\\\\\\ ''' \\ 😀 é \u2028 \\'''\\"
    meta = {"version": 1, "sessions": {"default": {"leaf": None, "entries": [e(i, None, note=text * i)
                                                                           for i in range(1, 4)]}}}
    codes = node(f"return S.pushCodes(input, 'jupyterlab', 'p1', {part});", meta)
    assert len(codes) > 1
    assert all(c.isascii() for c in codes)
    shell = start_ipython()
    inbox = fresh_inbox(shell)
    for i, code in enumerate(codes):
        assert inbox.peek() is None, f"taken after part {i} of {len(codes)}"
        shell.run_cell(code, silent=True)
    assert inbox.errors() == []
    assert inbox.take() == meta


def test_an_unfinished_push_is_reported_not_taken():
    meta = {"version": 1, "sessions": {"default": {"leaf": None, "entries": [e(1, None)]}}}
    first = node("return S.pushCodes(input, 'jupyterlab', 'old', 16);", meta)
    second = node("return S.pushCodes(input, 'jupyterlab', 'new', 16);", meta)
    shell = start_ipython()
    inbox = fresh_inbox(shell)
    shell.run_cell(first[0], silent=True)
    for code in second:
        shell.run_cell(code, silent=True)
    assert inbox.take() == meta
    errors = inbox.errors()
    assert len(errors) == 1 and "incomplete" in errors[0], errors
