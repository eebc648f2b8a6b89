"""Scenario tests of working-set pressure, end to end on the real LiteLLM path (the simulator as a
custom provider, the loopback HTTP server): a long exploration on an 8K window, a summariser that
always fails, an overflow after streaming began, a native checkpoint and a route switch, and a step
of six parallel ~3K-token reads on a 16K window (SPEC K-1..K-11, C-11, R-2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foya_tui.cli_json import inspect_json, json_of
from foya_tui.runtime.compaction.failures import Trigger
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import CompactionFinished, TurnFailed, TurnFinished
from foya_tui.settings import CompactionSettings, ModelSettings, Settings, ToolSettings
from tests.conftest import FIXED_NOW, make_paths
from tests.fakes.exploration import RULES, ScenarioTally, exploration_project, explore, rules_in_projection


def explorer(tmp_path: Path, **compaction: object) -> Runtime:
    project = exploration_project(tmp_path / "project")
    settings = Settings(
        retry_backoff=0.0,
        approval_mode="read-only",
        tools=ToolSettings(max_steps=60),
        compaction=CompactionSettings(**compaction),  # type: ignore[arg-type]
    )
    return Runtime(settings, make_paths(tmp_path), workdir=project, clock=lambda: FIXED_NOW)


def assert_no_loops(tally: ScenarioTally) -> None:
    """No turn makes more than one reactive recovery; no turn compacts more often than it steps."""
    assert max(tally.reactive_per_turn) <= 1
    assert sum(tally.compactions_per_turn) <= tally.steps + len(tally.compactions_per_turn)


def test_two_hundred_exploration_steps_on_an_8k_window(tmp_path: Path) -> None:
    """The issue's main scenario: 200 steps of exploration on foya-sim/small finish without a
    provider overflow reaching the user, without a loop, and the first turn's rules are still in
    the model's view at the end (K-12)."""
    with explorer(tmp_path) as runtime:
        session = runtime.new_session()
        tally = explore(session, turns=4, steps_per_turn=50)
        assert tally.failures == [] and tally.turns_finished == 5
        assert tally.steps >= 200
        assert tally.overflows_seen_by_user == 0
        assert_no_loops(tally)
        assert tally.peak_share < 1.0
        # K-1: a reminder at most once per compaction epoch (the epochs are the checkpoints + 1)
        assert 1 <= tally.handoffs <= sum(tally.compactions.values()) + 1
        handoffs = [e for e in runtime.parts.store.events(session.id) if e.kind is EventKind.HANDOFF]
        assert len({e.payload["epoch"] for e in handoffs}) == len(handoffs) == tally.handoffs
        assert rules_in_projection(session) == len(RULES)
        assert runtime.verify(session.id).ok
        # A small window's floor is cut (brief tool schemas, a recent window that fits, a shorter
        # summary): each compaction covers many steps (issue 17 item 5: at most one per 10).
        assert 1 <= sum(tally.compactions.values()) <= 20, tally.compactions


def test_snip_spares_compactions_on_a_32k_window(tmp_path: Path) -> None:
    """K-4: on foya-sim/large, old read results leave the view instead of history being
    summarised: far fewer compactions than steps, the tokens kept out counted."""
    with explorer(tmp_path) as runtime:
        session = runtime.new_session(runtime.route_for("foya-sim/large"))
        tally = explore(session, turns=2, steps_per_turn=50)
        assert tally.failures == [] and tally.overflows_seen_by_user == 0
        assert tally.snips["snip"] >= 10 and tally.snip_tokens_saved > 50_000
        assert sum(tally.compactions.values()) <= 2
        view = session.context()
        assert view.snipped_seqs and view.snip_saved_tokens > 0
        assert rules_in_projection(session) == len(RULES)


def test_a_summariser_that_always_fails_trips_the_breaker_and_the_fallback_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """K-11: every summary comes back with its sections out of order; after three summariser
    failures the breaker opens, later compactions ask no model, and the session keeps going on
    fallback checkpoints (K-10)."""
    monkeypatch.setenv("FOYA_SIM_FAULTS", "summary-sections")
    with explorer(tmp_path) as runtime:
        session = runtime.new_session()
        tally = explore(session, turns=1, steps_per_turn=40)
        assert tally.failures == [] and tally.turns_finished == 2
        assert_no_loops(tally)
        diagnostics = [d.payload for d in runtime.inspect(session.id).diagnostics]
        failed = [d for d in diagnostics if d["summariser_failed"]]
        assert len(failed) == 3
        accepted = [d for d in diagnostics if d["outcome"] == "accepted"]
        assert len(accepted) > 3 and {d["producer"] for d in accepted} == {"fallback"}
        # after the third failure, no fallback attempt asked a model first
        third = diagnostics.index(failed[-1])
        later = [d for d in diagnostics[third + 1 :] if d["outcome"] == "accepted"]
        assert later and all(d["requests"] == 0 for d in later)
        assert inspect_json(runtime.inspect(session.id))["breaker"]["state"] == "open"
        assert rules_in_projection(session) == len(RULES)


