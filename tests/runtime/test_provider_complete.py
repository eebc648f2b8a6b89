"""Tests ProviderClient.complete(): one non-streamed request, through LiteLLM's real path to the
simulator and to the loopback server, and the scripted fake (SPEC C-2, C-9, C-11, C-13)."""

from __future__ import annotations

from typing import Any

import pytest

from foya_tui.runtime.providers.client import (
    CANCELLED_COMPLETION,
    CancelToken,
    Completion,
    ProviderRequest,
    StreamFinished,
)
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, ProviderFailure
from foya_tui.runtime.providers.litellm_client import LiteLLMClient, load_litellm
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.providers.simulator import FAULTS_ENV
from foya_tui.runtime.tokens import count_messages, default_counter
from foya_tui.settings import Settings
from tests.conftest import fake_settings
from tests.fakes.openai_server import LENGTH_REPLY, FakeOpenAIServer, count_prompt_tokens
from tests.fakes.scripted import GENERIC_SUMMARY, ScriptedClient
from tests.runtime.test_simulator_summary import MUST_MENTION, TRANSCRIPT, compaction_messages, sections_of

SECRET = "sk-test-0123456789abcdef"
HELLO = ({"role": "user", "content": "hello there"},)


def simulator_complete(messages: Any, model: str = "foya-sim/small") -> Completion:
    client = LiteLLMClient(Settings(retry_backoff=0.0))
    return client.complete(ProviderRequest(make_route(model, "default"), tuple(messages)), CancelToken())


def server_complete(
    server: FakeOpenAIServer,
    scenario: str,
    monkeypatch: pytest.MonkeyPatch,
    messages: Any = HELLO,
    cancel: CancelToken | None = None,
    max_output_tokens: int | None = None,
) -> Completion:
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    client = LiteLLMClient(fake_settings(server.base_url))
    route = make_route(f"openai/{scenario}", "fake", server.base_url)
    request = ProviderRequest(route, tuple(messages), max_output_tokens=max_output_tokens)
    return client.complete(request, cancel or CancelToken())


def server_failure(
    server: FakeOpenAIServer, scenario: str, monkeypatch, messages: Any = HELLO
) -> ProviderFailure:
    with pytest.raises(ProviderError) as caught:
        server_complete(server, scenario, monkeypatch, messages)
    failure = caught.value.failure
    assert "\n" not in failure.message and SECRET not in failure.message
    return failure


# -- the simulator, through LiteLLM's custom-provider path ------------------------------------


def test_simulator_answers_a_compaction_request_with_a_valid_summary() -> None:
    messages = compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)
    completion = simulator_complete(messages)
    assert completion.finish_reason == "stop"
    critical = sections_of(completion.text)["## Critical Context"].splitlines()
    assert all(line in critical for line in MUST_MENTION)
    assert completion.usage is not None
    assert completion.usage.input_tokens == count_messages(messages)
    assert completion.usage.output_tokens == default_counter().count(completion.text)


def test_simulator_answers_an_ordinary_request_without_streaming() -> None:
    completion = simulator_complete(({"role": "user", "content": "hello"},))
    assert completion.finish_reason == "stop" and "offline simulator" in completion.text
    assert completion.usage is not None and completion.usage.output_tokens > 0


def test_simulator_compaction_request_beyond_its_window_is_an_input_overflow() -> None:
    messages = compaction_messages([*TRANSCRIPT, "[seq 146] user: " + "word " * 9000])
    with pytest.raises(ProviderError) as caught:
        simulator_complete(messages)
    assert caught.value.failure.kind is FailureKind.INPUT_OVERFLOW
    assert simulator_complete(messages, model="foya-sim/large").finish_reason == "stop"


def test_simulator_summary_knob_reaches_complete(monkeypatch) -> None:
    messages = compaction_messages(TRANSCRIPT)
    # The simulator behind LiteLLM lives as long as the process and restarts its `xN` counts only
    # when the knob setting changes: one request without knobs makes this test independent of others.
    simulator_complete(messages)
    monkeypatch.setenv(FAULTS_ENV, "summary-lengthx1")
    assert simulator_complete(messages).finish_reason == "length"
    sections_of(simulator_complete(messages).text)


def test_simulator_rate_limit_is_classified(monkeypatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "429")
    with pytest.raises(ProviderError) as caught:
        simulator_complete(compaction_messages(TRANSCRIPT))
    assert caught.value.failure.kind is FailureKind.RATE_LIMIT


