"""Tests the real LiteLLM HTTP path against the loopback OpenAI-compatible server (SPEC C-2, R-1)."""

from __future__ import annotations

import pytest

from foya_tui.runtime.model import Usage
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest, StreamFinished, TextDelta
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.routes import make_route
from tests.conftest import fake_settings
from tests.fakes.openai_server import TOOL_CALL_ARGUMENTS, TOOL_CALL_NAME, FakeOpenAIServer

SECRET = "sk-test-0123456789abcdef"


def stream(server: FakeOpenAIServer, scenario: str, monkeypatch: pytest.MonkeyPatch) -> list:
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    client = LiteLLMClient(fake_settings(server.base_url))
    route = make_route(f"openai/{scenario}", "fake", server.base_url)
    request = ProviderRequest(route, ({"role": "user", "content": "hello there"},))
    return list(client.stream(request, CancelToken()))


def failure(server: FakeOpenAIServer, scenario: str, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ProviderError) as caught:
        stream(server, scenario, monkeypatch)
    return caught.value.failure


def test_streaming_reply_with_final_usage(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    events = stream(fake_openai, "ok", monkeypatch)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    finished = events[-1]
    assert isinstance(finished, StreamFinished)
    assert len(deltas) >= 3 and "".join(deltas) == finished.text == "echo: hello there"
    assert finished.usage is not None and finished.usage.input_tokens > 0
    (request,) = fake_openai.requests
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def test_zero_usage_means_unknown(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert stream(fake_openai, "zerousage", monkeypatch)[-1].usage is None
    assert Usage.from_counts(0, 0, 0) is None


def test_missing_usage_is_unknown_not_litellms_guess(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    """LiteLLM invents a usage chunk when the provider sends none; Foya must not call it measured."""
    assert stream(fake_openai, "nousage", monkeypatch)[-1].usage is None


def test_streamed_tool_calls_are_reassembled(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    finished = stream(fake_openai, "tools", monkeypatch)[-1]
    assert finished.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in finished.tool_calls] == [
        ("call_1", TOOL_CALL_NAME, TOOL_CALL_ARGUMENTS)
    ]


def test_output_limit_is_a_finish_reason_not_an_error(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert stream(fake_openai, "length", monkeypatch)[-1].finish_reason == "length"


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("overflow-openai", FailureKind.INPUT_OVERFLOW),
        ("overflow-vllm", FailureKind.INPUT_OVERFLOW),
        ("overflow-llamacpp", FailureKind.INPUT_OVERFLOW),
        # LiteLLM does not recognise this message; the body code must still be read.
        ("overflow-code-only", FailureKind.INPUT_OVERFLOW),
        ("ratelimit", FailureKind.RATE_LIMIT),
        ("quota", FailureKind.QUOTA),
        ("auth", FailureKind.AUTH),
        ("servererror", FailureKind.OTHER),
        ("garbage", FailureKind.OTHER),
        ("midstream-error", FailureKind.CONNECTION),
    ],
)
def test_failures_are_classified(fake_openai: FakeOpenAIServer, monkeypatch, scenario: str, kind) -> None:
    found = failure(fake_openai, scenario, monkeypatch)
    assert found.kind is kind, found
    assert "\n" not in found.message and SECRET not in found.message
    # LiteLLM's own retries are off: exactly one HTTP request per attempt.
    assert len(fake_openai.requests) == 1


def test_rate_limit_carries_retry_after(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert failure(fake_openai, "ratelimit", monkeypatch).retry_after == 1.0


def test_garbage_says_the_reply_was_unreadable(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert "not valid JSON" in failure(fake_openai, "garbage", monkeypatch).message


def test_cancel_stops_the_stream(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    client = LiteLLMClient(fake_settings(fake_openai.base_url))
    route = make_route("openai/slow", "fake", fake_openai.base_url)
    cancel = CancelToken()
    seen = []
    for event in client.stream(ProviderRequest(route, ({"role": "user", "content": "a b c d e f"},)), cancel):
        seen.append(event)
        if isinstance(event, TextDelta):
            cancel.cancel()
    assert seen[-1].finish_reason == "cancelled"
