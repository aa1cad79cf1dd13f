"""Where a frontend's push waits: each kernel's shell has its own inbox, and the bridge open on an
inbox hears only that inbox's pushes (no state of the module is shared between them).

In-process, with recording comms; the real comm in a real kernel is tests/bridge/test_bridge_kernel.py.
"""

from __future__ import annotations

import json

from ipyagent.bridge.comm import KernelBridge
from ipyagent.bridge.push import PushInbox, inbox_of


class RecordingComm:
    def __init__(self, target_name: str, data: dict):
        self.sent = [data]
        self.closed = False
        self.handler = None

    def on_msg(self, handler):
        self.handler = handler

    def on_close(self, handler):
        pass

    def send(self, data):
        self.sent.append(data)

    def close(self):
        self.closed = True

    def answer(self, data: dict) -> None:
        assert self.handler is not None
        self.handler({"content": {"data": data}})


def _bridge(inbox: PushInbox, comms: list[RecordingComm]) -> KernelBridge:
    def factory(**kw) -> RecordingComm:
        comms.append(RecordingComm(**kw))
        return comms[-1]

    return KernelBridge(comm_factory=factory, inbox=inbox)


def _entry(i: int) -> dict:
    return {"type": "message", "id": f"{i:08x}", "parentId": None, "timestamp": "t",
            "message": {"role": "user", "content": f"m{i}"}}


def _metadata(*ids: int) -> str:
    return json.dumps({"version": 1, "sessions": {"default": {"leaf": None, "entries": [_entry(i) for i in ids]}}})


def test_two_kernels_keep_their_pushes_apart():
    class Shell:  # two IPython shells: two kernels
        pass

    one, two = Shell(), Shell()
    inbox_of(one).receive(_metadata(1), source="tab")
    assert inbox_of(two).peek() is None and inbox_of(two).errors() == []
    assert inbox_of(one) is inbox_of(one)  # made once per shell, then the same
    assert inbox_of(one).take() == json.loads(_metadata(1)) and inbox_of(one).take() is None


def test_a_push_reopens_only_the_bridge_open_on_that_inbox():
    mine, other = PushInbox(), PushInbox()
    comms: list[RecordingComm] = []
    others: list[RecordingComm] = []
    bridge, elsewhere = _bridge(mine, comms).open(), _bridge(other, others).open()
    try:
        comms[0].answer({"type": "hello_ack", "protocol": 1, "frontend": "jupyterlab"})
        bridge.send_entries("default", [_entry(1), _entry(2)], leaf="00000002")
        comms[0].answer({"type": "ack", "seq": bridge.seq, "session": "default", "ids": ["00000001", "00000002"]})
        assert bridge.unacked() == {} and bridge.connected
        mine.receive(_metadata(1), source="reloaded tab")  # the page lacks entry 2 (never saved)
        assert len(comms) == 2 and comms[1].sent[0] == {"type": "hello", "protocol": 1}  # a new hello
        assert bridge.unacked() == {"default": ["00000002"]} and not bridge.connected
        assert len(others) == 1 and elsewhere.is_open  # the other kernel's bridge heard nothing
        comms[1].answer({"type": "hello_ack", "protocol": 1, "frontend": "jupyterlab"})
        assert [e["id"] for e in comms[1].sent[-1]["entries"]] == ["00000002"]  # re-sent to the new page
        assert mine.take() == json.loads(_metadata(1)) and other.take() is None
    finally:
        bridge.close()
        elsewhere.close()


def test_opening_a_bridge_closes_the_one_before_it_on_that_inbox():
    inbox = PushInbox()
    comms: list[RecordingComm] = []
    first = _bridge(inbox, comms).open()
    second = _bridge(inbox, comms).open()
    assert inbox.listener is second and not first.is_open and comms[0].closed
    second.close()
    assert inbox.listener is None
    inbox.receive(_metadata(3))  # no bridge open: the push waits, nothing re-opens
    assert len(comms) == 2 and inbox.take() is not None


def test_a_push_in_parts_is_taken_whole_or_reported():
    inbox = PushInbox()
    text = _metadata(1, 2)
    parts = [text[i:i + 7] for i in range(0, len(text), 7)]
    for index, part in enumerate(parts[:2]):
        inbox.receive_part(part, push="old", index=index, count=len(parts))
    for index, part in enumerate(parts):
        assert inbox.peek() is None
        inbox.receive_part(part, push="new", index=index, count=len(parts))
    assert inbox.take() == json.loads(text)
    errors = inbox.errors(clear=True)
    assert len(errors) == 1 and "incomplete, 2 parts arrived" in errors[0]
    inbox.receive_part("x", push="p", index=3, count=2)
    assert "part could not be read" in inbox.errors()[0] and inbox.take() is None
