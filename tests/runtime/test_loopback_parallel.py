"""Tests the loopback server's `parallel` scenario (six parallel reads per step, then a text answer)
and what it records about every request: compaction or not, prompt tokens, rejected as an overflow
or not — over plain HTTP, through LiteLLM's real HTTP path, and through a whole runtime turn
(SPEC C-2, C-4, T-1)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest, StreamFinished
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.providers.summary_format import COMPACTION_MARKER, SECTION_HEADINGS
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import TurnFinished
from foya_tui.runtime.view.history import valid_events
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.openai_server import FakeOpenAIServer, count_prompt_tokens
from tests.fakes.test_openai_server import request

PATHS = tuple(f"data/part_{index}.txt" for index in range(1, 7))
SECRET = "sk-test-parallel"


def chat(server: FakeOpenAIServer, messages: list[dict[str, Any]], **extra: Any) -> Any:
    body = {"model": "parallel", "messages": messages, **extra}
    return request(server, "POST", "/v1/chat/completions", json.dumps(body).encode())


def step_messages(step: int) -> list[dict[str, Any]]:
    """A step's calls and results, as a client sends them back."""
    calls = [
        {
            "id": f"call_par_{step}_{index}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
        }
        for index, path in enumerate(PATHS, 1)
    ]
    results = [{"role": "tool", "tool_call_id": call["id"], "content": "x" * 40} for call in calls]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


@pytest.fixture
def server() -> Any:
    with FakeOpenAIServer(parallel_paths=PATHS, parallel_steps=3) as running:
        yield running


USER = [{"role": "user", "content": "read all the parts"}]


def test_each_step_asks_for_six_parallel_reads(server: FakeOpenAIServer) -> None:
    body = chat(server, USER).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [call["id"] for call in calls] == [f"call_par_1_{index}" for index in range(1, 7)]
    assert [json.loads(call["function"]["arguments"])["path"] for call in calls] == list(PATHS)
    assert {call["function"]["name"] for call in calls} == {"read_file"}


def first_call_id(server: FakeOpenAIServer, messages: list[dict[str, Any]]) -> str:
    return chat(server, messages).json()["choices"][0]["message"]["tool_calls"][0]["id"]


def test_the_step_is_read_back_from_the_ids_the_request_shows(server: FakeOpenAIServer) -> None:
    assert first_call_id(server, [*USER, *step_messages(1)]) == "call_par_2_1"
    # After a compaction only the latest step may still be visible: the turn goes on from there.
    compacted = [{"role": "user", "content": "[Checkpoint …]"}, *USER, *step_messages(2)]
    assert first_call_id(server, compacted) == "call_par_3_1"
    final = chat(server, [*USER, *step_messages(3)]).json()["choices"][0]
    assert final["finish_reason"] == "stop"
    assert final["message"]["content"] == "Read 3 batches of 6 files in parallel."


def test_a_streamed_step_opens_each_call_then_sends_its_arguments(server: FakeOpenAIServer) -> None:
    response = chat(server, USER, stream=True, stream_options={"include_usage": True})
    deltas = [
        call
        for chunk in response.sse_chunks()
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ]
    openings = [delta for delta in deltas if "id" in delta]
    assert [delta["index"] for delta in openings] == list(range(6))
    assert all(delta["function"]["arguments"] == "" for delta in openings)
    for index, path in enumerate(PATHS):
        pieces = [d["function"]["arguments"] for d in deltas if d["index"] == index and "id" not in d]
        assert len(pieces) == 2 and json.loads("".join(pieces)) == {"path": path}
    assert response.sse_chunks()[-1]["usage"]["completion_tokens"] == 60


def test_compaction_requests_get_a_summary_and_every_request_is_recorded(server: FakeOpenAIServer) -> None:
    compaction = [
        {"role": "system", "content": f"{COMPACTION_MARKER}\nSummarise."},
        {
            "role": "user",
            "content": '<transcript from_seq="4" through_seq="9">\n[seq 4] user: hi\n</transcript>',
        },
    ]
    text = chat(server, compaction).json()["choices"][0]["message"]["content"]
    assert [line for line in text.splitlines() if line.startswith("## ")] == list(SECTION_HEADINGS)
    server.window = 50
    big = [{"role": "user", "content": "y" * 400}]
    assert chat(server, big).status == 400
    chat(server, USER)
    first, second, third = server.chat_requests
    assert (first.compaction, first.overflow) == (True, False)
    assert first.prompt_tokens == count_prompt_tokens(tuple(compaction))
    assert (second.compaction, second.overflow, second.prompt_tokens) == (False, True, 104)
    assert (third.compaction, third.overflow) == (False, False) and third.scenario == "parallel"
    # The named overflow scenarios count as rejected too; other requests carry no facts.
    request(
        server,
        "POST",
        "/v1/chat/completions",
        json.dumps({"model": "overflow-vllm", "messages": USER}).encode(),
    )
    request(server, "GET", "/v1/models")
    overflow, listing = server.requests[-2:]
    assert overflow.overflow and not listing.overflow and listing.prompt_tokens == 0
    assert len(server.chat_requests) == 4


def test_litellm_reassembles_the_six_parallel_calls(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    client = LiteLLMClient(fake_settings(server.base_url))
    route = make_route("openai/parallel", "fake", server.base_url)
    *_, finished = client.stream(ProviderRequest(route, tuple(USER)), CancelToken())
    assert isinstance(finished, StreamFinished) and finished.finish_reason == "tool_calls"
    assert [call.id for call in finished.tool_calls] == [f"call_par_1_{index}" for index in range(1, 7)]
    assert [json.loads(call.arguments)["path"] for call in finished.tool_calls] == list(PATHS)
    server.window = 5  # the request counts 8
    with pytest.raises(ProviderError) as caught:
        client.complete(ProviderRequest(route, tuple(USER)), CancelToken())
    assert caught.value.failure.kind is FailureKind.INPUT_OVERFLOW
    assert server.chat_requests[-1].overflow


def test_a_runtime_turn_runs_every_batch_and_keeps_each_group_whole(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three steps of six parallel reads of real files, then the answer: eighteen results, each
    group complete (SPEC C-4), and no request rejected."""
    for index, path in enumerate(PATHS, 1):
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"part {index}\n" * 20, encoding="utf-8")
    monkeypatch.setenv("FOYA_TEST_KEY", SECRET)
    with FakeOpenAIServer(parallel_paths=PATHS, parallel_steps=3) as server:
        settings = fake_settings(server.base_url, model="openai/parallel")
        settings = replace(settings, tools=replace(settings.tools, max_steps=10))
        with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
            session = runtime.new_session()
            updates = list(session.send("read all the parts"))
            assert isinstance(updates[-1], TurnFinished)
            events = valid_events(runtime.parts.store.events(session.id))
        results = [e.payload for e in events if e.kind is EventKind.TOOL_RESULT]
        assert [r["tool_call_id"] for r in results] == [
            f"call_par_{s}_{i}" for s in (1, 2, 3) for i in range(1, 7)
        ]
        assert all("part" in r["content"] and not r["is_error"] for r in results)
        assert not any(r.overflow for r in server.chat_requests)
        assert len(server.chat_requests) == 4
