"""The entry stream: entries sent as they are made, batched within the window, flushed before a
tool call or a request (``ipyagent/kernel/entry_stream.py``), and the bridge's ``resend=False``."""

from __future__ import annotations

from ipyagent.agent import run_events as ev
from ipyagent.bridge.comm import KernelBridge
from ipyagent.bridge.push import PushInbox
from ipyagent.kernel.entry_stream import EntryStream


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _entry(i: int) -> dict:
    return {"type": "message", "id": f"{i:08d}", "parentId": None, "message": {"role": "user", "content": "x"}}


def test_entries_go_at_once_then_batched_within_the_window_and_before_a_tool_call():
    entries: list[dict] = [_entry(0)]  # stored already: the notebook holds it
    sent: list[list[str]] = []
    clock = Clock()
    stream = EntryStream(lambda: entries, lambda batch: sent.append([e["id"] for e in batch]), clock=clock,
                         already=lambda e: e["id"] == "00000000")

    def append(i: int) -> None:
        entries.append(_entry(i))
        stream(ev.EntryAppended(entries[-1]))

    append(1)
    assert sent == [["00000001"]]  # the first goes at once, without what the notebook holds
    clock.now = 0.05
    append(2)
    append(3)
    assert sent == [["00000001"]]  # within 100 ms of the last message: batched
    stream(ev.ToolExecutionStart("call", "python", {}))
    assert sent == [["00000001"], ["00000002", "00000003"]]  # a tool may kill the kernel: sent first
    clock.now = 0.2
    append(4)
    assert sent[-1] == ["00000004"]
    clock.now = 0.25
    append(5)
    stream(ev.RequestStart("m", 0, 1))
    assert sent[-1] == ["00000005"]
    stream(ev.AgentEnd([]))
    assert len(sent) == 4 and stream.messages == 4  # nothing pending: no empty message


class _Comm:
    def __init__(self, target_name, data):
        self.sent = [data]

    def on_msg(self, handler):
        self.handler = handler

    def on_close(self, handler):
        pass

    def send(self, data):
        self.sent.append(data)

    def close(self):
        pass


def test_streamed_messages_do_not_repeat_unacknowledged_entries():
    comms: list[_Comm] = []
    bridge = KernelBridge(comm_factory=lambda **kw: comms.append(_Comm(**kw)) or comms[-1], inbox=PushInbox())
    try:
        bridge.open()
        for i in range(1, 4):
            bridge.send_entries("default", [_entry(i)], leaf=f"{i:08d}", resend=False, skip_empty=True)
        msgs = comms[0].sent[1:]
        assert [[e["id"] for e in m["entries"]] for m in msgs] == [["00000001"], ["00000002"], ["00000003"]]
        assert bridge.send_entries("default", [], leaf="00000003", resend=False, skip_empty=True) is None
        bridge.send_entries("default", [], leaf="00000003")  # resend=True: every unacknowledged one again
        assert [e["id"] for e in comms[0].sent[-1]["entries"]] == ["00000001", "00000002", "00000003"]
        bridge.reopen()  # a new comm: nothing was sent on it yet
        bridge.send_entries("default", [_entry(4)], leaf="00000004", resend=False)
        assert [e["id"] for e in comms[1].sent[-1]["entries"]] == ["00000001", "00000002", "00000003", "00000004"]
    finally:
        bridge.close()
