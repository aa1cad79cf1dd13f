"""What the fake server says about its model when it plays a given server: the model listing,
llama.cpp's ``/props``, LM Studio's ``/api/v0/models/{id}``, Ollama's ``/api/ps`` and
``/api/show``, and the tokenizer endpoints (llama.cpp and vLLM ``/tokenize``, llama-cpp-python
``/extras/tokenize``). Shapes follow each server's documentation (docs/context-windows.md).

``answer(kind, method, path, body, facts)`` returns ``(status, json)`` or None (no such route for
that kind: the server answers 404).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

KINDS = ("openai", "openrouter", "together", "groq", "vllm", "lmstudio", "llamacpp", "llamacpp-old", "ollama",
         "llama-cpp-python")


@dataclass
class ModelFacts:
    model: str
    served: int | None  # the window the server enforces
    trained: int | None  # the model's own window
    loaded: bool = True  # Ollama / LM Studio: the model is in memory
    num_ctx: int | None = None  # Ollama: num_ctx in the model's parameters
    chars_per_token: float = 4.0  # the tokenizer endpoints count ceil(chars / this)


def _count(text: Any, facts: ModelFacts) -> int:
    return math.ceil(len(text if isinstance(text, str) else "") / facts.chars_per_token)


def _listing(kind: str, f: ModelFacts) -> Any:
    entry: dict[str, Any] = {"id": f.model, "object": "model", "created": 1730000000, "owned_by": "fake"}
    if kind == "openrouter":
        entry.update(name=f"Fake: {f.model}", context_length=f.served,
                     top_provider={"context_length": f.served, "max_completion_tokens": 4096, "is_moderated": False},
                     pricing={"prompt": "0.000001", "completion": "0.000002"})
    elif kind == "together":
        entry.update(type="chat", display_name=f.model, context_length=f.served,
                     pricing={"input": 0.2, "output": 0.2})
        return [entry]  # Together lists its models as a bare array
    elif kind == "groq":
        entry.update(owned_by="Fake", active=True, context_window=f.served, max_completion_tokens=8192)
    elif kind == "vllm":
        entry.update(owned_by="vllm", root=f.model, parent=None, max_model_len=f.served)
    elif kind in ("llamacpp", "llamacpp-old"):
        meta: dict[str, Any] = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": f.trained, "n_embd": 576,
                                "n_params": 134515008, "size": 98362432}
        if kind == "llamacpp":
            meta["n_ctx"] = f.served
        entry.update(owned_by="llamacpp", meta=meta)
    elif kind == "llama-cpp-python":
        entry = {"id": f.model, "object": "model", "owned_by": "me", "permissions": []}
    elif kind == "ollama":
        entry["owned_by"] = "library"
    return {"object": "list", "data": [entry]}


def _lmstudio_entry(f: ModelFacts) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": f.model, "object": "model", "type": "llm", "publisher": "fake", "arch": "llama",
                             "compatibility_type": "gguf", "quantization": "Q4_K_M",
                             "state": "loaded" if f.loaded else "not-loaded", "max_context_length": f.trained}
    if f.loaded:
        entry["loaded_context_length"] = f.served
    return entry


def _ollama_show(f: ModelFacts) -> dict[str, Any]:
    parameters = 'stop "<|im_end|>"'
    if f.num_ctx:
        parameters = f"num_ctx {f.num_ctx}\n{parameters}"
    return {"modelfile": "# fake", "parameters": parameters, "template": "{{ .Prompt }}",
            "details": {"format": "gguf", "family": "qwen2", "parameter_size": "7.6B", "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "qwen2", "general.parameter_count": 7615616512,
                           "qwen2.context_length": f.trained, "qwen2.embedding_length": 3584},
            "capabilities": ["completion", "tools"]}


def _ollama_ps(f: ModelFacts) -> dict[str, Any]:
    if not f.loaded:
        return {"models": []}
    return {"models": [{"name": f.model, "model": f.model, "size": 5618579456, "digest": "0" * 64,
                        "details": {"format": "gguf", "family": "qwen2"}, "expires_at": "2030-01-01T00:00:00Z",
                        "size_vram": 5618579456, "context_length": f.served}]}


def answer(kind: str | None, method: str, path: str, body: Any, f: ModelFacts) -> tuple[int, Any] | None:
    kind = kind or "openai"
    if method == "GET" and path == "/v1/models":
        return 200, _listing(kind, f)
    if kind in ("llamacpp", "llamacpp-old"):
        if method == "GET" and path == "/props":
            return 200, {"default_generation_settings": {"n_ctx": f.served, "params": {"temperature": 0.8}},
                         "total_slots": 1, "model_path": f"/models/{f.model}.gguf"}
        if method == "POST" and path == "/tokenize":
            if not isinstance(body, dict) or "content" not in body:
                return 400, {"error": {"code": 400, "message": '"content" must be provided',
                                       "type": "invalid_request_error"}}
            return 200, {"tokens": list(range(_count(body["content"], f)))}
    if kind == "vllm" and method == "POST" and path == "/tokenize":
        if not isinstance(body, dict) or "prompt" not in body:
            return 400, {"object": "error", "message": "prompt: Field required", "type": "BadRequestError", "code": 400}
        n = _count(body["prompt"], f)
        return 200, {"count": n, "max_model_len": f.served, "tokens": list(range(n))}
    if kind == "llama-cpp-python" and method == "POST" and isinstance(body, dict):
        if path == "/extras/tokenize":
            return 200, {"tokens": list(range(_count(body.get("input"), f)))}
        if path == "/extras/tokenize/count":
            return 200, {"count": _count(body.get("input"), f)}
    if kind == "lmstudio" and method == "GET":
        if path == "/api/v0/models":
            return 200, {"object": "list", "data": [_lmstudio_entry(f)]}
        if path == f"/api/v0/models/{f.model}":
            return 200, _lmstudio_entry(f)
    if kind == "ollama":
        if method == "GET" and path == "/api/ps":
            return 200, _ollama_ps(f)
        if method == "POST" and path == "/api/show":
            if not isinstance(body, dict) or body.get("model") not in (f.model, f"{f.model}:latest"):
                return 404, {"error": f"model '{(body or {}).get('model')}' not found"}
            return 200, _ollama_show(f)
    return None
