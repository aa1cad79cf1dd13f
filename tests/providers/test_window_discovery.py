"""Window discovery: each server's published window, read over real loopback HTTP from the fake
server playing that server (the formats are the ones in each server's documentation,
docs/context-windows.md); the runtime value wins over the model's own; answers are cached per base
URL and model; a slow server never blocks a prompt; the widget says where the window came from."""

from __future__ import annotations

import threading

import pytest

from ipyagent import Agent, CompactionSettings, Session
from ipyagent.agent.config import AgentConfig
from ipyagent.display.budget_widget import budget_facts, static_plain
from ipyagent.hooks import HookRegistry
from ipyagent.providers import OpenAIChatProvider, discovery, models, resolve_provider
from ipyagent.testing import FakeProviderServer

SERVED, TRAINED = 6144, 32768


pytestmark = pytest.mark.usefixtures("fresh_windows")


def probe(kind: str, model: str = "my-model", **server) -> tuple[discovery.Discovery, FakeProviderServer]:
    with FakeProviderServer(server_kind=kind, served_window=SERVED, trained_window=TRAINED, model=model,
                            **server) as fake:
        return discovery.probe(fake.provider(), model), fake


@pytest.mark.parametrize("kind,where", [
    ("openrouter", "GET /v1/models context_length"),
    ("together", "GET /v1/models context_length"),  # a bare JSON array of models
    ("groq", "GET /v1/models context_window"),
    ("vllm", "GET /v1/models max_model_len"),
    ("llamacpp", "GET /v1/models meta.n_ctx"),
    ("llamacpp-old", "GET /props default_generation_settings.n_ctx"),  # only n_ctx_train in its listing
    ("lmstudio", "GET /api/v0/models/my-model loaded_context_length"),
    ("ollama", "GET /api/ps context_length"),
])
def test_each_server_format_gives_the_window_it_runs_with(kind, where):
    found, fake = probe(kind)
    assert (found.window, found.where, found.provisional) == (SERVED, where, False)
    assert found.error == ""
    assert fake.meta_requests[-1][1] == where.split()[1]  # the search stopped at the first runtime value


def test_a_listing_without_a_window_and_no_other_source_says_so():
    for kind in ("openai", "llama-cpp-python"):
        found, fake = probe(kind)
        assert found.window is None and "publishes no context window for 'my-model'" in found.error
        assert ("GET", "/v1/models") in fake.meta_requests and ("POST", "/api/show") in fake.meta_requests


def test_the_models_own_window_is_only_a_fallback():
    with FakeProviderServer(server_kind="lmstudio", served_window=SERVED, trained_window=TRAINED,
                            model="my-model") as fake:
        fake.model_loaded = False  # LM Studio publishes only max_context_length then
        found = discovery.probe(fake.provider(), "my-model")
    assert (found.window, found.where) == (TRAINED, "GET /api/v0/models/my-model max_context_length")


def test_ollama_before_its_model_is_loaded():
    with FakeProviderServer(server_kind="ollama", served_window=SERVED, trained_window=TRAINED,
                            model="qwen2.5-coder:7b") as fake:
        fake.model_loaded = False
        fake.ollama_num_ctx = 8192  # the model's parameters say what it will run with
        found = discovery.probe(fake.provider(), "qwen2.5-coder:7b")
        assert (found.window, found.where, found.provisional) == (8192, "POST /api/show parameters num_ctx", False)

        fake.ollama_num_ctx = None  # nothing says: at most Ollama's default num_ctx, asked again later
        found = discovery.probe(fake.provider(), "qwen2.5-coder:7b")
        assert found.window == discovery.OLLAMA_DEFAULT_NUM_CTX and found.provisional
        assert "qwen2.context_length" in found.where and "default num_ctx" in found.where

        provider = fake.provider()
        first = discovery.discover(provider, "qwen2.5-coder:7b", wait=30)
        assert first is not None and first.provisional
        fake.model_loaded = True  # the first request loaded it: the next prompt asks again
        again = discovery.discover(provider, "qwen2.5-coder:7b", wait=30)
        assert again is not None and (again.window, again.where) == (SERVED, "GET /api/ps context_length")
        asked = len(fake.meta_requests)
        assert discovery.discover(provider, "qwen2.5-coder:7b", wait=30) is again  # settled: no more asking
        assert len(fake.meta_requests) == asked


@pytest.mark.parametrize("kind,endpoint", [("llamacpp", "POST /tokenize"), ("vllm", "POST /tokenize"),
                                           ("llama-cpp-python", "POST /extras/tokenize")])
def test_tokenizer_endpoints_count_the_sample(kind, endpoint):
    with FakeProviderServer(server_kind=kind, served_window=SERVED, model="my-model") as fake:
        fake.chars_per_token = 2.0
        found = discovery.probe(fake.provider(), "my-model", sample="x" * 1000)
    assert (found.sample_tokens, found.tokenizer) == (500, endpoint)


