"""Secrets besides the API key: ``user:password@`` in a base URL never reaches a message, an
output or an entry, and ``%config Agent`` never prints ``provider_options``' keys."""

from __future__ import annotations

import json
import socket
import urllib.parse

import httpx
import pytest
from IPython.utils.capture import capture_output

from ipyagent.kernel import extension
from ipyagent.providers import (
    AnthropicProvider,
    AuthenticationError,
    BadRequestError,
    ModelNotFoundError,
    ModelRequest,
    NetworkError,
    OpenAIChatProvider,
    stream_with_retry,
)
from ipyagent.providers.transport.http import scrub
from ipyagent.testing import FakeProviderServer, collect
from support.shell import extension_shell

USER, PASSWORD = "alice-proxy", "s3cr@t/pass:word"
QUOTED = "s3cr%40t%2Fpass%3Aword"  # the password as it must be written in a URL
KEY = "sk-test-KEY-0123456789abcdef"
FORBIDDEN = [USER, PASSWORD, QUOTED, "s3cr", KEY]


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{QUOTED}@", 1)


def clean(text: str) -> bool:
    return not any(secret in text for secret in FORBIDDEN)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket closes


def failure(provider) -> BaseException:
    request = ModelRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(Exception) as info:
        collect(stream_with_retry(provider, request, sleep=lambda s: None, max_retries=1))
    return info.value


# ---- the scrubbing functions ---------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("from http://u:p@host/v1", "from http://***@host/v1"),
    ("HTTPS://u:p@host:8080/x?y=1", "HTTPS://***@host:8080/x?y=1"),
    (f"'http://{USER}:{QUOTED}@h/v1'", "'http://***@h/v1'"),
    ("http://user:p@ss@host/v1", "http://***@host/v1"),  # a raw "@" in the password
    ("http://only-a-token@host", "http://***@host"),
    ("<Request('POST', 'http://u:pw@h/v1/chat')>", "<Request('POST', 'http://***@h/v1/chat')>"),
    ("mail me at a@b.com, see http://host/a@b", "mail me at a@b.com, see http://host/a@b"),  # no userinfo
    ("two: http://a:b@x/ and ws://c:d@y/", "two: http://***@x/ and ws://***@y/"),
])
def test_url_credentials_are_stripped_from_text(text, expected):
    from ipyagent.providers.transport.http import strip_url_credentials

    assert strip_url_credentials(text) == expected


def test_scrub_removes_keys_and_every_form_of_the_url_credentials():
    from ipyagent.providers.transport.http import url_credentials

    url = with_credentials("http://127.0.0.1:9/v1")
    secrets = [KEY, *url_credentials(url)]
    assert USER in secrets and PASSWORD in secrets and QUOTED in secrets
    text = f"bad key {KEY}; user {USER} said {PASSWORD!r} ({QUOTED}) at {url}"
    scrubbed = scrub(text, secrets)
    assert clean(scrubbed) and scrubbed.endswith("at http://***@127.0.0.1:9/v1")
    assert scrub(repr(httpx.Request("POST", url)), secrets) == "<Request('POST', 'http://***@127.0.0.1:9/v1')>"
    encoded = urllib.parse.quote(url, safe="")  # e.g. a redirect parameter echoed in an error page
    assert clean(scrub(f"see /login?next={encoded}", secrets))
    assert scrub("short pw: ab", ["ab"]) == "short pw: ab"  # too short to replace blindly
    assert scrub("plain", None) == "plain" and scrub("", KEY) == ""


# ---- provider errors over real HTTP --------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_401_from_a_base_url_with_credentials(protocol):
    with FakeProviderServer(api_key="another-key") as server:
        cls, base = ((OpenAIChatProvider, server.openai_base_url) if protocol == "openai"
                     else (AnthropicProvider, server.anthropic_base_url))
        provider = cls(base_url=with_credentials(base), api_key=KEY)
        err = failure(provider)
    assert isinstance(err, AuthenticationError)
    assert "http://***@127.0.0.1:" in str(err)
    assert clean(f"{err} {err!r} {err.body} {provider!r}")


def test_404_from_a_base_url_with_credentials():
    with FakeProviderServer() as server:
        server.enqueue_error(404, body={"error": {"message": f"no route for {with_credentials(server.url)}/v1/x"}})
        err = failure(OpenAIChatProvider(base_url=with_credentials(server.openai_base_url), api_key=KEY))
        host = server.url.removeprefix("http://")
    assert isinstance(err, ModelNotFoundError) and clean(f"{err} {err!r} {err.body}")
    assert f"no route for http://***@{host}/v1/x" in str(err)


def test_connection_refused_at_a_base_url_with_credentials():
    provider = OpenAIChatProvider(base_url=with_credentials(f"http://127.0.0.1:{free_port()}/v1"), api_key=KEY)
    err = failure(provider)
    assert isinstance(err, NetworkError) and "connection problem with http://***@127.0.0.1:" in str(err)
    assert clean(f"{err} {err!r}")


