"""The labextension's pure metadata logic (extension/frontend/src/store.ts), run with Node on the
compiled module: idempotent updates, the journal rule, and the push code that Python executes —
checked with hostile strings (''' , trailing backslashes, quotes, control and non-BMP characters).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.layout_vectors import check, reading, vectors
from support.shell import fresh_inbox, start_ipython

STORE_JS = Path(__file__).resolve().parents[2] / "extension" / "frontend" / "lib" / "store.js"


def node(script: str, payload) -> object:
    if shutil.which("node") is None:
        pytest.fail("node is needed to test the labextension's store (it also builds it)", pytrace=False)
    if not STORE_JS.exists():
        pytest.fail(f"{STORE_JS} is missing: pip install -e . (or jlpm build:prod in extension/frontend)",
                    pytrace=False)
    # lib/ is tsc output with ES module syntax: import it from an inline module
    wrapper = (
        f"import * as S from {json.dumps(STORE_JS.as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
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


def test_apply_update_is_idempotent_by_id():
    msg = {"type": "entries", "seq": 1, "session": "s", "leaf": "00000002", "active": True,
           "header": {"type": "session", "id": "h"}, "settings": {"model": "m"},
           "entries": [e(1), e(2, "00000001"), e(1), {"no": "id"}]}
    out = node(
        "const u = S.updateFromMessage(input);"
        "const a = S.applyUpdate(undefined, u);"
        "const b = S.applyUpdate(a.metadata, u);"
        "return [a, b];",
        msg,
    )
    a, b = out
    assert a["stored"] == 2 and a["changed"] is True and a["ids"] == ["00000001", "00000002", "00000001"]
    meta = a["metadata"]
    assert meta["version"] == 1 and meta["active"] == "s"
    assert [x["id"] for x in meta["sessions"]["s"]["entries"]] == ["00000001", "00000002"]
    assert meta["sessions"]["s"]["header"] == {"type": "session", "id": "h"}
    assert b["stored"] == 0 and b["changed"] is False and b["metadata"] == meta


def test_journal_never_moves_the_leaf_back():
    stored = {"version": 1, "active": "default", "sessions": {"default": {
        "leaf": "00000003", "entries": [e(1), e(2), e(3)]}}}
    old_journal = {"version": 1, "session": "default", "leaf": "00000001", "entries": [e(1)]}
    new_journal = {"version": 1, "session": "default", "leaf": "00000004", "entries": [e(3), e(4)]}
    out = node(
        "const [m, o, n] = input;"
        "const a = S.applyUpdate(m, S.updateFromJournal(o), true);"
        "const b = S.applyUpdate(a.metadata, S.updateFromJournal(n), true);"
        "return [a, b];",
        [stored, old_journal, new_journal],
    )
    a, b = out
    assert a["changed"] is False and a["metadata"]["sessions"]["default"]["leaf"] == "00000003"
    assert b["stored"] == 1 and b["metadata"]["sessions"]["default"]["leaf"] == "00000004"


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


def test_chunked_store_writes_only_new_chunks_and_reads_back():
    """Layout 3 over a plain object: a layout-1 store is converted on the first write; then each
    update writes one new chunk (carrying the leaf) and leaves the index alone; the store reads
    back as layout 1 with the newest leaf."""
    old = {"version": 1, "active": "s", "sessions": {"s": {"header": {"id": "h"}, "leaf": "00000002",
                                                          "entries": [e(1), e(2)]}}}
    out = node(
        "const md = {ipyagent: input}; const writes = [];"
        "const access = {keys: () => Object.keys(md), get: k => md[k] === undefined ? undefined :"
        " JSON.parse(JSON.stringify(md[k])), set: (k, v) => { writes.push(k); md[k] = JSON.parse(JSON.stringify(v)); }};"
        "const st = new S.ChunkedStore(access);"
        "const a = st.apply({session: 's', entries: [input.sessions.s.entries[1]], leaf: '00000002'});"
        "const w1 = writes.splice(0);"
        f"const b = st.apply({{session: 's', entries: [{json.dumps(e(3, '00000002'))}], leaf: '00000003'}});"
        "const w2 = writes.splice(0);"
        f"const c = st.apply({{session: 's', entries: [{json.dumps(e(3, '00000002'))}], leaf: '00000003'}});"
        "const w3 = writes.splice(0);"
        "const d = st.apply({session: 's', entries: [], leaf: '00000001'});"
        "const w4 = writes.splice(0);"
        "return {a, b, c, d, w1, w2, w3, w4, md, view: st.assemble(), fresh: new S.ChunkedStore(access).assemble()};",
        old,
    )
    assert out["w1"] == ["ipyagent/000000", "ipyagent"]  # the conversion
    assert out["a"]["stored"] == 0 and out["md"]["ipyagent"]["version"] == 3
    # a chunk is its entries' JSON text (ASCII) with their ids beside it
    chunk = out["md"]["ipyagent/000001"]
    assert chunk["ids"] == ["00000003"] and isinstance(chunk["entries"], str) and chunk["entries"].isascii()
    assert [x["id"] for x in json.loads(chunk["entries"])] == ["00000003"] and chunk["leaf"] == "00000003"
    assert out["w2"] == ["ipyagent/000001"] and out["b"]["stored"] == 1  # one chunk, index untouched
    assert out["w3"] == [] and out["c"]["stored"] == 0 and out["c"]["ids"] == ["00000003"]
    assert out["w4"] == ["ipyagent"]  # a leaf moved without entries: the index
    for view in (out["view"], out["fresh"]):
        sess = view["sessions"]["s"]
        assert [x["id"] for x in sess["entries"]] == ["00000001", "00000002", "00000003"]
        assert sess["leaf"] == "00000001" and sess["header"] == {"id": "h"}


def test_chunked_store_reads_layout_2_and_writes_text_chunks_after_it():
    """A layout-2 notebook (chunks holding lists) keeps its chunks; new chunks are text, the index
    says version 3, and the store reads both kinds back in order. Text is ASCII: an entry with
    non-ASCII text is written with escapes and reads back the same."""
    entries = [e(1), e(2, "00000001")]
    md = {"ipyagent": {"version": 2, "active": "s", "next_chunk": 1,
                       "sessions": {"s": {"header": {"id": "h"}, "leaf": "00000002"}}},
          "ipyagent/000000": {"session": "s", "entries": entries}}
    third = {**e(3, "00000002"), "note": "café ☕ 日本"}
    out = node(
        "const md = input; const writes = [];"
        "const access = {keys: () => Object.keys(md), get: k => md[k] === undefined ? undefined :"
        " JSON.parse(JSON.stringify(md[k])), set: (k, v) => { writes.push(k); md[k] = JSON.parse(JSON.stringify(v)); }};"
        "const st = new S.ChunkedStore(access);"
        "const again = st.apply({session: 's', entries: [input['ipyagent/000000'].entries[1]], leaf: '00000002'});"
        f"const b = st.apply({{session: 's', entries: [{json.dumps(third)}], leaf: '00000003'}});"
        "return {again, b, writes, md, view: new S.ChunkedStore(access).assemble()};",
        md,
    )
    assert out["again"]["stored"] == 0  # held in the list chunk
    assert out["b"]["stored"] == 1 and out["md"]["ipyagent"]["version"] == 3
    assert out["md"]["ipyagent/000000"] == md["ipyagent/000000"]  # never rewritten
    text = out["md"]["ipyagent/000001"]["entries"]
    assert text.isascii() and json.loads(text) == [third]
    sess = out["view"]["sessions"]["s"]
    assert [x["id"] for x in sess["entries"]] == ["00000001", "00000002", "00000003"]
    assert sess["entries"][2] == third and sess["leaf"] == "00000003"


# ---- the shared layout vectors (tests/store/vectors; the Python store reads the same ones) ------

VECTORS = vectors()
# over each vector's metadata: the store read as layout 1, then one new entry of a new session
# stored (which keys it wrote, what it acked), and what the store reported
READ_VECTORS = """
const out = {};
for (const [name, md] of Object.entries(input)) try {
  const writes = [];
  const reports = [];
  const access = {keys: () => Object.keys(md), get: k => md[k] === undefined ? undefined :
    JSON.parse(JSON.stringify(md[k])), set: (k, v) => { writes.push(k); md[k] = JSON.parse(JSON.stringify(v)); }};
  const view = new S.ChunkedStore(access, t => reports.push(t)).assemble();
  const probe = {type: 'message', id: 'feedf00d', parentId: null, timestamp: 't', message: {role: 'user', content: 'x'}};
  const stored = new S.ChunkedStore(access, t => reports.push(t)).apply(
    {session: 'probe', entries: [probe], leaf: 'feedf00d'});
  out[name] = {view: JSON.parse(JSON.stringify(view)), stored, writes, reports,
               polluted: Object.prototype.leaf !== undefined || Object.prototype.entries !== undefined};
} catch (e) {
  out[name] = {error: String(e && e.stack || e)};
}
return out;
"""


@pytest.fixture(scope="module")
def ts_readings():
    return node(READ_VECTORS, {name: v["metadata"] for name, v in VECTORS.items()})


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_the_labextension_store_reads_the_vector(ts_readings, name):
    """The same expectation as the Python store's (tests/store/test_layout_vectors.py); and its
    next chunk goes under the key the vector says, never after a stray key (nowhere when the
    numbers are used up: then nothing is acked)."""
    vector, got = VECTORS[name], ts_readings[name]
    assert "error" not in got, got.get("error")
    check(vector, reading(got["view"]))
    assert not got["polluted"]
    want = vector["expect"]
    if want["layout"] == 1:
        return  # its first write converts it (the conversion's own tests)
    if want["next_key"] is None:
        assert got["writes"] == [] and got["stored"]["ids"] == []
        assert any("used up" in r for r in got["reports"])
    else:
        assert got["stored"]["ids"] == ["feedf00d"] and got["stored"]["stored"] == 1
        assert want["next_key"] in got["writes"] and set(got["writes"]) <= {want["next_key"], "ipyagent"}
    strays = [i for i in want["set_aside"] if i["reason"].startswith("not a chunk key")]
    assert any(f"{len(strays)} key(s)" in r for r in got["reports"]) == bool(strays)


ACCESS = (
    "const writes = []; let indexReads = 0;"
    "const access = {keys: () => Object.keys(md), get: k => { if (k === 'ipyagent') indexReads++;"
    " return md[k] === undefined ? undefined : JSON.parse(JSON.stringify(md[k])); },"
    " set: (k, v) => { writes.push(k); md[k] = JSON.parse(JSON.stringify(v)); }};"
)


def test_a_layout_1_store_moves_into_layout_3_a_chunk_a_step_and_the_index_last():
    """250 entries in layout 1: the first step plans, each next step writes one chunk (the index
    still layout 1 meanwhile, so a reader sees every entry), the last writes the index; the
    store reads back every entry once, and a turn after it writes one new chunk."""
    old = {"version": 1, "active": "s", "sessions": {"s": {"header": {"id": "h"}, "leaf": "000000f9",
                                                          "entries": [e(i) for i in range(250)]}}}
    out = node(
        "const md = {ipyagent: input};" + ACCESS +
        "const st = new S.ChunkedStore(access); const steps = [];"
        "const pushed = st.assemble();"  # the push's read, which the move then plans from
        "for (let r = 'more'; r === 'more';) { r = st.migrateStep();"
        " steps.push([r, writes.splice(0), md.ipyagent.version]); }"
        "const reads = indexReads;"
        "const again = st.migrateStep();"
        f"const turn = st.apply({{session: 's', entries: [{json.dumps(e(250))}], leaf: '000000fa'}});"
        "return {steps, again, moved: st.moved, turn, writes, reads, pushed: pushed.sessions.s.entries.length,"
        " view: new S.ChunkedStore(access).assemble()};",
        old,
    )
    steps = out["steps"]
    assert steps[0] == ["more", [], 1]  # the plan
    assert [s[1] for s in steps[1:4]] == [["ipyagent/000000"], ["ipyagent/000001"], ["ipyagent/000002"]]
    assert all(s[0] == "more" and s[2] == 1 for s in steps[1:4])  # still layout 1 for every reader
    assert steps[4] == ["done", ["ipyagent"], 3] and len(steps) == 5
    assert out["again"] == "none" and out["moved"] == {"entries": 250, "chunks": 3}
    assert out["pushed"] == 250 and out["reads"] == 1  # the long value read once, for the push and the move
    assert out["turn"]["stored"] == 1 and out["writes"] == ["ipyagent/000003"]
    ids = [x["id"] for x in out["view"]["sessions"]["s"]["entries"]]
    assert ids == [f"{i:08x}" for i in range(251)]


def test_a_write_during_a_move_finishes_it_without_writing_an_entry_twice():
    old = {"version": 1, "active": "s", "sessions": {"s": {"header": {"id": "h"}, "leaf": "000000f9",
                                                          "entries": [e(i) for i in range(250)]}}}
    out = node(
        "const md = {ipyagent: input};" + ACCESS +
        "const st = new S.ChunkedStore(access);"
        "st.migrateStep(); st.migrateStep(); writes.splice(0);"  # planned, one chunk written
        f"const turn = st.apply({{session: 's', entries: [{json.dumps(e(250))}], leaf: '000000fa'}});"
        "return {turn, writes, after: st.migrateStep(), view: new S.ChunkedStore(access).assemble(),"
        " chunks: Object.keys(md).filter(k => k.startsWith('ipyagent/')).map(k => md[k].ids.length)};",
        old,
    )
    assert out["turn"]["stored"] == 1 and out["after"] == "none"
    assert out["writes"] == ["ipyagent/000001", "ipyagent/000002", "ipyagent/000003", "ipyagent"]
    assert sum(out["chunks"]) == 251  # each entry in one chunk
    ids = [x["id"] for x in out["view"]["sessions"]["s"]["entries"]]
    assert ids == [f"{i:08x}" for i in range(251)]
