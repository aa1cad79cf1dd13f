"""Window discovery: each server's published window, read over real loopback HTTP from the fake
server playing that server (the formats are the ones in each server's documentation,
docs/context-windows.md); the runtime value wins over the model's own; answers are cached per base
URL and model; a slow server never blocks a prompt; the widget says where the window came from."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ipyagent import AgentLoop, CompactionSettings, Session
from ipyagent.agent.run_config import RunConfig
from ipyagent.display.budget_widget import budget_facts, static_plain
from ipyagent.hooks import HookRegistry
from ipyagent.providers import OpenAIChatProvider, window_discovery
from ipyagent.providers.window_discovery import WindowDiscovery
from ipyagent.testing import FakeProviderServer

SERVED, TRAINED = 6144, 32768


def probe(kind: str, model: str = "my-model", **server) -> tuple[window_discovery.Discovery, FakeProviderServer]:
    with FakeProviderServer(server_kind=kind, served_window=SERVED, trained_window=TRAINED, model=model,
                            **server) as fake:
        return window_discovery.probe(fake.provider(), model), fake


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


def test_a_models_name_is_one_escaped_path_segment_of_a_discovery_url():
    """A model's name (a notebook may have recorded it) goes into LM Studio's URL escaped: it asks
    for that model, never for another endpoint of the server."""
    name = "../../v1/secret?x=1"
    _, fake = probe("lmstudio", model=name)
    assert ("GET", "/api/v0/models/..%2F..%2Fv1%2Fsecret%3Fx%3D1") in fake.meta_requests, fake.meta_requests
    assert all(path.startswith(("/v1/models", "/props", "/api/")) for _, path in fake.meta_requests)


def test_a_listing_without_a_window_and_no_other_source_says_so():
    for kind in ("openai", "llama-cpp-python"):
        found, fake = probe(kind)
        assert found.window is None and "publishes no context window for 'my-model'" in found.error
        assert ("GET", "/v1/models") in fake.meta_requests and ("POST", "/api/show") in fake.meta_requests


def test_the_models_own_window_is_only_a_fallback():
    with FakeProviderServer(server_kind="lmstudio", served_window=SERVED, trained_window=TRAINED,
                            model="my-model") as fake:
        fake.model_loaded = False  # LM Studio publishes only max_context_length then
        found = window_discovery.probe(fake.provider(), "my-model")
    assert (found.window, found.where) == (TRAINED, "GET /api/v0/models/my-model max_context_length")


def test_ollama_before_its_model_is_loaded():
    with FakeProviderServer(server_kind="ollama", served_window=SERVED, trained_window=TRAINED,
                            model="qwen2.5-coder:7b") as fake:
        fake.model_loaded = False
        fake.ollama_num_ctx = 8192  # the model's parameters say what it will run with
        found = window_discovery.probe(fake.provider(), "qwen2.5-coder:7b")
        assert (found.window, found.where, found.provisional) == (8192, "POST /api/show parameters num_ctx", False)

        fake.ollama_num_ctx = None  # nothing says: at most Ollama's default num_ctx, asked again later
        found = window_discovery.probe(fake.provider(), "qwen2.5-coder:7b")
        assert found.window == window_discovery.OLLAMA_DEFAULT_NUM_CTX and found.provisional
        assert "qwen2.context_length" in found.where and "default num_ctx" in found.where

        provider, cache = fake.provider(), WindowDiscovery()
        first = cache.discover(provider, "qwen2.5-coder:7b", wait=30)
        assert first is not None and first.provisional
        fake.model_loaded = True  # the first request loaded it: the next prompt asks again
        again = cache.discover(provider, "qwen2.5-coder:7b", wait=30)
        assert again is not None and (again.window, again.where) == (SERVED, "GET /api/ps context_length")
        asked = len(fake.meta_requests)
        assert cache.discover(provider, "qwen2.5-coder:7b", wait=30) is again  # settled: no more asking
        assert len(fake.meta_requests) == asked


@pytest.mark.parametrize("kind,endpoint", [("llamacpp", "POST /tokenize"), ("vllm", "POST /tokenize"),
                                           ("llama-cpp-python", "POST /extras/tokenize")])
def test_tokenizer_endpoints_count_the_sample(kind, endpoint):
    with FakeProviderServer(server_kind=kind, served_window=SERVED, model="my-model") as fake:
        fake.chars_per_token = 2.0
        found = window_discovery.probe(fake.provider(), "my-model", sample="x" * 1000)
    assert (found.sample_tokens, found.tokenizer) == (500, endpoint)


def make_agent(fake: FakeProviderServer, model: str = "my-model", **config) -> AgentLoop:
    cfg = RunConfig(model=f"fake:{model}", compaction=CompactionSettings(1000, 500), **config)
    return AgentLoop(Session(hooks=HookRegistry()), config=cfg, tools=[], sleep=lambda s: None,
                     providers=fake.register("fake"))


def test_the_agent_asks_once_per_base_url_and_model_and_the_widget_names_the_source():
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="my-model") as fake:
        agent = make_agent(fake)
        assert agent.budget.window_info().window is None  # nothing asked yet
        fake.enqueue_text("one")
        fake.enqueue_text("two")
        assert agent.prompt("hello").error is None
        info = agent.budget.window_info()
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
        info = agent.budget.window_info()
        assert info.window is None and "publishes no context window" in info.describe()


def test_table_and_config_win_and_are_named():
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="gpt-4o") as fake:
        agent = make_agent(fake, model="gpt-4o")
        fake.enqueue_text("one")
        agent.prompt("hello")
        assert agent.budget.window_info().source == "table" and agent.budget.window() == 128_000
        assert agent.budget.window_info().describe() == "window from the model table"
        agent.config.context_window = 4000
        assert (agent.budget.window(), agent.budget.window_info().source) == (4000, "config")
        assert "window from config" in agent.budget.window_info().describe()


def test_a_local_model_family_takes_what_the_server_runs_it_with():
    # the table has qwen2.5-coder at its native 32k; this Ollama runs it with num_ctx 6144
    with FakeProviderServer(server_kind="ollama", served_window=SERVED, model="qwen2.5-coder:7b") as fake:
        agent = make_agent(fake, model="qwen2.5-coder:7b")
        fake.enqueue_text("one")
        agent.prompt("hello")
        assert (agent.budget.window(), agent.budget.window_info().source) == (SERVED, "server")


def test_an_overflow_error_caps_a_discovered_window():
    with FakeProviderServer(server_kind="groq", served_window=SERVED, model="my-model") as fake:
        agent = make_agent(fake)
        fake.enqueue_text("one")
        agent.prompt("hello")
        agent.providers.models.learn_window("fake", "my-model", 3000)
        info = agent.budget.window_info()
        assert (info.window, info.source) == (3000, "error") and info.describe() == "window from an overflow error"


def test_a_slow_server_never_blocks_the_prompt(monkeypatch):
    monkeypatch.setattr(window_discovery, "PROBE_TIMEOUT", 60.0)
    monkeypatch.setattr(window_discovery, "REQUEST_DEADLINE", 120.0)
    monkeypatch.setattr(window_discovery, "PROBE_DEADLINE", 120.0)
    monkeypatch.setattr(window_discovery, "DEFAULT_WAIT", 0.05)
    with FakeProviderServer(server_kind="vllm", served_window=SERVED, model="my-model") as fake:
        fake.meta_gate = gate = threading.Event()  # every metadata request waits for the gate
        agent = make_agent(fake)
        fake.enqueue_text("answered while the server still thinks about its models")
        result = agent.prompt("hello")
        assert result.error is None and result.text.startswith("answered")
        provider = agent.providers.resolve(agent.config.model)[0]
        assert agent.providers.discovery.cached(provider, "my-model") is None  # still on its way
        assert agent.budget.window_info().window is None
        gate.set()
        assert agent.providers.discovery.discover(provider, "my-model", wait=30) is not None
        assert agent.budget.window() == SERVED


def test_a_dead_server_is_a_remembered_failure():
    with FakeProviderServer() as fake:
        base = fake.openai_base_url
    provider, cache = OpenAIChatProvider(base_url=base, api_key="k"), WindowDiscovery()  # nothing listens there
    found = cache.discover(provider, "m", wait=30)
    assert found is not None and found.window is None and found.error
    assert cache.discover(provider, "m", wait=30) is found


def test_url_credentials_never_reach_a_url_or_a_message():
    with FakeProviderServer(server_kind="openai", model="my-model") as fake:
        clean = fake.openai_base_url
        found = window_discovery.probe(OpenAIChatProvider(base_url=clean.replace("http://", "http://someone:s3cret-pass@")),
                                "my-model")
    assert found.window is None and ("GET", "/v1/models") in fake.meta_requests
    assert "s3cret-pass" not in found.error and "someone" not in found.error
    assert f"{clean} publishes no context window" in found.error


# ---- hostile servers (issue 19, section 5) ----------------------------------------------------


@contextmanager
def loopback(answer: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on loopback whose every request ``answer`` handles; yields its OpenAI
    base URL and the paths asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            asked.append(self.path)
            answer(self)

        do_POST = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", asked
    finally:
        server.shutdown()
        server.server_close()


def trickling(paths: tuple[str, ...], stop: threading.Event) -> Callable[[BaseHTTPRequestHandler], None]:
    """Headers at once, then a JSON body one byte a second, never finished (for ``paths``); 404 else."""
    def answer(handler: BaseHTTPRequestHandler) -> None:
        if not handler.path.startswith(paths):
            handler.send_response(404)
            handler.send_header("content-length", "0")
            handler.end_headers()
            return
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", "100000")
        handler.end_headers()
        body = b'{"data": [' + b" " * 99_990
        try:
            for byte in body:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                if stop.wait(1.0):
                    return
        except OSError:
            return  # the client hung up: what the deadline is for
    return answer


def json_routes(routes: dict[str, object]) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0]
        found = path in routes
        body = json.dumps(routes[path]).encode() if found else b""
        handler.send_response(200 if found else 404)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return answer


def _discovery_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ipyagent-window-discovery"]


def test_a_server_trickling_its_models_one_byte_a_second_is_cut_off_and_remembered():
    before = set(_discovery_threads())
    stop = threading.Event()
    with loopback(trickling(("/v1/models",), stop)) as (base, asked):
        provider, cache = OpenAIChatProvider(base_url=base, api_key="k"), WindowDiscovery()
        cache.discover(provider, "m", wait=0.0)  # what a prompt starts
        probe_threads = set(_discovery_threads()) - before
        assert len(probe_threads) == 1
        for thread in probe_threads:
            thread.join(60)  # the probe's own deadline ends it (a safety net for the test only)
            assert not thread.is_alive()
        found = cache.cached(provider, "m")
        assert found is not None and found.window is None
        assert "no whole answer within 3 s" in found.error and found.error.startswith(f"{base} publishes no")
        assert asked.count("/v1/models") == 1
        # remembered: the next prompts neither ask nor wait
        assert cache.discover(provider, "m") is found
        assert cache.discover(provider, "m") is found
        assert asked.count("/v1/models") == 1
    stop.set()


def test_a_server_trickling_every_answer_ends_the_probe_at_its_deadline():
    stop = threading.Event()
    with loopback(trickling(("/",), stop)) as (base, asked):
        found = window_discovery.probe(OpenAIChatProvider(base_url=base, api_key="k"), "m", sample="count me")
    stop.set()
    assert found.window is None and found.sample_tokens is None
    # 3 s a request, 8 s in all: the first three requests are cut off, the rest not asked
    assert len(asked) == 3, asked
    assert "no whole answer within 3 s" in found.error


@pytest.mark.parametrize("published", [1, 255, 1e308, 10**18, "9" * 31, "²", "1e9", -4096, True, [8192], "abc",
                                       float("nan")])
def test_a_value_that_is_no_window_is_skipped_with_a_note_and_the_next_field_read(published):
    listing = {"data": [{"id": "m", "context_length": published, "max_context_length": 16384}]}
    with loopback(json_routes({"/v1/models": listing})) as (base, asked):
        found = window_discovery.probe(OpenAIChatProvider(base_url=base, api_key="k"), "m")
    # the model's own window (the next field) is what is left; the bad value is named
    assert found.window == 16384 and found.where.startswith("GET /v1/models max_context_length (")
    assert "GET /v1/models context_length = " in found.where and "skipped" in found.where
    assert found.notes and "256–100,000,000 tokens" in found.notes[0]


@pytest.mark.parametrize("published", [256, 100_000_000, 131072.0, " 32768 "])
def test_windows_between_256_and_100_million_tokens_are_taken(published):
    listing = {"data": [{"id": "m", "context_length": published}]}
    with loopback(json_routes({"/v1/models": listing})) as (base, asked):
        found = window_discovery.probe(OpenAIChatProvider(base_url=base, api_key="k"), "m")
    assert found.window == int(published) and found.where == "GET /v1/models context_length" and not found.notes


def test_a_bad_field_in_one_source_does_not_abort_the_probe():
    routes = {"/v1/models": {"data": [{"id": "m", "meta": {"n_ctx": "²"}}]},
              "/props": {"default_generation_settings": {"n_ctx": 1}},
              "/api/ps": {"models": [{"name": "m:latest", "context_length": 6144}]}}
    with loopback(json_routes(routes)) as (base, asked):
        found = window_discovery.probe(OpenAIChatProvider(base_url=base, api_key="k"), "m")
    assert found.window == 6144 and found.where.startswith("GET /api/ps context_length (")
    assert len(found.notes) == 2 and "'²'" in found.notes[0] and "= 1 skipped" in found.notes[1]


def test_a_probe_stuck_past_its_deadline_is_given_up_and_remembered(monkeypatch):
    """A server trickling even its status line holds the request below any read timeout; the
    prompts stop waiting for that probe once it overran its deadline (made short here: the
    deadline is what this test is about)."""
    monkeypatch.setattr(window_discovery, "PROBE_DEADLINE", 0.5)
    stop = threading.Event()

    def status_line_by_the_byte(handler: BaseHTTPRequestHandler) -> None:
        try:
            for byte in b"HTTP/1.1 200 OK\r\n" * 100:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                if stop.wait(0.2):  # faster than any read timeout
                    return
        except OSError:
            return

    with loopback(status_line_by_the_byte) as (base, asked):
        provider, cache = OpenAIChatProvider(base_url=base, api_key="k"), WindowDiscovery()
        found = None
        for _ in range(300):  # each call waits at most 0.2 s, as a prompt would wait its 2 s
            found = cache.discover(provider, "m", wait=0.2)
            if found is not None:
                break
        assert found is not None and found.window is None
        assert found.error == f"{base} did not answer within 0.5 s"
        assert cache.discover(provider, "m") is found and asked == ["/v1/models"]
    stop.set()
