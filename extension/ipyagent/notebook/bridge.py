"""Old path of :mod:`ipyagent.bridge.comm` (an older bridge's push code imports it)."""

from ipyagent.bridge.comm import KernelBridge, active_bridge, peek_push, pending_push, receive_push

__all__ = ["KernelBridge", "active_bridge", "peek_push", "pending_push", "receive_push"]