def test_an_invalid_base_url_with_credentials():
    provider = OpenAIChatProvider(base_url=f"http://{USER}:{QUOTED}@127.0.0.1:notaport/v1", api_key=KEY)
    err = failure(provider)
    assert isinstance(err, BadRequestError) and "invalid base URL 'http://***@127.0.0.1:notaport/v1'" in str(err)
    assert clean(str(err))


def test_no_key_message_hides_the_url_credentials(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(base_url=with_credentials("http://127.0.0.1:9"), require_key=True)
    with pytest.raises(AuthenticationError) as info:
        provider.api_key()
    assert "(http://***@127.0.0.1:9)" in str(info.value) and clean(str(info.value))


# ---- in the notebook: outputs and entries --------------------------------------------------------


@pytest.fixture
def shell(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with extension_shell() as (ip, _):
        ip.run_line_magic("config", "Agent.max_retries = 0")
        yield ip


def run_cell(ip, base_url: str) -> str:
    ip.user_ns["opts"] = {"openai": {"base_url": base_url}}
    ip.run_line_magic("config", "Agent.provider_options = opts")
    with capture_output() as cap:
        ip.run_cell_magic("agent", "", "hello")
    shown = json.dumps([o.data for o in cap.outputs]) + cap.stdout + cap.stderr
    entries = json.dumps(extension.get_runtime(ip).slot().session.entries)
    return shown + entries


@pytest.mark.parametrize("fault", ["401", "404", "refused"])
def test_errors_saved_in_outputs_and_entries_carry_no_url_credentials(shell, fault):
    if fault == "refused":
        saved = run_cell(shell, with_credentials(f"http://127.0.0.1:{free_port()}/v1"))
        assert "connection problem with http://***@127.0.0.1:" in saved
    else:
        with FakeProviderServer(api_key="another-key" if fault == "401" else None) as server:
            if fault == "404":
                server.enqueue_error(404)
            saved = run_cell(shell, with_credentials(server.openai_base_url))
            host = server.url.removeprefix("http://")
        assert f"HTTP {fault} from http://***@{host}/v1/chat/completions" in saved
    assert "Model error" in saved and clean(saved)


@pytest.mark.kernel
def test_in_a_kernel_the_saved_notebook_carries_no_url_credentials():
    from kernel_support import SETUP, LiveKernel, fake_provider
    from support.outputs import outputs_text

    with fake_provider(api_key="another-key") as server, LiveKernel() as k:
        url = with_credentials(server.openai_base_url)
        k.run(SETUP + f"%config Agent.provider_options = {{'openai': {{'base_url': {url!r}}}}}\n"
              "%config Agent.max_retries = 0", "setup")
        cell = k.run("%%agent\nhello", "c1")
        shown = outputs_text(cell.outputs)
        assert cell.status == "ok" and "HTTP 401 from http://***@127.0.0.1:" in shown
        assert k.metadata["sessions"]["default"]["entries"]  # the prompt was saved
        assert clean(k.snapshot() + json.dumps(k.metadata))


# ---- %config Agent -------------------------------------------------------------------------------


OPTIONS = {"openai": {"api_key": KEY, "base_url": with_credentials("http://127.0.0.1:9/v1"),
                      "headers": {"X-Proxy-Token": "proxy-SECRET-token"}}}


def test_config_listing_never_prints_provider_keys(shell):
    shell.user_ns["opts"] = OPTIONS
    shell.run_line_magic("config", "Agent.provider_options = opts")
    with capture_output() as cap:
        shell.run_line_magic("config", "Agent")
    assert "Agent.provider_options" in cap.stdout
    assert ("Current: {'openai': {'api_key': '***', 'base_url': 'http://***@127.0.0.1:9/v1', 'headers': '***'}}"
            in cap.stdout)
    assert clean(cap.stdout) and "proxy-SECRET-token" not in cap.stdout
    with capture_output() as cap:  # %config Agent.provider_options displays the value itself
        shell.run_cell("%config Agent.provider_options")
        shell.run_cell("%config Agent.provider_options['openai']")
    assert "'api_key': '***'" in cap.stdout and clean(cap.stdout) and "proxy-SECRET-token" not in cap.stdout
    config = extension.get_runtime(shell).run_config()
    assert clean(repr(config)) and config.provider_options == OPTIONS  # the real values still reach the providers


def test_provider_options_set_through_config_still_work(shell):
    with FakeProviderServer(api_key="the-right-key") as server:
        server.enqueue_text("hello back")
        shell.run_line_magic("config", f"Agent.provider_options = {{'openai': {{'base_url': "
                             f"'{server.openai_base_url}', 'api_key': 'the-right-key'}}}}")
        with capture_output() as cap:
            shell.run_cell_magic("agent", "", "hello")
        assert "hello back" in json.dumps([o.data for o in cap.outputs])
        assert server.requests[-1].outcome != "unauthorized" and len(server.requests) == 1
