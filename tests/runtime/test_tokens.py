"""Provides tests of token counting: the model → encoding mapping, the estimator's accuracy against
exact counts (calibration and held-out text), the count cache, and message framing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from foya_tui.runtime import tokens
from foya_tui.runtime.tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    CachedCounter,
    CharWeightEstimator,
    CharWeights,
    TiktokenCounter,
    TokenCountCache,
    count_messages,
    count_tools,
    counter_for_encoding,
    counter_for_model,
    encoding_for_model,
    message_text,
)
from tests.bench.bench_tokens import MIXED, calibration_corpus, held_out_corpus

ESTIMATOR = CharWeightEstimator()


def exact_counter(encoding: str) -> TiktokenCounter:
    inner = counter_for_encoding(encoding).inner
    if not isinstance(inner, TiktokenCounter):
        pytest.skip(f"{encoding} is not available offline")
    return inner


class CallCounter:
    """A fake tokenizer (one token per character) that records every text it is asked to count."""

    exact = True

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


# ---------------------------------------------------------------------------------------------
# Mapping


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1-mini", "o200k_base"),
        ("azure/gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("openai/gpt-5-nano", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-pro", "o200k_base"),
        ("openai/o4-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("foya-sim/small", "o200k_base"),
        ("foya-sim/large", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("azure/gpt-35-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("claude-sonnet-4-5", None),
        ("anthropic/claude-3-5-haiku-latest", None),
        ("gemini/gemini-2.5-pro", None),
        ("openrouter/qwen/qwen3-coder", None),
        ("ollama/llama3.1", None),
        ("mistral/mistral-large-latest", None),
        ("deepseek/deepseek-chat", None),
        ("o10-experimental", None),
        ("some-unknown-model", None),
    ],
)
def test_encoding_for_model(model: str, encoding: str | None) -> None:
    assert encoding_for_model(model) == encoding


def test_openai_models_count_exactly_and_others_estimate() -> None:
    exact_counter("o200k_base")
    exact_counter("cl100k_base")
    for model in ("gpt-4o", "openai/o3-mini", "foya-sim/small", "gpt-4"):
        assert counter_for_model(model).exact, model
    for model in ("claude-sonnet-4-5", "gemini/gemini-2.0-flash", "qwen-max", "llama-3.3-70b"):
        counter = counter_for_model(model)
        assert not counter.exact and counter.name == "char-weight", model
    assert counter_for_model("foya-sim/small").name == "o200k_base"
    assert counter_for_model("gpt-4").name == "cl100k_base"


def test_counters_are_cached_per_process_and_wrap_the_cache() -> None:
    assert counter_for_model("gpt-4o") is counter_for_model("openai/gpt-5")
    assert counter_for_model("claude-opus-4") is counter_for_model("gemini-2.5-pro")
    assert isinstance(counter_for_model("gpt-4o"), CachedCounter)
    assert isinstance(counter_for_model("claude-opus-4"), CachedCounter)


def test_loading_from_many_threads_yields_one_counter() -> None:
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(counter_for_model("gpt-4o"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(counter is seen[0] for counter in seen)


def test_an_encoding_not_on_disk_falls_back_to_the_estimator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty cache dir: tiktoken would download; Foya must estimate instead, offline.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens._load_inner("o200k_base") is tokens._ESTIMATOR
    # An encoding Foya has no file for is never fetched either.
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    assert tokens._load_inner("r50k_base") is tokens._ESTIMATOR


# ---------------------------------------------------------------------------------------------
# Estimator accuracy


def ratio(text: str, encoding: str) -> float:
    return ESTIMATOR.count(text) / exact_counter(encoding).count(text)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("corpus", [calibration_corpus, held_out_corpus], ids=["calibration", "held-out"])
@pytest.mark.parametrize("kind", ["english", "code", "json"])
def test_estimator_is_within_ten_percent_and_conservative(kind: str, corpus, encoding: str) -> None:
    text = corpus()[kind]
    assert len(text) > 2_000, "samples are several KB"
    assert 1.0 <= ratio(text, encoding) <= 1.10


@pytest.mark.parametrize("corpus", [calibration_corpus, held_out_corpus], ids=["calibration", "held-out"])
def test_chinese_counts_about_one_token_a_character(corpus) -> None:
    text = corpus()["chinese"]
    # cl100k spends ~1 token per Chinese character: the estimate matches it within 10%.
    assert 0.9 <= ratio(text, "cl100k_base") <= 1.1
    # o200k is more efficient (~0.71 a character): the estimate over-counts, never under-counts.
    assert 1.0 <= ratio(text, "o200k_base") <= 1.5
    # `len/4` would give a quarter of this.
    assert ESTIMATOR.count(text) >= 0.9 * len(text)


def test_pure_cjk_is_one_token_per_character() -> None:
    assert ESTIMATOR.count("语言模型通过上下文窗口") == 11
    assert ESTIMATOR.count("コンテキスト") == 6
    assert ESTIMATOR.count("컨텍스트") == 4


def test_estimator_is_conservative_on_mixed_text() -> None:
    assert ratio(MIXED, "o200k_base") >= 1.0
    assert ratio(MIXED, "cl100k_base") >= 1.0


def test_more_held_out_python_source_within_ten_percent() -> None:
    import dataclasses
    import string

    for module in (dataclasses, string):
        assert module.__file__ is not None
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert 0.95 <= ratio(source, "o200k_base") <= 1.10, module.__name__


def test_estimator_basics() -> None:
    assert ESTIMATOR.count("") == 0
    assert ESTIMATOR.count("hello") == 2  # one word at 1.1, rounded up
    assert ESTIMATOR.count("<|endoftext|>") > 0
    # Lone surrogates (a bad decode upstream) are counted, not raised.
    assert ESTIMATOR.count("bad \udc80 byte") > 0
    assert not ESTIMATOR.exact


def test_custom_weights_get_their_own_cache_name() -> None:
    assert ESTIMATOR.name == "char-weight"
    custom = CharWeightEstimator(CharWeights(word=2.0))
    assert custom.name != ESTIMATOR.name
    assert custom.count("one two three") > ESTIMATOR.count("one two three")


# ---------------------------------------------------------------------------------------------
# Exact counting


def test_special_token_text_is_ordinary_text() -> None:
    o200k = exact_counter("o200k_base")
    assert o200k.count("<|endoftext|>") > 1
    assert counter_for_model("gpt-4").count("say <|endoftext|> and <|im_start|>") > 3


def test_empty_text_is_zero_for_every_counter() -> None:
    for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5"):
        assert counter_for_model(model).count("") == 0


# ---------------------------------------------------------------------------------------------
# The cache


def test_cache_counts_each_text_once() -> None:
    inner = CallCounter()
    counter = CachedCounter(inner, TokenCountCache())
    short, long = "hello", "x" * 500
    assert [counter.count(short), counter.count(short)] == [5, 5]
    assert [counter.count(long), counter.count(long)] == [500, 500]
    assert inner.calls == [short, long]
    assert counter.name == "fake" and counter.exact


def test_cache_keys_include_the_counter_name() -> None:
    cache = TokenCountCache()
    first, second = CallCounter("one"), CallCounter("two")
    CachedCounter(first, cache).count("same text")
    CachedCounter(second, cache).count("same text")
    assert first.calls == second.calls == ["same text"]


def test_cache_is_bounded_and_evicts_least_recently_used() -> None:
    inner = CallCounter()
    cache = TokenCountCache(max_entries=3)
    counter = CachedCounter(inner, cache)
    for text in ("a", "b", "c"):
        counter.count(text)
    counter.count("a")  # now most recently used
    counter.count("d")  # evicts "b"
    assert cache.stats().entries == 3
    inner.calls.clear()
    counter.count("a")
    counter.count("b")
    assert inner.calls == ["b"]


def test_default_cache_bound_is_documented_size() -> None:
    assert tokens.SHARED_CACHE.max_entries == tokens.CACHE_MAX_ENTRIES == 50_000
    with pytest.raises(ValueError):
        TokenCountCache(max_entries=0)


def test_cache_is_thread_safe_and_stays_bounded() -> None:
    inner = CallCounter()
    cache = TokenCountCache(max_entries=100)
    counter = CachedCounter(inner, cache)
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(300)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for text in texts:
                assert counter.count(text) == len(text)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.stats().entries <= 100


def test_cached_counter_agrees_with_its_tokenizer() -> None:
    o200k = exact_counter("o200k_base")
    counter = CachedCounter(o200k, TokenCountCache())
    for text in calibration_corpus().values():
        assert counter.count(text) == o200k.count(text)
        assert counter.count(text) == o200k.count(text)


# ---------------------------------------------------------------------------------------------
# Messages


def test_count_messages_counts_role_framing() -> None:
    counter = CachedCounter(CallCounter(), TokenCountCache())
    assert count_messages([], counter) == TOKENS_PER_REPLY
    message = {"role": "user", "content": "hi"}
    assert count_messages([message], counter) == TOKENS_PER_REPLY + TOKENS_PER_MESSAGE + len("user\nhi")
    assert count_messages([message, message], counter) == TOKENS_PER_REPLY + 2 * (TOKENS_PER_MESSAGE + 7)


def test_count_messages_counts_tool_calls() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    text = message_text(message)
    assert "read_file" in text and '"path": "README.md"' in text
    counter = CachedCounter(CallCounter(), TokenCountCache())
    bare = count_messages([{"role": "assistant", "content": None}], counter)
    assert count_messages([message], counter) == TOKENS_PER_REPLY + TOKENS_PER_MESSAGE + len(text)
    assert count_messages([message], counter) > bare
    tool_reply = {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "# Foya"}
    assert "read_file" in message_text(tool_reply)


def test_count_messages_and_tools_default_to_the_exact_counter() -> None:
    exact_counter("o200k_base")
    messages = [{"role": "user", "content": "Count me, please."}]
    assert count_messages(messages) == count_messages(messages, counter_for_model("foya-sim/small"))
    tool = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}
    assert count_tools([tool]) > 0
    assert count_tools([tool, tool]) == 2 * count_tools([tool])


def number_dense_samples() -> dict[str, str]:
    """CSV numbers, hex digests and log lines: what SentencePiece tokenizers split finest."""
    import hashlib
    import random

    rnd = random.Random(7)
    csv = "\n".join(",".join(f"{rnd.uniform(0, 10_000):.2f}" for _ in range(8)) for _ in range(100))
    digests = "\n".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(100))
    logs = "\n".join(
        f"2026-11-29 12:{i % 60:02d}:{i * 7 % 60:02d},{i % 1000:03d} INFO worker-{i % 8} "
        f"request id={rnd.randrange(10**6)} took {rnd.randrange(2000)} ms"
        for i in range(100)
    )
    return {"csv": csv, "hex": digests, "logs": logs}


@pytest.mark.parametrize("kind", ["csv", "hex", "logs"])
def test_number_dense_text_errs_high(kind: str) -> None:
    """Issue 18: Gemma 3 counted these at 1/0.46 (CSV), 1/0.65 (hex) and 1/0.61 (logs) of the old
    estimate; the estimate now errs high on o200k by at least as much, so it does not undercount
    an unknown tokenizer before calibration."""
    text = number_dense_samples()[kind]
    assert ratio(text, "o200k_base") >= {"csv": 1.9, "hex": 1.6, "logs": 1.4}[kind]
