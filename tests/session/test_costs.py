"""Costs: every reply's usage priced with genai-prices (input, output, cache reads and writes), in
Pi's ``usage.cost``; the session's total and the summariser's share; unknown models unpriced
without a warning storm; no network needed."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
import warnings

import pytest
from genai_prices import Usage, calc_price

from ipyagent import Session
from ipyagent.agent.run_config import RunConfig
from ipyagent.core import _sum_usage
from ipyagent.display.budget_widget import budget_facts, cost_text, static_bundle
from ipyagent.hooks import HookRegistry
from ipyagent.providers import ModelRequest, pricing
from ipyagent.session.costs import CostTally, cost_totals
from ipyagent.session.tokens import normalize_usage
from ipyagent.testing import FakeProviderServer, Reply, collect
from support.shell import run, runtime_of

USAGE = {"input": 3000, "cacheRead": 2000, "cacheWrite": 500, "output": 700}


def reply_via(fake: FakeProviderServer, protocol: str, model: str, **kw) -> dict:
    fake.enqueue(Reply(text="priced", usage=dict(USAGE)))
    provider = fake.provider(protocol, **kw)
    return collect(provider.stream(ModelRequest(model=model, messages=[{"role": "user", "content": "hi"}]))).message


def genai_price(model: str, provider_id: str, usage: dict) -> object:
    """What genai-prices itself computes for the same tokens (its input counts cache tokens too)."""
    return calc_price(Usage(input_tokens=usage["input"] + usage["cacheRead"] + usage["cacheWrite"],
                            cache_read_tokens=usage["cacheRead"], cache_write_tokens=usage["cacheWrite"],
                            output_tokens=usage["output"]), model, provider_id=provider_id)


@pytest.mark.parametrize("protocol,model,provider_id", [
    ("openai", "gpt-4.1-mini", "openai"),
    ("responses", "gpt-5-codex", "openai"),
    ("anthropic", "claude-sonnet-4-5-20250929", "anthropic"),
])
def test_a_known_models_cost_equals_genai_prices(protocol, model, provider_id):
    with FakeProviderServer() as srv:
        message = reply_via(srv, protocol, model)
    usage = message["usage"]
    sent = {k: usage[k] for k in ("input", "cacheRead", "cacheWrite", "output")}
    expected = genai_price(model, provider_id, sent)
    cost = usage["cost"]
    assert cost["total"] == float(expected.total_price) > 0
    assert cost["output"] == float(expected.output_price)
    assert cost["input"] + cost["cacheRead"] + cost["cacheWrite"] == pytest.approx(float(expected.input_price))
    assert "costUnknown" not in usage
    if usage["cacheRead"]:
        assert 0 < cost["cacheRead"] < cost["input"]  # cached tokens at their cheaper rate
    if protocol == "anthropic":
        assert usage["cacheWrite"] == 500 and cost["cacheWrite"] > 0


def test_unknown_model_has_no_cost_and_one_log_line(caplog):
    caplog.set_level(logging.INFO, logger="ipyagent.providers.pricing")
    model = f"my-own-finetune-{uuid.uuid4().hex[:8]}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of any kind, let alone one per reply
        usages = [pricing.price_usage("openai", model, dict(USAGE)) for _ in range(5)]
    for usage in usages:
        assert usage["costUnknown"] is True
        assert usage["cost"] == dict.fromkeys(pricing.COST_KEYS, 0.0)
    lines = [r for r in caplog.records if model in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO


def test_an_unpriced_model_on_a_local_server_is_free_and_a_priced_one_keeps_its_price():
    # llama-cpp-python or vLLM on this machine: free, as %agent status and the widget both say
    # (issue 37: "cost unknown (42 unpriced calls)" beside "cost: free (local server)"); a priced
    # model behind a local proxy is still priced
    model = f"my-own-finetune-{uuid.uuid4().hex[:8]}"
    with FakeProviderServer() as srv:
        local = reply_via(srv, "openai", model)
        proxied = reply_via(srv, "openai", "gpt-4o")
    assert local["usage"]["cost"]["total"] == 0 and "costUnknown" not in local["usage"]
    assert proxied["usage"]["cost"]["total"] > 0


def test_local_servers_are_free_and_never_looked_up():
    with FakeProviderServer() as srv:
        message = reply_via(srv, "openai", "gpt-4o", name="ollama")
    assert message["usage"]["cost"]["total"] == 0 and "costUnknown" not in message["usage"]
    assert pricing.calculate("llamacpp", "gpt-4o", USAGE) == dict.fromkeys(pricing.COST_KEYS, 0.0)


def test_a_call_without_tokens_is_not_priced():
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": {}}
    assert pricing.price_usage("openai", "no-such-model", usage) == usage and "costUnknown" not in usage


def test_pricing_works_offline_and_never_starts_the_price_updater():
    code = ("import socket\n"
            "def refuse(*a, **k): raise OSError('no network here')\n"
            "socket.socket.connect = refuse; socket.create_connection = refuse\n"
            "from ipyagent.providers.pricing import calculate\n"
            "from genai_prices import data_snapshot\n"
            "cost = calculate('openai', 'gpt-4o', {'input': 1000, 'output': 100})\n"
            "print(cost['total'], data_snapshot._custom_snapshot is None)\n")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    total, bundled_only = out.stdout.split()
    expected = calc_price(Usage(input_tokens=1000, output_tokens=100), "gpt-4o", provider_id="openai")
    assert float(total) == float(expected.total_price) and bundled_only == "True"


# ---- the session's total --------------------------------------------------------------------------


def priced(total: float, **extra) -> dict:
    return {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
            "cost": {"input": total / 2, "output": total / 2, "cacheRead": 0, "cacheWrite": 0, "total": total}, **extra}


def assistant(total: float, **extra) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "x", "provider": "p",
            "model": "m", "usage": priced(total, **extra), "stopReason": "stop", "timestamp": 1}


def test_session_total_covers_every_branch_and_the_summariser_share():
    session = Session(hooks=HookRegistry())
    session.append_message({"role": "user", "content": "a", "timestamp": 1})
    first = session.append_message(assistant(0.25))
    session.append_message({"role": "user", "content": "b", "timestamp": 2})
    session.append_message(assistant(0.5))
    session.append({"type": "compaction", "summary": "S", "firstKeptEntryId": first["id"], "tokensBefore": 9,
                    "usage": _sum_usage([priced(0.125), priced(0.0625)])})
    session.branch(first["id"])  # a branch: the money spent before stays spent
    session.append_message({"role": "user", "content": "c", "timestamp": 3})
    session.append_message(assistant(0.0, costUnknown=True))
    aborted = assistant(0.0)
    aborted["usage"] = normalize_usage({})
    aborted["stopReason"] = "aborted"
    session.append_message(aborted)
    costs = session.costs()
    assert costs.total == pytest.approx(0.25 + 0.5 + 0.1875) and costs.summaries == pytest.approx(0.1875)
    assert (costs.priced, costs.unpriced) == (3, 1)
    assert cost_totals(session.entries) == costs
    session.append_message(assistant(1.0))
    assert session.costs().total == pytest.approx(1.9375)  # the tally adds only what is new


def test_tally_recounts_a_replaced_entry_list():
    tally = CostTally()
    entries = [{"type": "message", "id": "a", "message": assistant(0.5)}]
    assert tally.update(entries).total == 0.5
    assert tally.update([{"type": "message", "id": "b", "message": assistant(0.25)}]).total == 0.25


def test_usage_extras_survive_normalising_and_summing():
    usage = normalize_usage({"input": 5, "output": 7, "reasoning": 3, "costUnknown": True})
    assert usage["reasoning"] == 3 and usage["costUnknown"] is True
    assert "reasoning" not in normalize_usage({"input": 1, "reasoning": "lots"})  # junk is dropped
    summed = _sum_usage([priced(0.5), {"input": 1, "costUnknown": True}])
    assert summed["costUnknown"] is True and summed["cost"]["total"] == 0.5


# ---- where the user sees it -----------------------------------------------------------------------


def test_cost_text_and_the_budget_views():
    assert cost_text(None) == "" and cost_text(cost_totals([])) == ""
    session = Session(hooks=HookRegistry())
    session.append_message({"role": "user", "content": "a", "timestamp": 1})
    session.append_message(assistant(0.0123))
    session.append({"type": "compaction", "summary": "S", "firstKeptEntryId": session.entries[0]["id"],
                    "tokensBefore": 9, "usage": priced(0.0004)})
    facts = budget_facts(session, RunConfig(model="openai:gpt-4o"), window=128_000)
    assert cost_text(facts.costs) == "cost 0.0127 USD (summaries 0.0004 USD)"
    for mime, view in static_bundle(facts).items():
        assert "cost 0.0127 USD (summaries 0.0004 USD)" in view, mime
        assert "$" not in view  # a pair of dollar signs would become LaTeX in Jupyter
    session.append_message(assistant(0.0, costUnknown=True))
    assert cost_text(session.costs()).endswith(" + 1 unpriced call")
    only_unknown = Session(hooks=HookRegistry())
    only_unknown.append_message(assistant(0.0, costUnknown=True))
    assert cost_text(only_unknown.costs()) == "cost unknown (1 unpriced call)"


def test_agent_status_shows_the_sessions_cost(ip, server):
    ip.run_line_magic("config", "Agent.model = 'openai:gpt-4.1-mini'")
    ip.run_line_magic("config", "Agent.show_widget = False")
    server.enqueue(Reply(text="hello", usage=dict(USAGE)))
    run(ip, "", "say hello")
    message = runtime_of(ip).slot().session.entries[-1]["message"]
    expected = genai_price("gpt-4.1-mini", "openai", {k: message["usage"][k] for k in USAGE})
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        ip.run_line_magic("agent", "status")
    shown = f"cost {float(expected.total_price):.4f} USD"
    assert shown in cap.stdout
    bundle = cap.outputs[0].data
    assert shown in bundle["text/plain"] and shown in bundle["text/html"] and shown in bundle["text/markdown"]
    assert json.dumps(message["usage"]["cost"])  # stored in the entry, Pi's shape
