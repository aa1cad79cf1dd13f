"""Fixtures of the interop tests: the real llama-cpp-python server (llama_server.py), started once
per test session, and the environment that points kernels at it the way a user would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .llama_server import LlamaServer, point_kernels_at, start_server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = start_server(tmp_path_factory.mktemp("llama-server") / "server.log")
    print(f"\n[interop] llama-cpp-python server ready in {server.started_in:.1f} s at {server.base_url}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server_4096(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The same server with ``--n_ctx 4096`` (Ollama's default context), for the default-budget cases."""
    server = start_server(tmp_path_factory.mktemp("llama-server-4096") / "server.log", n_ctx=4096)
    print(f"\n[interop] llama-cpp-python server (n_ctx 4096) ready in {server.started_in:.1f} s at {server.base_url}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=[2048, 4096], ids=["n_ctx-2048", "n_ctx-4096"])
def server_at_each_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """The server at 2,048 and at 4,096 tokens, with the environment of ``real_provider_env``."""
    name = "llama_server" if request.param == 2048 else "llama_server_4096"
    return point_kernels_at(request.getfixturevalue(name), monkeypatch)


@pytest.fixture
def real_provider_env(llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """``OPENAI_BASE_URL`` at the server, no key, no default model, no replay: what kernels
    started in the test inherit."""
    return point_kernels_at(llama_server, monkeypatch)