# -- the loopback OpenAI-compatible server -------------------------------------------------------


def test_summary_scenario_copies_must_mention_lines(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    messages = compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)
    completion = server_complete(fake_openai, "summary", monkeypatch, messages)
    assert completion.finish_reason == "stop"
    critical = sections_of(completion.text)["## Critical Context"].splitlines()
    assert all(line in critical for line in MUST_MENTION)
    assert completion.usage is not None and completion.usage.input_tokens == count_prompt_tokens(messages)
    (request,) = fake_openai.requests
    assert not request.body.get("stream") and "stream_options" not in request.body
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def test_summary_scenario_streams_too(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    client = LiteLLMClient(fake_settings(fake_openai.base_url))
    route = make_route("openai/summary", "fake", fake_openai.base_url)
    messages = compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)
    finished = list(client.stream(ProviderRequest(route, messages), CancelToken()))[-1]
    assert isinstance(finished, StreamFinished) and finished.usage is not None
    assert all(line in finished.text.splitlines() for line in MUST_MENTION)
    sections_of(finished.text)


def test_summary_scenario_echoes_an_ordinary_request(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert server_complete(fake_openai, "summary", monkeypatch).text == "echo: hello there"


def test_ok_is_one_request_with_usage_and_the_output_limit(
    fake_openai: FakeOpenAIServer, monkeypatch
) -> None:
    completion = server_complete(fake_openai, "ok", monkeypatch, max_output_tokens=321)
    assert completion == Completion(text="echo: hello there", finish_reason="stop", usage=completion.usage)
    assert completion.usage is not None and completion.usage.input_tokens == count_prompt_tokens(HELLO)
    (request,) = fake_openai.requests  # no retries inside complete(): the caller decides
    assert request.body["max_tokens"] == 321 and not request.body.get("stream")


def test_missing_usage_is_unknown(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    """LiteLLM reports 0/0/0 for a non-streamed reply without usage: unknown, not zero."""
    completion = server_complete(fake_openai, "nousage", monkeypatch)
    assert completion.text == "echo: hello there" and completion.usage is None


def test_output_limit_is_a_finish_reason(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    completion = server_complete(fake_openai, "length", monkeypatch)
    assert (completion.text, completion.finish_reason) == (LENGTH_REPLY, "length")


def test_garbage_is_a_clear_failure(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    failure = server_failure(fake_openai, "garbage", monkeypatch)
    assert failure.kind is FailureKind.OTHER and "not valid JSON" in failure.message


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("overflow-openai", FailureKind.INPUT_OVERFLOW),
        ("overflow-code-only", FailureKind.INPUT_OVERFLOW),
        ("ratelimit", FailureKind.RATE_LIMIT),
        ("quota", FailureKind.QUOTA),
        ("auth", FailureKind.AUTH),
    ],
)
def test_failures_are_classified(fake_openai: FakeOpenAIServer, monkeypatch, scenario: str, kind) -> None:
    assert server_failure(fake_openai, scenario, monkeypatch).kind is kind
    assert len(fake_openai.requests) == 1


def test_a_reply_cut_off_is_a_classified_failure(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    # LiteLLM reports a non-streamed body cut half-way as an InternalServerError (status 500),
    # which errors.py classifies as OTHER, not CONNECTION as for a broken stream.
    failure = server_failure(fake_openai, "midstream-error", monkeypatch)
    assert "Connection error" in failure.message and len(fake_openai.requests) == 1


def test_rate_limit_carries_retry_after(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert server_failure(fake_openai, "ratelimit", monkeypatch).retry_after == 1.0


def test_server_window_makes_large_requests_overflow(monkeypatch) -> None:
    small = compaction_messages(TRANSCRIPT[:1])
    large = compaction_messages([*TRANSCRIPT, "[seq 146] user: " + "word " * 400])
    window = count_prompt_tokens(small) + 10
    assert count_prompt_tokens(large) > window
    with FakeOpenAIServer(window=window) as server:
        assert server_complete(server, "summary", monkeypatch, small).finish_reason == "stop"
        failure = server_failure(server, "summary", monkeypatch, large)
        assert failure.kind is FailureKind.INPUT_OVERFLOW
        assert f"maximum context length is {window} tokens" in failure.message
        # Streamed requests meet the same window.
        client = LiteLLMClient(fake_settings(server.base_url))
        route = make_route("openai/ok", "fake", server.base_url)
        with pytest.raises(ProviderError) as caught:
            list(client.stream(ProviderRequest(route, large), CancelToken()))
        assert caught.value.failure.kind is FailureKind.INPUT_OVERFLOW


def test_server_window_can_change_while_running(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    assert fake_openai.window is None
    assert server_complete(fake_openai, "ok", monkeypatch).finish_reason == "stop"
    fake_openai.window = 1
    assert server_failure(fake_openai, "ok", monkeypatch).kind is FailureKind.INPUT_OVERFLOW
    fake_openai.window = None
    assert server_complete(fake_openai, "ok", monkeypatch).finish_reason == "stop"


# -- cancellation and unreadable replies ------------------------------------------------------------


def test_cancelled_before_sending_sends_nothing(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    cancel = CancelToken()
    cancel.cancel()
    assert server_complete(fake_openai, "ok", monkeypatch, cancel=cancel) == CANCELLED_COMPLETION
    assert fake_openai.requests == []


def test_an_answer_after_cancellation_is_dropped(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    cancel = CancelToken()
    litellm = load_litellm()
    real_completion = litellm.completion

    def cancel_while_waiting(**kwargs: Any) -> Any:
        response = real_completion(**kwargs)
        cancel.cancel()  # the user gave up while the request was in flight
        return response

    monkeypatch.setattr(litellm, "completion", cancel_while_waiting)
    assert server_complete(fake_openai, "ok", monkeypatch, cancel=cancel) == CANCELLED_COMPLETION
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    ("response", "detail"),
    [
        ({"id": "x"}, "without choices"),
        ({"choices": []}, "without choices"),
        ({"choices": [{"message": {"content": {"odd": 1}}, "finish_reason": "stop"}]}, "not text"),
        ({"choices": [{"message": {"content": "hi"}}]}, "without a finish reason"),
    ],
)
def test_unreadable_replies_are_provider_errors(
    fake_openai: FakeOpenAIServer, monkeypatch, response, detail
) -> None:
    monkeypatch.setattr(load_litellm(), "completion", lambda **kwargs: response)
    failure = server_failure(fake_openai, "ok", monkeypatch)
    assert failure.kind is FailureKind.OTHER and "unreadable" in failure.message and detail in failure.message


def test_content_parts_are_read_as_text(fake_openai: FakeOpenAIServer, monkeypatch) -> None:
    parts = [
        {"type": "text", "text": "## Goal"},
        {"type": "image_url", "image_url": {}},
        {"type": "text", "text": "!"},
    ]
    response = {"choices": [{"message": {"content": parts}, "finish_reason": "stop"}]}
    monkeypatch.setattr(load_litellm(), "completion", lambda **kwargs: response)
    assert server_complete(fake_openai, "ok", monkeypatch).text == "## Goal!"


# -- the scripted fake ------------------------------------------------------------------------


def test_scripted_client_answers_from_its_summary_script() -> None:
    failure = ProviderError(ProviderFailure(kind=FailureKind.INPUT_OVERFLOW, detail="too long"))
    cut = Completion(text="## Goal\npartial", finish_reason="length", usage=None)
    client = ScriptedClient("a reply", summaries=["## Goal\nfirst", cut, failure])
    request = ProviderRequest(make_route("foya-sim/small", "default"), compaction_messages(TRANSCRIPT))
    assert client.complete(request, CancelToken()) == Completion("## Goal\nfirst", "stop", None)
    assert client.complete(request, CancelToken()) is cut
    with pytest.raises(ProviderError):
        client.complete(request, CancelToken())
    # Once the script runs out, a generic valid summary keeps tests that do not care working.
    assert client.complete(request, CancelToken()).text == GENERIC_SUMMARY
    sections_of(GENERIC_SUMMARY)
    assert client.summary_requests == [request] * 4 and client.requests == []
    assert client.steps == ["a reply"]  # the reply script is separate


def test_scripted_client_honours_cancellation() -> None:
    cancel = CancelToken()
    cancel.cancel()
    client = ScriptedClient(summaries=["## Goal\nunused"])
    request = ProviderRequest(make_route("foya-sim/small", "default"), HELLO)
    assert client.complete(request, cancel) == CANCELLED_COMPLETION
    assert client.summary_requests == [] and len(client.summaries) == 1
