"""Context windows, output limits and the reasoning flag of popular models.

Numbers are from the table in reference/peers.md §2f, which cites: Codex ``openai_model_info.rs``
(GPT-4.1, GPT-4o, GPT-5 272k input, o3/o4-mini, gpt-oss), Anthropic's models overview and
platform.claude.com model pages (Claude 3.x/4.x), models.dev (Opus/Sonnet 4.6), the Vertex and
gemini-cli docs (Gemini 2.5), and the Hugging Face model cards (Qwen, Llama). For local models the
window is the one the *server* enforces (Ollama ``num_ctx``, vLLM ``--max-model-len``), so local
entries use the native window without YaRN, and overflow errors can teach the real one
(``learn_window``).

``vision`` marks models that accept images (tool results with plots, image attachments), from the
same vendor pages: every GPT-4.1/4o/5 and o1/o3/o4-mini, Claude 3.5 Sonnet and later, Gemini 2.5;
not o3-mini, gpt-oss, Claude 3.5 Haiku or the local text models. A model the table does not know
is taken as text-only (``set_override(…, vision=True)`` says otherwise): images sent to a text-only
server fail the whole request, while an omitted image only costs the model a look.

Where the table has no entry (or lists a local family), the agent asks the server itself
(``providers/window_discovery.py``; docs/context-windows.md cites each server's fields).

Lookup is by model id with longest-prefix matching, so dated ids (``claude-sonnet-4-5-20250929``,
``gpt-4o-2024-08-06``) and Ollama tags (``qwen2.5-coder:7b``) find their family. Precedence: a
configured override, else the table; a learned window caps either (a server can only be as
large as it says it is).

The table is constant; the overrides and the learned windows are a :class:`ModelTable`'s, which a
provider registry holds (``providers/registry.py``: the kernel's belongs to its runtime's plugin
manager, and the user's ``set_override`` reaches every one through the user's registry).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypedDict

__all__ = ["MODELS", "ModelInfo", "ModelTable", "table_info"]


@dataclass(frozen=True)
class ModelInfo:
    id: str
    context_window: int
    max_output: int
    reasoning: bool = False
    vendor: str = ""
    vision: bool = False


def _m(vendor: str, ids: str, window: int, out: int, reasoning: bool = False, vision: bool = False
       ) -> list[ModelInfo]:
    return [ModelInfo(i, window, out, reasoning, vendor, vision) for i in ids.split()]


MODELS: tuple[ModelInfo, ...] = tuple(
    _m("openai", "gpt-4.1 gpt-4.1-mini gpt-4.1-nano", 1_047_576, 32_768, vision=True)
    + _m("openai", "gpt-4o gpt-4o-mini chatgpt-4o", 128_000, 16_384, vision=True)
    + _m("openai", "gpt-5 gpt-5-mini gpt-5-nano gpt-5.1 gpt-5.2", 272_000, 128_000, True, vision=True)
    + _m("openai", "gpt-5.4 gpt-5.5", 1_050_000, 128_000, True, vision=True)
    + _m("openai", "o3 o3-pro o4-mini o1", 200_000, 100_000, True, vision=True)
    + _m("openai", "o3-mini", 200_000, 100_000, True)
    + _m("openai", "gpt-oss-20b gpt-oss-120b gpt-oss", 131_072, 32_768, True)
    + _m("anthropic", "claude-opus-4 claude-opus-4-0 claude-opus-4-1", 200_000, 32_000, True, vision=True)
    + _m("anthropic", "claude-sonnet-4 claude-sonnet-4-0 claude-sonnet-4-5 claude-haiku-4-5 claude-opus-4-5",
         200_000, 64_000, True, vision=True)
    + _m("anthropic", "claude-opus-4-6 claude-opus-4-7", 1_000_000, 128_000, True, vision=True)
    + _m("anthropic", "claude-sonnet-4-6", 1_000_000, 64_000, True, vision=True)
    + _m("anthropic", "claude-3-7-sonnet", 200_000, 64_000, True, vision=True)
    + _m("anthropic", "claude-3-5-sonnet", 200_000, 8_192, vision=True)
    + _m("anthropic", "claude-3-5-haiku", 200_000, 8_192)
    + _m("google", "gemini-2.5-pro gemini-2.5-flash gemini-2.5-flash-lite", 1_048_576, 65_535, True, vision=True)
    + _m("local", "qwen2.5 qwen2.5-coder qwen3", 32_768, 8_192)
    + _m("local", "qwen3-coder", 262_144, 65_536)
    + _m("local", "llama3", 8_192, 4_096)
    + _m("local", "llama3.1 llama3.2 llama3.3 llama-3.1 llama-3.2 llama-3.3", 131_072, 8_192)
)


class _Override(TypedDict, total=False):
    """The ModelInfo fields ``set_override`` was given."""

    context_window: int
    max_output: int
    reasoning: bool
    vision: bool


_BY_ID = MappingProxyType({m.id: m for m in MODELS})  # read-only


def _candidates(model: str) -> list[str]:
    tail = model.rsplit("/", 1)[-1]  # OpenRouter-style "anthropic/claude-sonnet-4.5"
    names = [model, tail]
    if tail.startswith("claude"):
        names.append(tail.replace(".", "-"))
    return names


def table_info(model: str) -> ModelInfo | None:
    """The bundled table's entry for ``model`` (exact, else its longest family prefix), or None."""
    for name in _candidates(model.lower()):
        if name in _BY_ID:
            return _BY_ID[name]
    best: ModelInfo | None = None
    for name in _candidates(model.lower()):
        for info in MODELS:
            if name.startswith(info.id) and name[len(info.id):len(info.id) + 1] in ("-", ":", "@", "_", ".", "") \
                    and (best is None or len(info.id) > len(best.id)):
                best = info
    return best


