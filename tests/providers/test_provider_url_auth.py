"""A base URL with ``user:password@``: httpx would turn it into Basic auth and replace the
``Authorization: Bearer`` key. The providers send the URL without its credentials; the API key
always goes out; the URL's credentials become Basic auth where nothing else claims that header
(no key for a Bearer protocol, or a protocol whose key has a header of its own). Real HTTP against
the fake server, which checks what arrives."""

from __future__ import annotations

import base64

import pytest

from ipyagent.providers import (
    AnthropicProvider,
    AuthenticationError,
    ModelRequest,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    stream_with_retry,
)
from ipyagent.providers.transport.http import split_url_credentials, url_credentials
from ipyagent.testing import FakeProviderServer, collect

USER, PASSWORD = "alice-proxy", "s3cr@t/pass:word"
QUOTED = "s3cr%40t%2Fpass%3Aword"  # the password as it must be written in a URL
KEY = "sk-test-KEY-0123456789abcdef"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
FORBIDDEN = [USER, PASSWORD, QUOTED, TOKEN, KEY]
BEARER = {"openai": OpenAIChatProvider, "responses": OpenAIResponsesProvider}


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{QUOTED}@", 1)


def ask(provider) -> str:
    request = ModelRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    return collect(stream_with_retry(provider, request, sleep=lambda s: None, max_retries=0)).text


def test_split_url_credentials():
    assert split_url_credentials(f"http://{USER}:{QUOTED}@127.0.0.1:9/v1") == (
        "http://127.0.0.1:9/v1", f"Basic {TOKEN}")
    assert split_url_credentials("https://api.openai.com/v1") == ("https://api.openai.com/v1", None)
    assert split_url_credentials("http://token-only@h/v1") == (
        "http://h/v1", "Basic " + base64.b64encode(b"token-only:").decode())
    assert TOKEN in url_credentials(f"http://{USER}:{QUOTED}@h/v1")  # so it is scrubbed like the rest


@pytest.mark.parametrize("protocol", ["openai", "responses"])
def test_the_api_key_wins_over_url_credentials(protocol):
    with FakeProviderServer(api_key=KEY) as server:
        server.enqueue_text("bearer arrived")
        provider = BEARER[protocol](base_url=with_credentials(server.openai_base_url), api_key=KEY)
        assert ask(provider) == "bearer arrived"
        sent = server.last_request
    assert sent.auth_scheme == "Bearer" and sent.outcome == "reply"


@pytest.mark.parametrize("protocol", ["openai", "responses"])
def test_without_a_key_the_url_credentials_are_basic_auth(protocol, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeProviderServer(basic_auth=(USER, PASSWORD)) as server:
        server.enqueue_text("basic arrived")
        assert ask(BEARER[protocol](base_url=with_credentials(server.openai_base_url))) == "basic arrived"
        assert server.last_request.auth_scheme == "Basic"
        # the same server refuses a request without them: the check is real
        with pytest.raises(AuthenticationError) as info:
            ask(BEARER[protocol](base_url=server.openai_base_url))
    assert not any(secret in str(info.value) for secret in FORBIDDEN)


def test_anthropic_sends_its_key_and_the_basic_credentials_together():
    with FakeProviderServer(api_key=KEY, basic_auth=(USER, PASSWORD)) as server:
        server.enqueue_text("both arrived")
        provider = AnthropicProvider(base_url=with_credentials(server.anthropic_base_url), api_key=KEY)
        assert ask(provider) == "both arrived"
        assert server.last_request.auth_scheme == "Basic"
        count = provider.count_tokens(ModelRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
        assert count > 0 and server.last_request.path == "/v1/messages/count_tokens"


def test_a_configured_authorization_header_is_left_alone():
    with FakeProviderServer(basic_auth=("gateway", "pw")) as server:
        server.enqueue_text("header arrived")
        own = "Basic " + base64.b64encode(b"gateway:pw").decode()
        provider = OpenAIChatProvider(base_url=with_credentials(server.openai_base_url), headers={"Authorization": own})
        assert ask(provider) == "header arrived"


def test_an_error_that_echoes_the_basic_token_is_scrubbed(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeProviderServer() as server:
        server.enqueue_error(403, body={"error": {"message": f"Basic {TOKEN} ({USER}) may not use this model"}})
        provider = OpenAIChatProvider(base_url=with_credentials(server.openai_base_url))
        with pytest.raises(AuthenticationError) as info:
            ask(provider)
    err = info.value
    text = f"{err} {err!r} {err.body} {provider!r}"
    assert "Basic *** (***) may not use this model" in str(err)
    assert not any(secret in text for secret in FORBIDDEN)
