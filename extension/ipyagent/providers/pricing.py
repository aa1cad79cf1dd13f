"""What a reply cost, from ``genai-prices`` (a maintained price database, bundled with the package).

``price_usage`` fills Pi's ``usage.cost`` (``input``, ``output``, ``cacheRead``, ``cacheWrite``,
``total``, in US dollars). The total, and the input and output shares, are exactly what
``genai_prices.calc_price`` computes for the reply's tokens; the input share is split into
uncached input, cache reads and cache writes at the model's rates for each.

Only the price snapshot shipped inside the package is used: ``genai_prices.UpdatePrices`` (which
fetches newer prices from the internet) is never started, so pricing works offline and never
waits on a network. A model genai-prices does not know keeps a zero cost with
``usage["costUnknown"] = True``, and is logged once (INFO) per provider and model in a process.
Local servers (Ollama, llama.cpp) cost nothing and are never looked up.
"""

from __future__ import annotations

import logging
import threading
from decimal import Decimal
from typing import Any, cast

from ipyagent import host
from ipyagent.shapes import Usage, UsageCost

log = logging.getLogger(__name__)

# ipyagent provider name -> genai-prices provider id (other names are looked up as they are)
PROVIDER_IDS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic",
                "openrouter": "openrouter", "deepseek": "deepseek", "groq": "groq"}
FREE_PROVIDERS = frozenset({"ollama", "llamacpp"})
COST_KEYS = ("input", "output", "cacheRead", "cacheWrite", "total")

_lock = threading.Lock()
_unknown_logged: set[tuple[str, str]] = set()
_warming: threading.Thread | None = None


def warm_up() -> None:
    """Load genai-prices and its snapshot in the background (about half a second, once per
    process), so the first reply is not kept waiting for it: ``%load_ext ipyagent`` starts it, and
    so does every provider call (for programs without the extension). A reply that ends while it
    still loads waits for the rest of it when it is priced (the import's own lock). Where no thread
    can start (a browser page's kernel) it does nothing: the first reply priced loads it."""
    global _warming
    if not host.can_start_threads():
        return
    with _lock:
        if _warming is not None:
            return
        _warming = threading.Thread(target=_load, name="ipyagent-prices", daemon=True)
    _warming.start()


def _load() -> Any:
    try:
        import genai_prices
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()
        return genai_prices
    except Exception:  # noqa: BLE001 - not installed, or a broken snapshot: replies are unpriced
        return None


def is_local_server(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine or a private network (a local model server,
    whose calls cost nothing): a loopback or private address, ``localhost`` or a ``.local`` name."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def price_id(provider: str) -> str | None:
    """The genai-prices provider id for an ipyagent provider name; None for local servers."""
    if provider in FREE_PROVIDERS:
        return None
    return PROVIDER_IDS.get(provider, provider)


def _has_tokens(usage: Usage) -> bool:
    return any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite"))


def _rate_cost(model_price: Any, key: str, count: int, total_input: int, per: int = 1_000_000) -> Decimal:
    from genai_prices.types import calc_unit_price

    price = getattr(model_price, key, None)
    return calc_unit_price(price, count, total_input, per) if price is not None and count else Decimal(0)


def calculate(provider: str, model: str, usage: Usage) -> dict[str, float] | None:
    """Pi's cost dict for ``usage`` (Pi's token fields), or None when the model has no known price."""
    pid = price_id(provider)
    if pid is None:
        return dict.fromkeys(COST_KEYS, 0.0)
    genai_prices = _load()
    if genai_prices is None:
        return None
    uncached, output = int(usage.get("input") or 0), int(usage.get("output") or 0)
    cache_read, cache_write = int(usage.get("cacheRead") or 0), int(usage.get("cacheWrite") or 0)
    total_input = uncached + cache_read + cache_write  # genai-prices counts cache tokens inside input
    try:
        result = genai_prices.calc_price(
            genai_prices.Usage(input_tokens=total_input, cache_read_tokens=cache_read,
                               cache_write_tokens=cache_write, output_tokens=output),
            model, provider_id=pid)
    except LookupError:
        return None
    except Exception as exc:  # noqa: BLE001 - a malformed price entry must not break a reply
        log.info("genai-prices could not price %s:%s: %s", provider, model, exc)
        return None
    try:
        read = _rate_cost(result.model_price, "cache_read_mtok", cache_read, total_input)
        write = _rate_cost(result.model_price, "cache_write_mtok", cache_write, total_input)
    except Exception:  # noqa: BLE001 - an odd cache rate: the cache share is not split out
        read = write = Decimal(0)
    if read + write > result.input_price:  # a rate the calculation did not use: keep the sums exact
        read = write = Decimal(0)
    return {"input": float(result.input_price - read - write), "output": float(result.output_price),
            "cacheRead": float(read), "cacheWrite": float(write), "total": float(result.total_price)}


def price_usage(provider: str, model: str, usage: Usage, *, local: bool = False) -> Usage:
    """``usage`` with its ``cost`` filled in (in place, and returned). A usage without tokens
    (an aborted or failed call) costs nothing and is not looked up. ``local``: the reply came from
    a server on this machine or a private network; a model with no price there costs nothing (a
    priced model behind a local proxy keeps its price)."""
    if not _has_tokens(usage):
        return usage
    cost = calculate(provider, model, usage)
    if cost is None and local:
        cost = dict.fromkeys(COST_KEYS, 0.0)
    if cost is None:
        usage["cost"] = cast(UsageCost, dict.fromkeys(COST_KEYS, 0.0))
        usage["costUnknown"] = True
        key = (provider, model)
        if key not in _unknown_logged:
            _unknown_logged.add(key)
            log.info("no price for %s:%s in genai-prices; its replies are shown without a cost", provider, model)
    else:
        usage["cost"] = cast(UsageCost, cost)
        usage.pop("costUnknown", None)
    return usage