class ModelTable:
    """The bundled table with what configuration and errors added: the overrides set for a
    ``provider:model`` (:meth:`set_override`) and the windows overflow errors revealed
    (:meth:`learn_window`). Where this table has neither for a model, those of ``base`` apply
    (the user's, laid under a kernel's). Thread-safe."""

    def __init__(self, base: ModelTable | None = None) -> None:
        self.base = base
        self._lock = threading.Lock()
        self._overrides: dict[tuple[str, str], _Override] = {}
        self._learned: dict[tuple[str, str], int] = {}

    def set_override(self, provider: str, model: str, *, context_window: int | None = None,
                     max_output: int | None = None, reasoning: bool | None = None,
                     vision: bool | None = None) -> None:
        """Configuration: the window (etc.) to use for ``provider:model`` whatever the table says."""
        fields: _Override = {}
        if context_window is not None:
            fields["context_window"] = context_window
        if max_output is not None:
            fields["max_output"] = max_output
        if reasoning is not None:
            fields["reasoning"] = reasoning
        if vision is not None:
            fields["vision"] = vision
        with self._lock:
            self._overrides[(provider, model)] = fields

    def override(self, provider: str, model: str) -> _Override:
        """The fields set for ``provider:model`` (here, else in ``base``); empty when none."""
        with self._lock:
            found = self._overrides.get((provider, model))
        if found is None:
            return self.base.override(provider, model) if self.base is not None else _Override()
        return found.copy()

    def learn_window(self, provider: str, model: str, n: int) -> None:
        """Record the window a server revealed (an overflow error's ``n_ctx`` or "maximum … is N")."""
        if n and n > 0:
            with self._lock:
                self._learned[(provider, model)] = int(n)

    def learn_from_error(self, provider: str, model: str, error: BaseException) -> int | None:
        """If ``error`` is an overflow that revealed the real window, remember it; returns the window."""
        window = getattr(error, "context_window", None)
        if isinstance(window, int) and window > 0:
            self.learn_window(provider, model, window)
            return window
        return None

    def learned_window(self, provider: str, model: str) -> int | None:
        with self._lock:
            found = self._learned.get((provider, model))
        if found is None and self.base is not None:
            return self.base.learned_window(provider, model)
        return found

    def info(self, provider: str, model: str) -> ModelInfo | None:
        """The effective facts for ``provider:model``, or None when nothing is known."""
        info = table_info(model)
        override = self.override(provider, model)
        if override:
            base = info or ModelInfo(model, 0, 0, False, "")
            info = dataclasses.replace(base, **override)
        learned = self.learned_window(provider, model)
        if learned:
            base = info or ModelInfo(model, learned, 0, False, "")
            window = min(base.context_window, learned) if base.context_window else learned
            info = dataclasses.replace(base, context_window=window)
        return info

    def known_window(self, provider: str, model: str) -> tuple[int | None, str, str]:
        """(window, source, vendor) from configuration (:meth:`set_override`, source ``"config"``) or
        the table (``"table"``), leaving out what errors taught; (None, "", "") when neither knows."""
        override = self.override(provider, model)
        info = table_info(model)
        if override.get("context_window"):
            return int(override["context_window"]), "config", info.vendor if info else ""
        if info and info.context_window:
            return info.context_window, "table", info.vendor
        return None, "", ""

    def context_window(self, provider: str, model: str) -> int | None:
        info = self.info(provider, model)
        return info.context_window if info and info.context_window else None

    def max_output(self, provider: str, model: str) -> int | None:
        info = self.info(provider, model)
        return info.max_output if info and info.max_output else None
