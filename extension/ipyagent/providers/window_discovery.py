"""Asking an OpenAI-compatible server for a model's context window, when the model table has none.

The sources, asked in this order (docs/context-windows.md cites each server's documentation):

* ``GET {base}/models``, the entry of the model: ``loaded_context_length`` (LM Studio),
  ``meta.n_ctx`` (llama.cpp server), ``max_model_len`` (vLLM), ``context_window`` (Groq),
  ``context_length`` (OpenRouter, Together), and, as what the model was trained for only,
  ``max_context_length`` (LM Studio) and ``meta.n_ctx_train`` (llama.cpp server);
* ``GET {root}/props``: ``default_generation_settings.n_ctx`` (llama.cpp server);
* ``GET {root}/api/v0/models/{model}``: ``loaded_context_length`` / ``max_context_length`` (LM Studio);
* ``GET {root}/api/ps`` (``context_length`` of a loaded model) and ``POST {root}/api/show``
  (``num_ctx`` in ``parameters``, else ``model_info["<arch>.context_length"]``) (Ollama).

``root`` is the base URL without its ``/v1``. A *runtime* value (what the server enforces now)
ends the search; a model's own window is kept only when nothing better answers, because local
servers often run a model with less (Ollama's ``num_ctx``, llama.cpp's ``--ctx-size``) and then
truncate or fail. Ollama with its model not loaded yet gets its default ``num_ctx`` (4096) at most,
and is asked again at the next prompt.

Discovery runs in a thread with short timeouts; a caller waits at most ``wait`` seconds, so a slow
or dead server never blocks a prompt. Each request has an overall deadline (``REQUEST_DEADLINE``:
a server trickling its answer a byte a second is cut off, not waited for read by read) and so has
the whole probe (``PROBE_DEADLINE``); a probe still under way after that counts as failed, so no
later prompt waits for it. A window is taken only between ``MIN_WINDOW`` and ``MAX_WINDOW``
tokens; any other value (``1``, ``1e308``, ``"²"``) is skipped with a note and the next field is
read. Answers, failures included, are cached per base URL and model by a :class:`WindowDiscovery`,
which a provider registry holds (the kernel's: for the life of the kernel).
The same thread counts a sample text with the server's tokenizer where it has one (``POST
/tokenize`` of llama.cpp and vLLM, ``POST /extras/tokenize`` of llama-cpp-python), for calibrating
the chars/4 estimate.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import httpx

from ipyagent.providers.transport.http import new_client, strip_url_credentials

PROBE_TIMEOUT = 1.5  # seconds one connect or read may wait
REQUEST_DEADLINE = 3.0  # seconds one request may take in all, its answer read to the end
PROBE_DEADLINE = 8.0  # seconds one probe may take in all, every request included
MAX_ANSWER_BYTES = 16 * 1024 * 1024  # a model listing larger than this is not read
DEFAULT_WAIT = 2.0  # seconds a prompt waits for a discovery under way
MIN_WINDOW, MAX_WINDOW = 256, 100_000_000  # tokens: any other published value is no window
OLLAMA_DEFAULT_NUM_CTX = 4096  # Ollama's default num_ctx (docs/context-length.mdx), when nothing says more

# (path in the model's entry, runtime?) in order of preference
_LISTING_FIELDS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("loaded_context_length",), True),  # LM Studio
    (("meta", "n_ctx"), True),  # llama.cpp server
    (("max_model_len",), True),  # vLLM
    (("context_window",), True),  # Groq
    (("context_length",), True),  # OpenRouter, Together
    (("max_context_length",), False),  # LM Studio: the model's own maximum
    (("meta", "n_ctx_train"), False),  # llama.cpp server: what the model was trained for
)


@dataclass(frozen=True)
class Found:
    window: int
    where: str  # the endpoint and field that said so, e.g. "GET /v1/models max_model_len"
    runtime: bool = True  # what the server enforces now (else the model's own window)


@dataclass
class Discovery:
    """What a server said about one model."""

    window: int | None = None
    where: str = ""
    error: str = ""  # why there is no window
    provisional: bool = False  # worth asking again later (Ollama before the model is loaded)
    sample: str = ""  # the text counted with the server's tokenizer
    sample_tokens: int | None = None
    tokenizer: str = ""  # the endpoint that counted it
    server: str = ""  # the server, where an endpoint only it has answered ("llama-cpp-python")
    notes: list[str] = field(default_factory=list)  # published values skipped as no window


# ---- reading each server's answer (pure) ---------------------------------------------------------


_DIGITS = re.compile(r"\s*([0-9]{1,12})\s*")


def window_value(value: Any, where: str, notes: list[str] | None = None) -> int | None:
    """``value`` as a window: a whole number of tokens between ``MIN_WINDOW`` and ``MAX_WINDOW``
    (an integer, an integral float, or a string of ASCII digits). Anything else present is skipped,
    with a note in ``notes`` naming ``where`` and the value; None also when it is absent."""
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value) if abs(value) < 1e15 else None
    elif isinstance(value, str) and (digits := _DIGITS.fullmatch(value)) is not None:
        number = int(digits.group(1))  # at most 12 digits: no huge-integer conversion
    if number is not None and MIN_WINDOW <= number <= MAX_WINDOW:
        return number
    if notes is not None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        notes.append(f"{where} = {shown} skipped (a window is {MIN_WINDOW:,}–{MAX_WINDOW:,} tokens)")
    return None


def _dig(entry: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(entry, dict):
            return None
        entry = entry.get(key)
    return entry


def _entries(listing: Any) -> list[dict[str, Any]]:
    """The model entries of a listing: OpenAI's ``{"data": […]}`` or Together's bare list."""
    data = listing.get("data") if isinstance(listing, dict) else listing
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _same_model(listed: str, model: str) -> bool:
    listed, model = listed.lower(), model.lower()
    return listed == model or listed.rsplit("/", 1)[-1] == model.rsplit("/", 1)[-1]


def model_entry(listing: Any, model: str) -> dict[str, Any] | None:
    """The listing's entry for ``model``; a server listing a single model serves it whatever the
    name (llama.cpp, llama-cpp-python)."""
    entries = _entries(listing)
    for entry in entries:
        if isinstance(entry.get("id"), str) and _same_model(entry["id"], model):
            return entry
    return entries[0] if len(entries) == 1 else None


def server_of_entry(entry: Any) -> str:
    """The server a model listing's entry comes from, where its shape says so: llama-cpp-python
    lists ``{"id", "object", "owned_by": "me", "permissions": []}`` (its ``ModelData``)."""
    if isinstance(entry, dict) and entry.get("owned_by") == "me" and entry.get("permissions") == [] \
            and set(entry) <= {"id", "object", "owned_by", "permissions"}:
        return "llama-cpp-python"
    return ""


def window_from_entry(entry: dict[str, Any], where: str, notes: list[str] | None = None) -> Found | None:
    """The best window field of one model entry (``where`` names the endpoint); a field whose
    value is no window is skipped (noted in ``notes``) and the next one read."""
    for path, runtime in _LISTING_FIELDS:
        value = window_value(_dig(entry, path), f"{where} {'.'.join(path)}", notes)
        if value:
            return Found(value, f"{where} {'.'.join(path)}", runtime)
    return None


def window_from_props(props: Any, notes: list[str] | None = None) -> Found | None:
    where = "GET /props default_generation_settings.n_ctx"
    value = window_value(_dig(props, ("default_generation_settings", "n_ctx")), where, notes)
    return Found(value, where) if value else None


def _ollama_names(model: str) -> set[str]:
    return {model, model if ":" in model else f"{model}:latest"}


def window_from_ollama_ps(ps: Any, model: str, notes: list[str] | None = None) -> Found | None:
    names = _ollama_names(model)
    models = _dig(ps, ("models",))
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and (entry.get("name") in names or entry.get("model") in names):
            value = window_value(entry.get("context_length"), "GET /api/ps context_length", notes)
            if value:
                return Found(value, "GET /api/ps context_length")
    return None


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\S+)\s*$", re.MULTILINE)


def window_from_ollama_show(show: Any, notes: list[str] | None = None) -> Found | None:
    """``num_ctx`` from the model's parameters (what the server will run it with), else the
    model's own window from ``model_info`` (capped later at Ollama's default ``num_ctx``)."""
    if not isinstance(show, dict):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        found = _NUM_CTX.search(parameters)
        where = "POST /api/show parameters num_ctx"
        value = window_value(found.group(1), where, notes) if found else None
        if value:
            return Found(value, where)
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, raw in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                value = window_value(raw, f"POST /api/show model_info {key}", notes)
                if value:
                    return Found(value, f"POST /api/show model_info {key}", runtime=False)
    return None


def tokens_from_answer(answer: Any) -> int | None:
    """A tokenizer endpoint's count: ``count`` (vLLM, llama-cpp-python's ``/count``) or the length
    of ``tokens`` (llama.cpp, llama-cpp-python)."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


