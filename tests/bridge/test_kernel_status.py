"""IdleAfterTheRun: the order of the statuses the kernel publishes while a cell runs on the main
thread and other threads handle messages beside it (issue 37, item 3). The browser test
(tests/browser/test_kernel_status_browser.py) checks the same in a real JupyterLab and kernel."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from ipyagent.bridge.kernel_status import IdleAfterTheRun, keep_busy_while_running, message_to_comm


def _msg(msg_type: str, msg_id: str, **content: Any) -> dict[str, Any]:
    return {"header": {"msg_type": msg_type, "msg_id": msg_id}, "content": content}


RUN = _msg("execute_request", "run")
ACK = _msg("comm_msg", "ack", comm_id="c-ipyagent")
WIDGET = _msg("comm_msg", "slider", comm_id="c-widget")
SUBSHELL = _msg("create_subshell_request", "sub")
COMMS = {"c-ipyagent": SimpleNamespace(target_name="ipyagent"), "c-widget": SimpleNamespace(target_name="jupyter.widget")}


class Kernel:
    """What IdleAfterTheRun asks of a kernel: its own publisher and the parent of a channel."""

    def __init__(self) -> None:
        self.published: list[tuple[str, str]] = []  # (state, parent msg_id)
        self.comm_manager = SimpleNamespace(comms=COMMS)

    def _publish_status(self, status: str, channel: str, parent: Any = None) -> None:
        self.published.append((status, parent["header"]["msg_id"]))

    def get_parent(self, channel: str) -> Any:
        return RUN


def _beside(publish: Any, *calls: tuple[str, dict[str, Any]]) -> None:
    """Publish ``calls`` from a thread that is not the main one (a subshell, the control thread)."""
    thread = threading.Thread(target=lambda: [publish(state, "shell", parent) for state, parent in calls])
    thread.start()
    thread.join()


def _installed() -> tuple[Kernel, Any]:
    kernel = Kernel()
    assert keep_busy_while_running(kernel, "ipyagent")
    return kernel, kernel._publish_status


def test_the_idle_of_an_ack_waits_for_the_running_cell() -> None:
    kernel, publish = _installed()
    publish("busy", "shell")  # the main shell starts the cell (its parent from get_parent)
    _beside(publish, ("busy", ACK), ("idle", ACK))
    assert kernel.published == [("busy", "run"), ("busy", "ack")]  # the last state said: busy
    publish("idle", "shell")
    assert kernel.published == [("busy", "run"), ("busy", "ack"), ("idle", "ack"), ("idle", "run")]


def test_an_idle_someone_waits_for_goes_out_at_once_and_busy_follows() -> None:
    kernel, publish = _installed()
    publish("busy", "shell")
    _beside(publish, ("busy", SUBSHELL), ("idle", SUBSHELL), ("busy", WIDGET), ("idle", WIDGET))
    assert kernel.published == [("busy", "run"), ("busy", "sub"), ("idle", "sub"), ("busy", "run"),
                                ("busy", "slider"), ("idle", "slider"), ("busy", "run")]
    publish("idle", "shell")
    assert kernel.published[-1] == ("idle", "run")


def test_without_a_running_cell_every_status_goes_out_as_it_comes() -> None:
    kernel, publish = _installed()
    _beside(publish, ("busy", ACK), ("idle", ACK), ("busy", SUBSHELL), ("idle", SUBSHELL))
    assert kernel.published == [("busy", "ack"), ("idle", "ack"), ("busy", "sub"), ("idle", "sub")]


def test_installed_once_and_only_on_a_kernel_that_publishes_statuses() -> None:
    kernel, publish = _installed()
    assert keep_busy_while_running(kernel, "ipyagent") and kernel._publish_status is publish
    assert isinstance(publish, IdleAfterTheRun)
    assert not keep_busy_while_running(None, "ipyagent")
    assert not keep_busy_while_running(SimpleNamespace(), "ipyagent")


def test_only_messages_to_the_targets_open_comms_are_held() -> None:
    holds = message_to_comm("ipyagent", lambda: COMMS)
    assert holds(ACK)
    assert not holds(WIDGET) and not holds(SUBSHELL) and not holds(None)
    assert not holds(_msg("comm_msg", "gone", comm_id="closed-comm"))
    assert not holds(_msg("comm_msg", "odd", comm_id=["not", "an", "id"]))
