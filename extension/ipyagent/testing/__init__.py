"""Test helpers for ipyagent and for your own tests: a fake provider server on loopback.

See ``ipyagent.testing.fake_server`` for a walk-through.
"""

from ipyagent.testing.fake_server import DEFAULT_SUMMARY, FakeProviderServer, RecordedRequest
from ipyagent.testing.specs import Fault, Reply, ToolCallSpec

__all__ = ["FakeProviderServer", "RecordedRequest", "Reply", "Fault", "ToolCallSpec", "DEFAULT_SUMMARY"]
