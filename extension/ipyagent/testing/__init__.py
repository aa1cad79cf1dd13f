"""Test helpers for ipyagent and for your own tests: a fake provider server on loopback.

See ``ipyagent.testing.fake_server`` for a walk-through.
"""

from ipyagent.testing.fake_server import DEFAULT_SUMMARY, FakeProviderServer, RecordedRequest
from ipyagent.testing.helpers import StreamResult, collect
from ipyagent.testing.probe_script import ProbeScript
from ipyagent.testing.specs import Fault, RawStream, Reply, ToolCallSpec

__all__ = ["DEFAULT_SUMMARY", "FakeProviderServer", "Fault", "ProbeScript", "RawStream", "RecordedRequest", "Reply",
           "StreamResult", "ToolCallSpec", "collect"]