# ---- asking -----------------------------------------------------------------------------------


def server_root(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base.removesuffix("/v1")


class _Prober:
    def __init__(self, client: httpx.Client, base_url: str, headers: dict[str, str]):
        self.client, self.base, self.root, self.headers = client, base_url.rstrip("/"), server_root(base_url), headers
        self.failures: list[str] = []
        self.notes: list[str] = []  # published values skipped as no window
        self.server = ""
        self.deadline = time.monotonic() + PROBE_DEADLINE

    def json(self, method: str, url: str, body: Any = None) -> Any:
        """The JSON answer, or None (and why, in ``failures``). The answer is read as it comes,
        against the request's overall deadline: a timeout per read alone lets a server that sends
        a byte a second hold the request forever."""
        now = time.monotonic()
        if now >= self.deadline:
            self.failures.append(f"{method} {url}: not asked, the probe's {PROBE_DEADLINE:g} s were up")
            return None
        until = min(now + REQUEST_DEADLINE, self.deadline)
        chunks: list[bytes] = []
        try:
            with self.client.stream(method, url, json=body, headers=self.headers,
                                    timeout=min(PROBE_TIMEOUT, until - now)) as response:
                if response.status_code >= 400:
                    self.failures.append(f"{method} {url}: HTTP {response.status_code}")
                    return None
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        self.failures.append(f"{method} {url}: answer over {MAX_ANSWER_BYTES // 2**20} MB")
                        return None
                    if time.monotonic() > until:
                        self.failures.append(f"{method} {url}: no whole answer within {REQUEST_DEADLINE:g} s")
                        return None
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            self.failures.append(f"{method} {url}: {type(exc).__name__}")
            return None
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            self.failures.append(f"{method} {url}: not JSON")
            return None

    def window(self, model: str) -> tuple[Found | None, bool]:
        """(the best answer, provisional?)."""
        fallback: Found | None = None
        path = self.base[len(self.root):] or ""
        entry = model_entry(self.json("GET", f"{self.base}/models"), model)
        self.server = server_of_entry(entry)
        found = window_from_entry(entry, f"GET {path}/models", self.notes) if entry else None
        if found and found.runtime:
            return found, False
        fallback = fallback or found
        found = window_from_props(self.json("GET", f"{self.root}/props"), self.notes)
        if found:
            return found, False
        # the name is one path segment, escaped: a model named "../x?y" asks for no other endpoint
        studio = self.json("GET", f"{self.root}/api/v0/models/{urllib.parse.quote(model, safe='')}")
        found = (window_from_entry(studio, f"GET /api/v0/models/{model}", self.notes) if isinstance(studio, dict)
                 else None)
        if found and found.runtime:
            return found, False
        fallback = fallback or found
        found = window_from_ollama_ps(self.json("GET", f"{self.root}/api/ps"), model, self.notes)
        if found:
            return found, False
        show = self.json("POST", f"{self.root}/api/show", {"model": model, "name": model})  # "name": older Ollama
        found = window_from_ollama_show(show, self.notes)
        if found and found.runtime:
            return found, False
        if found:  # Ollama runs a model that is not loaded yet with its default num_ctx
            capped = min(found.window, OLLAMA_DEFAULT_NUM_CTX)
            return Found(capped, f"{found.where}, at most Ollama's default num_ctx {OLLAMA_DEFAULT_NUM_CTX}",
                         runtime=False), True
        return fallback, False

    def count(self, model: str, text: str) -> tuple[int, str] | None:
        for url, body in ((f"{self.root}/tokenize", {"content": text}),  # llama.cpp server
                          (f"{self.root}/tokenize", {"model": model, "prompt": text}),  # vLLM
                          (f"{self.root}/extras/tokenize", {"input": text})):  # llama-cpp-python
            tokens = tokens_from_answer(self.json("POST", url, body))
            if tokens:
                return tokens, f"POST {url[len(self.root):]}"
        return None


def _probe_target(provider: Any) -> tuple[str, dict[str, str]]:
    """The base URL without credentials and the headers to ask with: the provider's own path
    (``request_target``), so a key, configured headers and a base URL's ``user:password@`` are
    handled exactly as for its requests."""
    try:
        key = provider.api_key()
    except Exception:  # noqa: BLE001 - no key configured: ask anyway, local servers need none
        key = None
    base, headers = provider.request_target(provider.base_url, key)
    headers = {name: value for name, value in headers.items() if name.lower() not in ("accept", "content-type")}
    return base, {"accept": "application/json", **headers}


def probe(provider: Any, model: str, sample: str = "") -> Discovery:
    """Ask the server behind ``provider`` (blocking; short timeouts)."""
    base, headers = _probe_target(provider)
    client = new_client(httpx.Timeout(PROBE_TIMEOUT))
    try:
        prober = _Prober(client, base, headers)
        found, provisional = prober.window(model)
        result = Discovery(provisional=provisional, sample=sample, notes=prober.notes, server=prober.server)
        skipped = f" ({'; '.join(prober.notes[:3])})" if prober.notes else ""
        if found:
            result.window, result.where = found.window, found.where + skipped
        else:
            late = [f for f in prober.failures if "within" in f or "were up" in f]
            result.error = f"{base} publishes no context window for {model!r}{skipped}" + (
                f"; {late[0]}" if late else "")
        counted = prober.count(model, sample) if sample else None
        if counted:
            result.sample_tokens, result.tokenizer = counted
            if result.tokenizer == "POST /extras/tokenize":
                result.server = "llama-cpp-python"
        return result
    finally:
        client.close()


# ---- the cache --------------------------------------------------------------------------------


def supports_discovery(provider: Any) -> bool:
    return (bool(getattr(provider, "discovers_window", False)) and isinstance(getattr(provider, "base_url", None), str)
            and callable(getattr(provider, "request_target", None)))


class WindowDiscovery:
    """What servers said, per base URL and model, and the probes under way (each in a thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], Discovery] = {}
        self._running: dict[tuple[str, str], tuple[threading.Thread, float]] = {}  # and when it started

    def cached(self, provider: Any, model: str) -> Discovery | None:
        """The cached answer for this provider's base URL and ``model`` (never asks)."""
        if not supports_discovery(provider):
            return None
        with self._lock:
            return self._cache.get((provider.base_url, model))

    def discover(self, provider: Any, model: str, *, sample: str = "", wait: float = DEFAULT_WAIT) -> Discovery | None:
        """Start asking unless the answer is cached (or being fetched); wait at most ``wait`` seconds.
        Returns the answer, or None while it is still on its way. A probe still running well past
        ``PROBE_DEADLINE`` (a server stuck in a way no read timeout sees) is given up: its failure is
        remembered, and nobody waits for it again."""
        if not supports_discovery(provider):
            return None
        key = (provider.base_url, model)
        with self._lock:
            known = self._cache.get(key)
            if known is not None and not known.provisional:
                return known
            running = self._running.get(key)
            if running is not None and time.monotonic() - running[1] > PROBE_DEADLINE + 2 * PROBE_TIMEOUT:
                self._running.pop(key)
                self._cache[key] = known = Discovery(error=f"{strip_url_credentials(provider.base_url)} did not "
                                                           f"answer within {PROBE_DEADLINE:g} s")
                return known
            if running is None:
                if known is not None:
                    known.provisional = False  # ask again once, then keep whatever comes
                thread = threading.Thread(target=self._run, args=(key, provider, model, sample),
                                          name="ipyagent-window-discovery", daemon=True)
                running = self._running[key] = (thread, time.monotonic())
                thread.start()
        running[0].join(max(0.0, wait))
        with self._lock:
            return self._cache.get(key) if key not in self._running else None

    def _run(self, key: tuple[str, str], provider: Any, model: str, sample: str) -> None:
        try:
            result = probe(provider, model, sample)
        except Exception as exc:  # noqa: BLE001 - discovery never breaks a prompt
            result = Discovery(error=f"discovery failed: {type(exc).__name__}: {strip_url_credentials(str(exc))}")
        with self._lock:
            mine = key in self._running and self._running[key][0] is threading.current_thread()
            if mine:
                self._running.pop(key)
            elif not result.window:
                return  # given up on already: its failure is remembered
            previous = self._cache.get(key)
            if previous is not None and previous.window and not result.window:
                result.window, result.where = previous.window, previous.where
            self._cache[key] = result

    def clear(self) -> None:
        """Forget every answer (a server restarted with another window)."""
        with self._lock:
            self._cache.clear()
