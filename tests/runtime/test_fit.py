"""Tests that every request fits (SPEC T-4, C-12 extended): parallel steps far larger than the
window's compaction line finish on the loopback server without a refused request, no request is
sent over the line while a fitting form exists, an oversized anchor is cut in the model's view only,
and acceptance goes on past a candidate that is smaller but still does not fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.compaction.acceptance import OVER_THE_LINE
from foya_tui.runtime.compaction.failures import Trigger
from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TokenCounter, counter_for_model
from foya_tui.runtime.tools.registry import HISTORY_EVENT_TOOL, ToolContext
from foya_tui.runtime.updates import TurnFailed, TurnFinished
from foya_tui.settings import ModelSettings, Settings
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.fit import STEPS, run_fit
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripted import ScriptedClient
from tests.runtime.test_compaction import import_session, scripted_runtime, summary, tool_turn


@pytest.mark.parametrize("calls", [6, 8, 10])
def test_parallel_steps_far_over_the_line_all_finish_and_every_request_fits(
    calls: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's comparison: 16,000-token window, `calls` parallel reads of 15,000 characters per
    step, 10 steps. One step alone is several times the compaction line (SPEC T-4)."""
    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-fit")
    run = run_fit(tmp_path, calls)
    assert run.failures == ()
    assert run.steps_finished == STEPS and run.tool_calls == STEPS * calls
    assert run.refused == 0
    assert run.over_line == 0, f"largest sent estimate {run.largest_line_share:.0%} of its line"
    assert run.largest_share < 0.8


OBSERVATION = "".join(f"line {n}: observation output {n * 31 % 977} bytes ok\n" for n in range(1_000))
"""~48,000 characters: over an 8,192-token window on its own."""


def read_whole_event(runtime: Runtime, session_id: str, seq: int) -> str:
    """An event's text as the model would read it back with history_read, page by page."""
    context = ToolContext(workdir=Path("."), session_id=session_id, store=runtime.parts.store)
    pages, offset = [], 0
    while True:
        page = runtime.parts.registry.call(
            HISTORY_EVENT_TOOL, json.dumps({"seq": seq, "offset": offset, "length": 32_000}), context
        )
        assert not page.is_error, page.content
        start, end = page.metadata["offset"], page.metadata["end"]
        pages.append(page.content[len(page.content) - (end - start) :])
        if not page.metadata["truncated"]:
            return "".join(pages)
        offset = end


