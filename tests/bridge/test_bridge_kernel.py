"""The kernel end of the ipyagent comm, against a real ipykernel through jupyter_client.

The test plays the frontend: it watches iopub for the kernel's ``comm_open`` (target
``ipyagent``) and answers on the shell channel with ``comm_msg`` — exactly what the labextension
does (docs/protocol.md). No mocks.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

import ipyagent  # noqa: E402
from ipyagent.bridge import comm as bridge_mod  # noqa: E402
from ipyagent.bridge.push import PushInbox  # noqa: E402
from kernel_support import ipc_kernel_manager  # noqa: E402

PKG_PARENT = str(Path(ipyagent.__file__).resolve().parent.parent)


def J(x) -> str:
    """A Python expression that rebuilds ``x`` (JSON) inside the kernel."""
    return f"__import__('json').loads({json.dumps(x)!r})"


def _entry(i: int, parent: str | None = None) -> dict:
    return {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": f"prompt {i}", "timestamp": 0},
    }


class FakeFrontend:
    """A kernel client that answers the ipyagent comm like the labextension would."""

    def __init__(self, km, kc):
        self.km = km
        self.kc = kc
        self.comms: dict[str, dict] = {}  # comm_id -> {"open": data, "msgs": [...]}
        self.closed: list[str] = []
        self.metadata: dict = {"version": 1, "sessions": {}}

    # ---- plumbing
    def execute(self, code: str, timeout: float = 120) -> dict:
        """Run code; collect its stdout and the iopub comm traffic seen meanwhile."""
        msg_id = self.kc.execute(code)
        out = []
        deadline = time.time() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.time()))
            self._note(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            t = msg["msg_type"]
            if t == "stream":
                out.append(msg["content"]["text"])
            elif t == "error":
                raise AssertionError("\n".join(msg["content"]["traceback"]))
            elif t == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        assert reply["content"]["status"] == "ok", reply["content"]
        return {"stdout": "".join(out)}

    def drain(self, timeout: float = 0.5) -> None:
        end = time.time() + timeout
        while time.time() < end:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            self._note(msg)

    def _note(self, msg: dict) -> None:
        t = msg["msg_type"]
        c = msg["content"]
        if t == "comm_open" and c.get("target_name") == "ipyagent":
            self.comms[c["comm_id"]] = {"open": c["data"], "msgs": []}
        elif t == "comm_msg" and c["comm_id"] in self.comms:
            self.comms[c["comm_id"]]["msgs"].append(c["data"])
        elif t == "comm_close" and c["comm_id"] in self.comms:
            self.closed.append(c["comm_id"])

    def send_comm(self, comm_id: str, data: dict) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def close_comm(self, comm_id: str) -> None:
        msg = self.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
        self.kc.shell_channel.send(msg)

    # ---- frontend behaviour
    def latest_comm(self) -> str:
        assert self.comms, "the kernel opened no ipyagent comm"
        return list(self.comms)[-1]

    def hello_ack(self, comm_id: str) -> None:
        self.send_comm(
            comm_id,
            {"type": "hello_ack", "protocol": 1, "frontend": "test", "path": "/tmp/x.ipynb"},
        )

    def store(self, data: dict) -> dict:
        """Apply an ``entries`` message the way the labextension does; return the ack."""
        sess = self.metadata["sessions"].setdefault(data["session"], {"entries": []})
        have = {e["id"] for e in sess["entries"]}
        stored = 0
        for e in data["entries"]:
            if e["id"] not in have:
                sess["entries"].append(e)
                have.add(e["id"])
                stored += 1
        sess["leaf"] = data["leaf"]
        for k in ("header", "settings"):
            if k in data:
                sess[k] = data[k]
        if data.get("active"):
            self.metadata["active"] = data["session"]
        return {
            "type": "ack",
            "seq": data["seq"],
            "session": data["session"],
            "stored": stored,
            "ids": [e["id"] for e in data["entries"]],
        }


@pytest.fixture
def frontend():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PKG_PARENT, env.get("PYTHONPATH")) if p)
    km, ipc_dir = ipc_kernel_manager()
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        fe = FakeFrontend(km, kc)
        fe.drain(0.2)
        yield fe
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(ipc_dir, ignore_errors=True)


def _print_state(fe: FakeFrontend, expr: str = "") -> dict:
    code = textwrap.dedent(
        f"""
        import json as _j
        print(_j.dumps({{"connected": _b.connected, "seq": _b.seq, "unacked": _b.unacked(),
                         "hello_ack": _b.hello_ack, "extra": {expr or 'None'}}}))
        """
    )
    out = fe.execute(code)["stdout"]
    return json.loads(out.strip().splitlines()[-1])


def test_import_is_light():
    code = "import sys, ipyagent.bridge.comm; print('comm' in sys.modules, 'ipykernel' in sys.modules)"
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": PKG_PARENT},
    ).stdout
    assert out.strip() == "False False"


@pytest.mark.kernel
def test_hello_ack_entries_ack_and_resend(frontend):
    fe = frontend
    fe.execute("from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()")
    cid = fe.latest_comm()
    assert fe.comms[cid]["open"] == {"type": "hello", "protocol": 1}
    assert _print_state(fe)["connected"] is False  # no answer yet

    fe.hello_ack(cid)
    state = _print_state(fe)
    assert state["connected"] is True
    assert state["hello_ack"]["frontend"] == "test"
    assert state["hello_ack"]["path"] == "/tmp/x.ipynb"

    # two entries in one message
    e = [_entry(1), _entry(2, "00000001")]
    fe.execute(
        "_s1 = _b.send_entries('default', %s, leaf='00000002', header={'type':'session','id':'h'},"
        " settings={'model':'fake:m'})" % J(e)
    )
    msgs = fe.comms[cid]["msgs"]
    assert len(msgs) == 1
    m = msgs[0]
    assert m["type"] == "entries" and m["seq"] == 1 and m["session"] == "default"
    assert m["leaf"] == "00000002" and m["active"] is True
    assert m["header"] == {"type": "session", "id": "h"} and m["settings"] == {"model": "fake:m"}
    assert [x["id"] for x in m["entries"]] == ["00000001", "00000002"]

    # the frontend stores them but its ack is lost: the next message carries them again
    fe.store(m)
    e3 = [_entry(3, "00000002")]
    fe.execute("_b.send_entries('default', %s, leaf='00000003')" % J(e3))
    m2 = fe.comms[cid]["msgs"][-1]
    assert m2["seq"] == 2
    assert "header" not in m2 and "settings" not in m2
    assert [x["id"] for x in m2["entries"]] == ["00000001", "00000002", "00000003"]
    ack = fe.store(m2)
    assert ack["stored"] == 1  # idempotent: only the new one is stored
    fe.send_comm(cid, ack)
    state = _print_state(fe, "sorted(_b.document.acked_ids('default'))")
    assert state["unacked"] == {}
    assert state["extra"] == ["00000001", "00000002", "00000003"]

    # acked entries are not sent again; a new one is sent alone
    fe.execute("_b.send_entries('default', %s, leaf='00000004')" % J([_entry(4, "00000003")]))
    m3 = fe.comms[cid]["msgs"][-1]
    assert m3["seq"] == 3
    assert [x["id"] for x in m3["entries"]] == ["00000004"]
    fe.send_comm(cid, fe.store(m3))
    # leaf moves without entries (e.g. %agent checkout)
    fe.execute("_b.send_entries('default', [], leaf='00000002')")
    m4 = fe.comms[cid]["msgs"][-1]
    assert m4["seq"] == 4 and m4["entries"] == [] and m4["leaf"] == "00000002"
    fe.send_comm(cid, fe.store(m4))
    assert _print_state(fe)["unacked"] == {}
    sess = fe.metadata["sessions"]["default"]
    assert [x["id"] for x in sess["entries"]] == ["00000001", "00000002", "00000003", "00000004"]
    assert sess["leaf"] == "00000002" and fe.metadata["active"] == "default"


@pytest.mark.kernel
def test_sessions_are_independent_and_inactive_flag(frontend):
    fe = frontend
    fe.execute("from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()")
    cid = fe.latest_comm()
    fe.hello_ack(cid)
    fe.execute("_b.send_entries('a', %s, leaf='00000001')" % J([_entry(1)]))
    fe.execute("_b.send_entries('b', %s, leaf='00000002', active=False)" % J([_entry(2)]))
    ma, mb = fe.comms[cid]["msgs"][-2:]
    assert (ma["session"], ma["active"]) == ("a", True)
    assert (mb["session"], mb["active"]) == ("b", False)
    fe.send_comm(cid, fe.store(mb))  # only b acked
    state = _print_state(fe)
    assert state["unacked"] == {"a": ["00000001"]}
    # resend_unacked sends a again, only a
    fe.execute("_b.resend_unacked()")
    m = fe.comms[cid]["msgs"][-1]
    assert m["session"] == "a" and [x["id"] for x in m["entries"]] == ["00000001"]


@pytest.mark.kernel
def test_no_frontend_entries_wait_for_the_first_hello_ack(frontend):
    """Entries sent before any frontend answered are delivered after hello_ack."""
    fe = frontend
    fe.execute(
        "from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()\n"
        "_b.send_entries('default', %s, leaf='00000001')" % J([_entry(1)])
    )
    cid = fe.latest_comm()
    assert len(fe.comms[cid]["msgs"]) == 1  # sent into the void
    assert _print_state(fe)["connected"] is False
    fe.hello_ack(cid)
    fe.execute("pass")
    fe.drain(0.3)
    msgs = fe.comms[cid]["msgs"]
    assert len(msgs) == 2, msgs  # re-sent right after hello_ack
    assert [x["id"] for x in msgs[-1]["entries"]] == ["00000001"]
    fe.send_comm(cid, fe.store(msgs[-1]))
    assert _print_state(fe)["unacked"] == {}


@pytest.mark.kernel
def test_frontend_closing_the_comm_disconnects(frontend):
    fe = frontend
    fe.execute("from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()")
    cid = fe.latest_comm()
    fe.hello_ack(cid)
    assert _print_state(fe)["connected"] is True
    fe.close_comm(cid)  # what a frontend without the target does
    state = _print_state(fe, "_b.send_entries('default', [], leaf=None)")
    assert state["connected"] is False
    assert state["extra"] is None  # nothing sent on a closed comm


@pytest.mark.kernel
def test_receive_push_pending_push(frontend):
    fe = frontend
    meta = {
        "version": 1,
        "active": "default",
        "sessions": {"default": {"leaf": "00000002", "entries": [_entry(1), _entry(2, "00000001")]}},
    }
    # exactly the code the labextension sends (protocol.md), with a ''' inside a string
    meta["sessions"]["default"]["entries"][0]["message"]["content"] = "a ''' b \\"
    text = json.dumps(meta).replace("'''", "\\u0027\\u0027\\u0027")
    code = (
        "try:\n"
        "    import ipyagent.bridge.comm as _ipyagent_b\n"
        f"    _ipyagent_b.receive_push(r'''{text}''', source=\"jupyterlab\")\n"
        "    del _ipyagent_b\n"
        "except ImportError:\n"
        "    pass\n"
    )
    fe.execute(code)
    out = fe.execute(
        "import json, ipyagent.bridge.comm as b\n"
        "p = b.pending_push(); print(json.dumps([p, b.pending_push(), b.push_errors()]))"
    )["stdout"]
    got, again, errors = json.loads(out)
    assert got == meta
    assert again is None and errors == []
    # a malformed push never raises and is reported
    fe.execute("import ipyagent.bridge.comm as b\nb.receive_push('{nope', source='x')")
    out = fe.execute("print(b.push_errors(), b.pending_push())")["stdout"]
    assert "not JSON" in out and out.strip().endswith("None")


@pytest.mark.kernel
def test_a_push_with_an_entry_nested_100000_deep_loads_the_rest(frontend):
    """receive_push never raises; the too-deep entry is set aside (as its JSON text) and the rest loads."""
    fe = frontend
    deep_value = "[" * 100_000 + "]" * 100_000
    first, last = json.dumps(_entry(1)), json.dumps(_entry(3, "00000001"))
    deep_entry = '{"type":"message","id":"00000002","parentId":"00000001","details":' + deep_value + "}"
    text = ('{"version":1,"active":"default","sessions":{"default":{"leaf":"00000003","entries":['
            + ",".join([first, deep_entry, last]) + "]}}}")
    code = (
        "import ipyagent.bridge.comm as _ipyagent_b\n"
        f"_ipyagent_b.receive_push(r'''{text}''', source=\"jupyterlab\")\n"
    )
    reply = fe.execute(code)
    assert "Traceback" not in reply["stdout"]
    out = fe.execute(
        "import json, ipyagent.bridge.comm as b\n"
        "from ipyagent.store.schema import NotebookSessions\n"
        "errors = b.push_errors(); sessions, report = NotebookSessions.from_metadata(b.pending_push())\n"
        "aside = sessions.set_aside\n"
        "print(json.dumps([errors, [e['id'] for e in sessions.sessions['default'].entries],\n"
        "                  sessions.sessions['default'].leaf, [a['reason'] for a in aside],\n"
        "                  aside[0]['raw'] == r'''" + deep_entry + "''']))"
    )["stdout"]
    errors, ids, leaf, reasons, same_text = json.loads(out)
    assert errors == [] and ids == ["00000001", "00000003"] and leaf == "00000003"
    assert reasons == ["entry nests more than 200 levels deep; kept as JSON text"] and same_text is True


@pytest.mark.kernel
def test_push_into_a_running_bridge_reopens_and_resends_what_the_file_lacks(frontend):
    """A page reload (or a second tab) pushes the saved metadata into the running kernel: the
    bridge says hello again on a new comm and re-sends the entries the pushed metadata lacks."""
    fe = frontend
    fe.execute("from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()")
    old = fe.latest_comm()
    fe.hello_ack(old)
    fe.execute("_b.send_entries('default', %s, leaf='00000002')" % J([_entry(1), _entry(2)]))
    fe.send_comm(old, fe.store(fe.comms[old]["msgs"][-1]))
    assert _print_state(fe)["unacked"] == {}

    # the tab was closed without saving: the file holds only entry 1
    saved = {"version": 1, "sessions": {"default": {"entries": [_entry(1)]}}}
    fe.execute(
        "import ipyagent.bridge.comm as b\nb.receive_push(%r, source='jupyterlab')" % json.dumps(saved)
    )
    fe.drain(0.3)
    # the old comm is dropped without a comm_close: every page gets a close, and one that never
    # knew the comm logs "Comm not found"; the kernel no longer knows it
    assert old not in fe.closed
    known = fe.execute("import comm\nprint('KNOWN', %r in comm.get_comm_manager().comms)" % old)
    assert "KNOWN False" in known["stdout"]
    new = fe.latest_comm()
    assert new != old and fe.comms[new]["open"]["type"] == "hello"
    state = _print_state(fe)
    assert state["connected"] is False and state["unacked"] == {"default": ["00000002"]}
    fe.metadata = json.loads(json.dumps(saved))
    fe.hello_ack(new)
    fe.execute("pass")
    fe.drain(0.3)
    m = fe.comms[new]["msgs"][-1]
    assert [x["id"] for x in m["entries"]] == ["00000002"]
    fe.send_comm(new, fe.store(m))
    state = _print_state(fe, "b.pending_push() is not None")
    assert state["connected"] is True and state["unacked"] == {} and state["extra"] is True
    assert [x["id"] for x in fe.metadata["sessions"]["default"]["entries"]] == ["00000001", "00000002"]


def test_merge_metadata_dedupes_by_id():
    a = {"version": 1, "active": "x", "sessions": {"x": {"leaf": "1", "entries": [{"id": "1"}]}}}
    b = {"version": 1, "active": "y", "sessions": {
        "x": {"leaf": "2", "entries": [{"id": "1"}, {"id": "2"}]},
        "y": {"leaf": None, "entries": []},
    }}
    m = bridge_mod.merge_metadata(a, b)
    assert m["active"] == "y"
    assert [e["id"] for e in m["sessions"]["x"]["entries"]] == ["1", "2"]
    assert m["sessions"]["x"]["leaf"] == "2" and m["sessions"]["y"]["entries"] == []
    assert a["sessions"]["x"]["entries"] == [{"id": "1"}]  # inputs untouched
    # two pushes before pickup merge
    inbox = PushInbox()
    inbox.receive(json.dumps(a), source="t1")
    inbox.receive(json.dumps(b), source="t2")
    got = inbox.take()
    assert [e["id"] for e in got["sessions"]["x"]["entries"]] == ["1", "2"]
    assert inbox.take() is None
    inbox.receive("[1, 2]")
    assert "expected an object" in inbox.errors(clear=True)[0]


@pytest.mark.kernel
def test_many_entries_go_in_messages_far_below_the_websocket_limit(frontend):
    """15 MB of entries at once (a resend to a new frontend): several ``entries`` messages, none
    over 1 MiB of JSON, every entry once and in order, each message acked on its own."""
    fe = frontend
    fe.execute("from ipyagent.bridge.comm import KernelBridge\n_b = KernelBridge().open()")
    cid = fe.latest_comm()
    fe.hello_ack(cid)
    _print_state(fe)
    fe.execute(textwrap.dedent("""
        _big = [{"type": "message", "id": f"{i:08x}", "parentId": None, "timestamp": "t",
                 "message": {"role": "user", "content": "é" * 1500 + str(i), "timestamp": 0}}
                for i in range(5000)]
        _b.send_entries('default', _big, leaf=_big[-1]['id'])
    """), timeout=120)
    fe.drain(1.0)
    msgs = fe.comms[cid]["msgs"]
    assert len(msgs) > 10
    assert max(len(json.dumps(m, ensure_ascii=False).encode()) for m in msgs) < (1 << 20) + 4096
    ids = [e["id"] for m in msgs for e in m["entries"]]
    assert ids == [f"{i:08x}" for i in range(5000)]
    assert len({m["seq"] for m in msgs}) == len(msgs)
    for m in msgs:
        fe.send_comm(cid, fe.store(m))
    assert _print_state(fe)["unacked"] == {}
