"""ipykernel's comms as the bridge needs them: answers handled where the frontend sent them, and a
comm forgotten without a ``comm_close`` to every page.

Imported only when a bridge opens a comm (``bridge/comm.py``): ``import ipyagent`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["answer_where_sent", "drop_quietly", "make_comm"]


def _routed_comm_class(create_comm: Any) -> Any:
    """ipykernel's comm class, except that the frontend's messages on it are handled on the shell
    the frontend addressed them to (``None`` outside ipykernel, or before 7.4's routing).

    ipykernel 7.4 routes a comm's incoming messages to the shell that last sent on it
    (``_reply_subshell_for``); for this comm that is the busy main shell of a running cell or a
    Run All, so the handshake and the acks would wait for every queued cell. Dropping the route
    after each send (:func:`answer_where_sent`) leaves a moment in which an answer arriving
    during the send is still routed there; deciding the route in the comm itself leaves none.
    """
    if getattr(create_comm, "__module__", "") != "ipykernel.ipkernel":
        return None  # another kernel's comms (or none): its own create_comm
    try:
        from ipykernel.comm.comm import BaseComm
    except ImportError:
        return None
    if not hasattr(BaseComm, "_reply_subshell_for"):
        return None

    class FrontendRoutedComm(BaseComm):
        def _reply_subshell_for(self, data: Any, default: Any) -> Any:
            return default

    return FrontendRoutedComm


def make_comm(target: str, data: dict[str, Any], factory: Callable[..., Any] | None = None) -> Any:
    """A comm to ``target`` opened with ``data``: from ``factory`` when given (a test's), else
    ipykernel's, routed as :func:`_routed_comm_class` says."""
    if factory is not None:
        return factory(target_name=target, data=data)
    import comm  # provided by ipykernel; imported lazily to keep ``import ipyagent`` light

    routed = _routed_comm_class(comm.create_comm)
    if routed is not None:
        return routed(target_name=target, data=data)
    return comm.create_comm(target_name=target, data=data)


def drop_quietly(c: Any) -> None:
    """Forget a comm without sending ``comm_close``.

    A ``comm_close`` goes to every page on the kernel, and a page that never knew the comm (a
    second tab, a page that connected after it opened) logs "Comm not found for comm id …". No
    page needs the close: each comm's handler only answers what the kernel sends on it, and a new
    ``hello`` comm replaces the old one. A comm that is not ipykernel's (a test's) is closed.
    """
    try:
        from comm.base_comm import BaseComm
    except ImportError:
        base: Any = None
    else:
        base = BaseComm
    if base is not None and isinstance(c, base):
        if not c._closed:
            c._closed = True
            try:
                import comm

                comm.get_comm_manager().unregister_comm(c)
            except Exception:  # noqa: BLE001 - already unregistered (the frontend closed it)
                pass
        return
    try:
        c.close()
    except Exception:  # noqa: BLE001 - closing a comm the frontend already dropped
        pass


def answer_where_sent(c: Any) -> None:
    """Let the frontend's answers reach the kernel while the sending cell still runs.

    ipykernel 7.4 routes a comm's incoming messages to the subshell that sent the kernel's last
    message on it; for a message sent from a running cell (the ``hello`` of ``%load_ext`` in a
    Run All, an ``entries`` message, a request) that is the main shell, busy until every queued
    cell has ended. Dropping that route (a private attribute; absent elsewhere, then nothing
    changes) after each message sends the frontend's answer where the frontend addressed it — its
    comm subshell — so handshakes, acks and answers are handled while cells run.
    """
    lock = getattr(c, "_reply_subshell_lock", None)
    if lock is None:
        return
    with lock:
        vars(c).pop("_reply_subshell_id", None)