def test_an_imported_anchor_larger_than_the_window_is_cut_in_the_view_only(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC T-4, C-1: the latest user message alone is bigger than the window (a text-only agent's
    observation). The next request fits; the model sees head and tail with seq, SHA-256 and a
    pointer to history_read, which returns the whole message; history is byte-identical."""
    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-fit")
    transcript = [
        {"role": "user", "content": "Find why the import job is slow."},
        {"role": "assistant", "content": "I ran the job with tracing on."},
        {"role": "user", "content": OBSERVATION},
    ]
    with FakeOpenAIServer(window=8_192) as server:
        settings = fake_settings(
            server.base_url, model="openai/ok", models={"openai/ok": ModelSettings(window=8_192)}
        )
        with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
            info = runtime.import_transcript(json.dumps(transcript).encode(), "observed.json")
            before = [(e.seq, e.kind, e.payload) for e in runtime.parts.store.events(info.id)]
            anchor = before[-1][0]
            session = runtime.open_session(info.id)
            view = session.context()
            assert view.shortened_messages == (anchor,)
            assert view.estimate.total <= view.budget.high_water
            sent = "\n".join(content_text(message.get("content")) for message in view.messages)
            assert OBSERVATION not in sent and OBSERVATION[:1_000] in sent and OBSERVATION[-500:] in sent
            assert f"seq={anchor}" in sent and sha256_hex(OBSERVATION) in sent and HISTORY_EVENT_TOOL in sent
            assert HISTORY_EVENT_TOOL in {tool["function"]["name"] for tool in view.tools}
            report = view.report()
            assert report.shortened_messages == (anchor,)
            assert any("more than half of the input budget" in notice for notice in report.notices)

            updates = list(session.send("Go on from that output."))
            assert isinstance(updates[-1], TurnFinished), updates[-1]
            assert not any(request.overflow for request in server.chat_requests)
            after = [(e.seq, e.kind, e.payload) for e in runtime.parts.store.events(info.id)]
            assert after[: len(before)] == before  # history never changes (SPEC H-2)
            assert read_whole_event(runtime, info.id, anchor) == OBSERVATION


def long_summary(tokens: int, counter: TokenCounter) -> str:
    """A valid five-section summary (SPEC C-8) of at least `tokens` tokens."""
    facts = []
    text = summary()
    while counter.count(text) < tokens:
        facts.extend(
            f"- module_{n}.py: f{n} sets x to 1 and returns None." for n in range(len(facts), len(facts) + 20)
        )
        text = summary(critical="\n".join(facts))
    return text


def working_set_transcript() -> list[dict[str, Any]]:
    """Six earlier requests with a read each, then the latest request and its step of two reads."""
    earlier = [m for index in range(6) for m in tool_turn(index, size=4_000)]
    latest = tool_turn(9, size=4_000)[:3]
    second = tool_turn(10, size=4_000, call_id="call_10")[1:3]
    latest[1]["tool_calls"] += second[0]["tool_calls"]
    return [*earlier, *latest, second[1]]


def test_a_smaller_candidate_over_the_line_is_not_the_end_state_the_fallback_fits(
    tmp_path: Path, workdir: Path
) -> None:
    """SPEC C-12 extended: the summary is smaller than what it replaces but leaves the next request
    over the compaction line. That is recorded (stage and reason) and the pipeline goes on: the
    deterministic fallback, tightened until it fits, is what is committed."""
    client = ScriptedClient()
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, working_set_transcript())
        route = runtime.open_session(session_id).route
        before = runtime.parts.compiler.compile(session_id, route)
        counter = counter_for_model(route.model)
        rest = before.layers.pinned + before.layers.tool_schema + before.layers.working_set
        # Over the line, yet under K-9's half-window gate (which would refuse it for another reason).
        client.summaries.append(long_summary(before.budget.high_water - rest + 150, counter))

        result = runtime.parts.compaction.compact(session_id, route, Trigger.BUDGET)
        assert result.accepted and result.producer == "fallback", result.reason
        rejected = [
            d.payload for d in runtime.inspect(session_id).diagnostics if d.payload["outcome"] == "rejected"
        ]
        assert len(rejected) == 1 and rejected[0]["reason"].startswith(OVER_THE_LINE)
        assert rejected[0]["stage"] == "validating" and rejected[0]["producer"] == "llm"
        after = runtime.parts.compiler.compile(session_id, route)
        assert after.checkpoint is not None and after.checkpoint.producer == "fallback"
        assert after.estimate.total <= after.budget.high_water


def test_a_second_manual_compaction_the_gate_refuses_falls_back_to_a_smaller_checkpoint(
    tmp_path: Path, workdir: Path
) -> None:
    """Issue 14 item 5 (SPEC K-9, K-10): a few turns after the first compaction, the model's second
    summary carries the first one over and is refused by the 80% effect gate. The reason names the
    part that is too large, and a smaller checkpoint from the deterministic fallback is committed:
    never a bare refusal while one exists."""
    client = ScriptedClient()
    settings = Settings(retry_backoff=0.0, model="foya-sim/large")  # no budget compaction between
    with Runtime(
        settings, make_paths(tmp_path), client=client, workdir=workdir, clock=lambda: FIXED_NOW
    ) as runtime:
        session_id = import_session(runtime, [m for index in range(3) for m in tool_turn(index, size=2_000)])
        route = runtime.open_session(session_id).route
        counter = counter_for_model(route.model)
        # The second summary restates the first at length: most of it is carried over.
        client.summaries.extend([long_summary(1_200, counter), *[long_summary(3_300, counter)] * 7])
        assert runtime.compact(session_id).accepted
        session = runtime.open_session(session_id)
        for text in ("and module_7.py? " * 250, "and module_8.py? " * 250, "thanks " * 400):
            assert isinstance(list(session.send(text))[-1], TurnFinished)

        second = runtime.compact(session_id)
        assert second.accepted and second.producer == "fallback", second.reason
        refused = [
            d.payload for d in runtime.inspect(session_id).diagnostics if d.payload["outcome"] == "rejected"
        ]
        assert len(refused) == 1 and "not enough reduction" in refused[0]["reason"]
        assert "is the largest part" in refused[0]["reason"]
        view = runtime.parts.compiler.compile(session_id, route)
        assert view.checkpoint is not None and view.checkpoint.producer == "fallback"
        assert view.estimate.total <= view.budget.high_water


def test_when_nothing_can_fit_the_overflow_says_what_is_too_large(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC C-12 extended, 001: the route is configured larger than the provider really is, so even
    the cut message is refused. The request went to the provider anyway (it is the final judge) and
    the turn fails with one line that says what is too large."""
    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-fit")
    with FakeOpenAIServer(window=3_000) as server:
        settings = fake_settings(
            server.base_url, model="openai/ok", models={"openai/ok": ModelSettings(window=16_000)}
        )
        with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
            session = runtime.new_session()
            updates = list(session.send("word " * 15_000))
    failed = updates[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "input_overflow"
    assert failed.reason.startswith("your message alone is ")
    assert "tokens; the model's input budget is 12,000" in failed.reason
    assert "\n" not in failed.reason and "SPEC" not in failed.reason
    assert any(request.overflow for request in server.chat_requests)
