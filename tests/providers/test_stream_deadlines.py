"""A stream that sends only keep-alive comments, or nothing, or content forever, ends with an
error that names the deadline it passed (issue 19, section 5), over real loopback HTTP against
the fake server. The deadlines are set short here: they are what these tests are about."""

from __future__ import annotations

import pytest

from ipyagent.providers import ModelRequest, NetworkError, stream_with_retry
from ipyagent.providers.errors import StreamDeadlineError
from ipyagent.providers.transport.streaming import NO_CONTENT_TIMEOUT, TOTAL_TIMEOUT
from ipyagent.testing import FakeProviderServer, collect

REQUEST = ModelRequest(model="m", messages=[{"role": "user", "content": "hello"}])
CONTENT = 'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'


def consume(provider) -> None:
    for _ in provider.stream(REQUEST):
        pass


def test_only_keep_alive_comments_end_with_the_no_content_deadline():
    with FakeProviderServer() as server:
        server.enqueue_raw([": keep-alive\n\n"] * 600, delay=0.05)  # 30 s of comments, never an event
        with pytest.raises(StreamDeadlineError) as raised:
            consume(server.provider(no_content_timeout=1))
    message = str(raised.value)
    assert message.startswith("OpenAI: no content for 1 s (only keep-alive comments, or nothing), the provider's "
                              "no_content_timeout; the stream was closed")
    assert raised.value.retryable and isinstance(raised.value, NetworkError)


def test_a_server_gone_quiet_is_cut_off_by_the_no_content_deadline():
    with FakeProviderServer() as server:
        server.enqueue_raw([CONTENT, ": still here\n\n"], delay=60)  # one event, then a minute of silence
        with pytest.raises(StreamDeadlineError, match="no content for 1 s"):
            consume(server.provider(no_content_timeout=1))


def test_content_that_never_ends_meets_the_total_deadline_and_is_not_retried():
    with FakeProviderServer() as server:
        server.enqueue_raw([CONTENT] * 600, delay=0.05)  # content all along, for 30 s
        server.enqueue_text("never asked for")
        with pytest.raises(StreamDeadlineError) as raised:
            collect(stream_with_retry(server.provider(total_timeout=1), REQUEST, sleep=lambda s: None))
        assert server.chat_calls == 1
    assert "the reply took longer than 1 s in all, the provider's total_timeout" in str(raised.value)
    assert not raised.value.retryable


def test_the_no_content_deadline_is_retried_like_a_dropped_connection():
    with FakeProviderServer() as server:
        server.enqueue_raw([": keep-alive\n\n"] * 600, delay=0.05)
        server.enqueue_text("The answer, second time round.")
        result = collect(stream_with_retry(server.provider(no_content_timeout=1), REQUEST, sleep=lambda s: None))
    assert result.text == "The answer, second time round."
    assert len(result.retries) == 1 and "no_content_timeout" in str(result.retries[0])


def test_the_defaults_and_the_provider_options():
    assert (NO_CONTENT_TIMEOUT, TOTAL_TIMEOUT) == (120.0, 3600.0)
    with FakeProviderServer() as server:
        provider = server.provider()
        assert (provider.no_content_timeout, provider.total_timeout) == (120.0, 3600.0)
        from ipyagent.providers import resolve_provider

        configured, _ = resolve_provider("openai:m", {"openai": {"base_url": server.openai_base_url,
                                                                 "no_content_timeout": 300, "total_timeout": 7200}})
        assert (configured.no_content_timeout, configured.total_timeout) == (300.0, 7200.0)