def test_an_overflow_after_streaming_began_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """K-6: the provider rejects the context after text was delivered: no reactive compaction,
    no replay; one clear message; the partial reply stays in history."""
    with explorer(tmp_path) as runtime:
        session = runtime.new_session()
        list(session.send("hello"))
        monkeypatch.setenv("FOYA_SIM_FAULTS", "overflow-midstreamx1")
        updates = list(session.send("tell me about the files here"))
        assert not any(isinstance(u, CompactionFinished) for u in updates)
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "input_overflow"
        assert "already started" in failed.reason and "K-6" not in failed.reason  # words, not rule ids
        last = runtime.parts.store.last_event(session.id, EventKind.ASSISTANT_MESSAGE)
        assert last is not None and last.payload.get("finish_reason") == "error" and last.payload.get("text")
        assert runtime.parts.store.events(session.id)[-1].kind is EventKind.TURN_OUTCOME


def test_a_native_checkpoint_is_never_sent_to_another_route(tmp_path: Path) -> None:
    """C-11, R-2: on foya-sim/native the checkpoint is the provider's own state, sent back to it;
    after a switch to foya-sim/large the state is never sent (the simulator refuses any foreign
    state loudly), the portable history is used instead, and the switch back uses the state again."""
    with explorer(tmp_path) as runtime:
        native = runtime.route_for("foya-sim/native")
        session = runtime.new_session(native)
        tally = explore(session, turns=1, steps_per_turn=30)
        assert tally.failures == []
        # Snip keeps this exploration under the compaction line by itself (K-4): compact by hand.
        assert runtime.parts.compaction.compact(session.id, native, Trigger.MANUAL).accepted
        checkpoint = runtime.parts.compiler.checkpoint_state(session.id).current
        assert checkpoint is not None and checkpoint.producer == "native"
        assert checkpoint.native_state is not None and checkpoint.route_id == native.id
        view = session.context()
        assert view.native_state == checkpoint.native_state and view.layers.native_state > 0
        session.switch_route(runtime.route_for("foya-sim/large"))
        view = session.context()
        assert view.native_state is None and view.layers.native_state == 0
        assert json_of(view.report())["native"]["sent"] is False
        updates = list(session.send("what did you find so far?"))
        assert isinstance(updates[-1], TurnFinished), updates[-1]
        session.switch_route(native)
        updates = list(session.send("and now?"))
        assert isinstance(updates[-1], TurnFinished), updates[-1]
        report = inspect_json(runtime.inspect(session.id))
        assert any(c.get("native_state_bytes") for c in report["checkpoints"])


def test_native_compaction_that_fails_falls_back_to_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C-11: an answer that is not a JSON object is not a state: the text compactor takes over."""
    monkeypatch.setenv("FOYA_SIM_FAULTS", "native-invalid")
    with explorer(tmp_path) as runtime:
        session = runtime.new_session(runtime.route_for("foya-sim/native"))
        explore(session, turns=1, steps_per_turn=6)
        result = runtime.parts.compaction.compact(session.id, session.route, Trigger.MANUAL)
        assert result.accepted and result.producer in ("llm", "repaired"), result.reason
        reasons = [d.payload["reason"] for d in runtime.inspect(session.id).diagnostics]
        assert any("native compaction unavailable" in reason for reason in reasons)


def test_six_parallel_large_reads_on_a_16k_window_never_get_a_compaction_request_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's comparison: 10 steps of 6 parallel reads of ~3K tokens each on a 16K window. No
    compaction request is ever rejected by the provider, no overflow reaches the user, and the
    user's original request is still in the model's view at the end."""
    from tests.conftest import fake_settings
    from tests.fakes.openai_server import FakeOpenAIServer

    project = tmp_path / "project"
    project.mkdir()
    paths = []
    for index in range(6):
        name = f"data_{index}.txt"
        (project / name).write_text(
            "".join(f"record {index}-{n}: value {n * 7 % 1000} ok\n" for n in range(400)), encoding="utf-8"
        )
        paths.append(name)
    request = "Read the six data files in parallel, ten times, and tell me what changed."
    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-parallel")
    with FakeOpenAIServer(window=16_384, parallel_paths=tuple(paths), parallel_steps=10) as server:
        settings = fake_settings(
            server.base_url,
            model="openai/parallel",
            approval_mode="read-only",
            models={"openai/parallel": ModelSettings(window=16_384)},
            tools=ToolSettings(max_steps=20),
        )
        with Runtime(settings, make_paths(tmp_path), workdir=project, clock=lambda: FIXED_NOW) as runtime:
            session = runtime.new_session()
            tally = ScenarioTally()
            tally.run(session, request)
            compaction_requests = [r for r in server.chat_requests if r.compaction]
            assert [r for r in compaction_requests if r.overflow] == []
            assert tally.overflows_seen_by_user == 0 and tally.failures == []
            assert tally.steps == 60
            assert_no_loops(tally)
            sent = json.dumps(list(session.context().messages))
            assert request in sent
