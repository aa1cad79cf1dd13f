"""Fixtures of the interop tests: the real llama-cpp-python server (llama_server.py), started once
per test session, and the environment that points kernels at it the way a user would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .llama_server import LlamaServer, start_server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = start_server(tmp_path_factory.mktemp("llama-server") / "server.log")
    print(f"\n[interop] llama-cpp-python server ready in {server.started_in:.1f} s at {server.base_url}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def real_provider_env(llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """``OPENAI_BASE_URL`` at the server, no key, no default model, no replay: what kernels
    started in the test inherit."""
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("IPYAGENT_REPLAY", "off")
    for name in ("OPENAI_API_KEY", "IPYAGENT_MODEL", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return llama_server
