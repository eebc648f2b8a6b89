"""Checks the fake OpenAI server itself with plain http.client, independent of LiteLLM."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from . import fixtures
from .openai_server import ERROR_RESPONSES, SCENARIOS, FakeOpenAIServer

# Bound here so pytest finds the fixture in this module whether or not a conftest loads
# tests.fakes.fixtures as a plugin (an assignment, unlike an import, is not flagged as shadowed).
fake_openai = fixtures.fake_openai

USER_MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": "hello big wide world"},
]
# len(text) // 4 + 4 per message: 14//4+4 + 14//4+4 + 12//4+4 + 20//4+4 = 7 + 7 + 7 + 9.
EXPECTED_PROMPT_TOKENS = 30
EXPECTED_REPLY = "echo: hello big wide world"


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_data(self) -> list[str]:
        """The `data:` payloads of an SSE body, in order."""
        events = self.body.decode().split("\n\n")
        return [event.removeprefix("data: ") for event in events if event.startswith("data: ")]

    def sse_chunks(self) -> list[dict[str, Any]]:
        """The JSON chunks of an SSE body, without the closing [DONE]."""
        return [json.loads(data) for data in self.sse_data() if data != "[DONE]"]


def _connect(server: FakeOpenAIServer) -> http.client.HTTPConnection:
    url = urlsplit(server.base_url)
    return http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=5)


def request(server: FakeOpenAIServer, method: str, path: str, body: bytes | None = None) -> Response:
    connection = _connect(server)
    try:
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-test-123"}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        connection.close()


def chat(server: FakeOpenAIServer, model: str, **extra: Any) -> Response:
    body = {"model": model, "messages": USER_MESSAGES, **extra}
    return request(server, "POST", "/v1/chat/completions", json.dumps(body).encode())


def stream_content(chunks: list[dict[str, Any]]) -> str:
    return "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])


# --- normal replies ------------------------------------------------------------------------


def test_ok_non_stream_returns_echo_and_usage(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "ok")

    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "ok"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": EXPECTED_REPLY, "refusal": None}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {
        "prompt_tokens": EXPECTED_PROMPT_TOKENS,
        "completion_tokens": 5,
        "total_tokens": 35,
    }


def test_ok_stream_without_include_usage_sends_no_usage(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "ok", stream=True)

    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert "content-length" not in response.headers
    assert response.sse_data()[-1] == "[DONE]"
    chunks = response.sse_chunks()
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    content_chunks = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content_chunks) >= 3
    assert stream_content(chunks) == EXPECTED_REPLY
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}


def test_ok_stream_with_include_usage_ends_with_usage_chunk(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "ok", stream=True, stream_options={"include_usage": True})

    assert response.sse_data()[-1] == "[DONE]"
    chunks = response.sse_chunks()
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "prompt_tokens": EXPECTED_PROMPT_TOKENS,
        "completion_tokens": 5,
        "total_tokens": 35,
    }
    assert all("usage" not in chunk for chunk in chunks[:-1])
    assert stream_content(chunks) == EXPECTED_REPLY


def test_nousage_never_sends_usage(fake_openai: FakeOpenAIServer) -> None:
    assert "usage" not in chat(fake_openai, "nousage").json()
    streamed = chat(fake_openai, "nousage", stream=True, stream_options={"include_usage": True})
    chunks = streamed.sse_chunks()
    assert all("usage" not in chunk for chunk in chunks)
    assert stream_content(chunks) == EXPECTED_REPLY
    assert streamed.sse_data()[-1] == "[DONE]"


def test_zerousage_reports_zeros(fake_openai: FakeOpenAIServer) -> None:
    zeros = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert chat(fake_openai, "zerousage").json()["usage"] == zeros
    chunks = chat(fake_openai, "zerousage", stream=True, stream_options={"include_usage": True}).sse_chunks()
    assert chunks[-1]["usage"] == zeros


def test_length_finishes_with_length(fake_openai: FakeOpenAIServer) -> None:
    body = chat(fake_openai, "length").json()
    assert body["choices"][0]["message"]["content"] == "truncated repl"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 2

    chunks = chat(fake_openai, "length", stream=True, stream_options={"include_usage": True}).sse_chunks()
    assert stream_content(chunks) == "truncated repl"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


def test_tools_non_stream_returns_one_tool_call(fake_openai: FakeOpenAIServer) -> None:
    body = chat(fake_openai, "tools").json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
        }
    ]
    assert body["usage"]["total_tokens"] > 0


def test_tools_stream_reassembles_into_the_tool_call(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "tools", stream=True, stream_options={"include_usage": True})
    chunks = response.sse_chunks()

    first = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
    assert first == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    argument_deltas = [
        call
        for chunk in chunks[1:]
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ]
    assert len(argument_deltas) >= 2
    assert all(call["index"] == 0 and set(call) == {"index", "function"} for call in argument_deltas)
    arguments = "".join(call["function"]["arguments"] for call in argument_deltas)
    assert json.loads(arguments) == {"path": "README.md"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["total_tokens"] > 0
    assert response.sse_data()[-1] == "[DONE]"


def test_slow_streams_with_pauses(fake_openai: FakeOpenAIServer) -> None:
    started = time.monotonic()
    chunks = chat(fake_openai, "slow", stream=True).sse_chunks()
    elapsed = time.monotonic() - started

    assert stream_content(chunks) == EXPECTED_REPLY
    assert elapsed >= 0.05 * (len(chunks) - 1)


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "status", "code"),
    [
        ("overflow-openai", 400, "context_length_exceeded"),
        ("overflow-vllm", 400, 400),
        ("overflow-llamacpp", 400, 400),
        ("overflow-code-only", 400, "context_length_exceeded"),
        ("ratelimit", 429, "rate_limit_exceeded"),
        ("quota", 429, "insufficient_quota"),
        ("auth", 401, "invalid_api_key"),
        ("servererror", 500, None),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_scenarios_return_documented_status_and_body(
    fake_openai: FakeOpenAIServer, scenario: str, status: int, code: object, stream: bool
) -> None:
    response = chat(fake_openai, scenario, stream=stream)

    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body == ERROR_RESPONSES[scenario].body
    # vLLM puts its fields at the top level; the others nest them under "error".
    assert body.get("error", body)["code"] == code


def test_error_bodies_match_the_documented_messages(fake_openai: FakeOpenAIServer) -> None:
    assert (
        chat(fake_openai, "overflow-openai")
        .json()["error"]["message"]
        .startswith("This model's maximum context length is 8192 tokens.")
    )
    vllm = chat(fake_openai, "overflow-vllm").json()
    assert vllm["object"] == "error"
    assert vllm["type"] == "BadRequestError"
    assert "maximum context length is 4096 tokens" in vllm["message"]
    llamacpp = chat(fake_openai, "overflow-llamacpp").json()["error"]
    assert llamacpp["type"] == "exceed_context_size_error"
    assert (llamacpp["n_prompt_tokens"], llamacpp["n_ctx"]) == (9000, 8192)
    assert chat(fake_openai, "overflow-code-only").json()["error"]["message"] == (
        "Input is too big for this deployment (ref 7781)."
    )
    assert chat(fake_openai, "quota").json()["error"]["type"] == "insufficient_quota"


def test_ratelimit_sends_retry_after(fake_openai: FakeOpenAIServer) -> None:
    assert chat(fake_openai, "ratelimit").headers["retry-after"] == "1"


def test_unknown_model_is_404(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "no-such-model")

    assert response.status == 404
    assert response.json() == {
        "error": {
            "message": "The model `no-such-model` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }


def test_garbage_is_not_json(fake_openai: FakeOpenAIServer) -> None:
    response = chat(fake_openai, "garbage")
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    assert response.body == b"this is not json <html>"

    streamed = chat(fake_openai, "garbage", stream=True)
    assert streamed.headers["content-type"] == "text/event-stream"
    payloads = [data for data in streamed.sse_data() if data != "[DONE]"]
    assert payloads
    for data in payloads:
        with pytest.raises(json.JSONDecodeError):
            json.loads(data)


def test_midstream_error_breaks_off_the_stream(fake_openai: FakeOpenAIServer) -> None:
    connection = _connect(fake_openai)
    body = {"model": "midstream-error", "messages": USER_MESSAGES, "stream": True}
    try:
        connection.request("POST", "/v1/chat/completions", body=json.dumps(body).encode())
        response = connection.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as excinfo:
            response.read()
    finally:
        connection.close()

    partial = excinfo.value.partial.decode()
    events = [event.removeprefix("data: ") for event in partial.split("\n\n") if event.startswith("data: ")]
    assert len(events) == 3
    assert "[DONE]" not in partial
    assert stream_content([json.loads(event) for event in events]) == "partial answer"


def test_bad_json_request_is_400_and_recorded(fake_openai: FakeOpenAIServer) -> None:
    response = request(fake_openai, "POST", "/v1/chat/completions", b"{not json")

    assert response.status == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert [(r.path, r.body) for r in fake_openai.requests] == [("/v1/chat/completions", {})]


def test_unknown_path_is_404(fake_openai: FakeOpenAIServer) -> None:
    assert request(fake_openai, "POST", "/v1/embeddings", b"{}").status == 404
    assert request(fake_openai, "GET", "/v1/nothing").status == 404


# --- bookkeeping -----------------------------------------------------------------------------


def test_models_lists_the_scenarios(fake_openai: FakeOpenAIServer) -> None:
    response = request(fake_openai, "GET", "/v1/models")

    assert response.status == 200
    ids = [model["id"] for model in response.json()["data"]]
    assert ids == list(SCENARIOS)
    assert {"ok", "tools", "overflow-openai", "ratelimit", "garbage", "midstream-error", "slow"} <= set(ids)


def test_requests_are_recorded_and_reset(fake_openai: FakeOpenAIServer) -> None:
    chat(fake_openai, "ok", temperature=0)
    chat(fake_openai, "auth")

    recorded = fake_openai.requests
    assert [r.body["model"] for r in recorded] == ["ok", "auth"]
    first = recorded[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-test-123"
    assert first.headers["content-type"] == "application/json"
    assert first.body == {"model": "ok", "messages": USER_MESSAGES, "temperature": 0}

    # The property hands out a copy, so callers cannot disturb the server's list.
    recorded.clear()
    assert len(fake_openai.requests) == 2

    fake_openai.reset()
    assert fake_openai.requests == []


def test_base_url_and_clean_stop() -> None:
    server = FakeOpenAIServer().start()
    base_url = server.base_url
    assert base_url.startswith("http://127.0.0.1:")
    assert base_url.endswith("/v1")
    assert chat(server, "ok").status == 200

    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1
    server.stop()  # stopping twice is harmless

    url = urlsplit(base_url)
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=1).request(
            "GET", "/v1/models"
        )
    with pytest.raises(RuntimeError):
        _ = server.base_url