def make_agent(fake: FakeProviderServer, model: str = "my-model", **config) -> Agent:
    fake.register("fake")
    cfg = AgentConfig(model=f"fake:{model}", compaction=CompactionSettings(1000, 500), **config)
    return Agent(Session(hooks=HookRegistry()), config=cfg, tools=[], sleep=lambda s: None)


def test_the_agent_asks_once_per_base_url_and_model_and_the_widget_names_the_source():
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="my-model") as fake:
        agent = make_agent(fake)
        assert agent.window_info().window is None  # nothing asked yet
        fake.enqueue_text("one")
        fake.enqueue_text("two")
        assert agent.prompt("hello").error is None
        info = agent.window_info()
        assert (info.window, info.source, info.detail) == (SERVED, "server", "GET /v1/models max_model_len")
        asked = len(fake.meta_requests)
        assert agent.prompt("again").error is None
        assert len(fake.meta_requests) == asked  # cached for the session
        facts = budget_facts(agent.session, agent.config, window=info.window, window_source=info.describe())
        assert "window from the server (GET /v1/models max_model_len)" in static_plain(facts)
        assert f"/ {SERVED:,} tokens" in static_plain(facts)


def test_a_server_without_a_window_is_not_asked_again_and_the_reason_shows():
    with FakeProviderServer(server_kind="openai", model="my-model") as fake:
        agent = make_agent(fake)
        fake.enqueue_text("one")
        fake.enqueue_text("two")
        agent.prompt("hello")
        asked = len(fake.meta_requests)
        agent.prompt("again")
        assert len(fake.meta_requests) == asked
        info = agent.window_info()
        assert info.window is None and "publishes no context window" in info.describe()


def test_table_and_config_win_and_are_named():
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="gpt-4o") as fake:
        agent = make_agent(fake, model="gpt-4o")
        fake.enqueue_text("one")
        agent.prompt("hello")
        assert agent.window_info().source == "table" and agent.context_window() == 128_000
        assert agent.window_info().describe() == "window from the model table"
        agent.config.context_window = 4000
        assert (agent.context_window(), agent.window_info().source) == (4000, "config")
        assert "window from config" in agent.window_info().describe()


def test_a_local_model_family_takes_what_the_server_runs_it_with():
    # the table has qwen2.5-coder at its native 32k; this Ollama runs it with num_ctx 6144
    with FakeProviderServer(server_kind="ollama", served_window=SERVED, model="qwen2.5-coder:7b") as fake:
        agent = make_agent(fake, model="qwen2.5-coder:7b")
        fake.enqueue_text("one")
        agent.prompt("hello")
        assert (agent.context_window(), agent.window_info().source) == (SERVED, "server")


def test_an_overflow_error_caps_a_discovered_window():
    with FakeProviderServer(server_kind="groq", served_window=SERVED, model="my-model") as fake:
        agent = make_agent(fake)
        fake.enqueue_text("one")
        agent.prompt("hello")
        models.learn_window("fake", "my-model", 3000)
        info = agent.window_info()
        assert (info.window, info.source) == (3000, "error") and info.describe() == "window from an overflow error"


def test_a_slow_server_never_blocks_the_prompt(monkeypatch):
    monkeypatch.setattr(discovery, "PROBE_TIMEOUT", 60.0)
    monkeypatch.setattr(discovery, "DEFAULT_WAIT", 0.05)
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="my-model") as fake:
        fake.meta_gate = gate = threading.Event()  # every metadata request waits for the gate
        agent = make_agent(fake)
        fake.enqueue_text("answered while the server still thinks about its models")
        result = agent.prompt("hello")
        assert result.error is None and result.text.startswith("answered")
        provider = resolve_provider(agent.config.model)[0]
        assert discovery.cached(provider, "my-model") is None  # still on its way
        assert agent.window_info().window is None
        gate.set()
        assert discovery.discover(provider, "my-model", wait=30) is not None
        assert agent.context_window() == SERVED


def test_a_dead_server_is_a_remembered_failure():
    with FakeProviderServer() as fake:
        base = fake.openai_base_url
    provider = OpenAIChatProvider(base_url=base, api_key="k")  # nothing listens there any more
    found = discovery.discover(provider, "m", wait=30)
    assert found is not None and found.window is None and found.error
    assert discovery.discover(provider, "m", wait=30) is found


def test_url_credentials_never_reach_a_url_or_a_message():
    with FakeProviderServer(server_kind="openai", model="my-model") as fake:
        clean = fake.openai_base_url
        found = discovery.probe(OpenAIChatProvider(base_url=clean.replace("http://", "http://someone:s3cret-pass@")),
                                "my-model")
    assert found.window is None and ("GET", "/v1/models") in fake.meta_requests
    assert "s3cret-pass" not in found.error and "someone" not in found.error
    assert f"{clean} publishes no context window" in found.error
