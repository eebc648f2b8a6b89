"""Tests the compaction paths beyond one summary: the deterministic fallback (SPEC K-10, K-12), the
effect gates (K-9), summary sampling with a shrinking input (K-8), the circuit breaker (K-11), the
compaction hook (K-7), a separate summary route, and reactive recovery at provider boundaries (K-6).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from foya_tui.cli import main
from foya_tui.cli_json import inspect_json
from foya_tui.runtime.compaction.acceptance import effect_gate_problems
from foya_tui.runtime.compaction.failures import Outcome, Trigger
from foya_tui.runtime.compaction.planner import NothingToCompact, plan_compaction
from foya_tui.runtime.compaction.summary import REREADABLE_OMITTED, summary_problems
from foya_tui.runtime.model import EventKind, NewEvent, ToolCall
from foya_tui.runtime.providers.client import (
    CancelToken,
    Completion,
    ProviderRequest,
    StreamEvent,
    StreamFinished,
    TextDelta,
)
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, ProviderFailure
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import (
    CompactionFinished,
    ContextSnipped,
    HandoffRecorded,
    TurnFailed,
    TurnFinished,
)
from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.settings import CompactionSettings, ModelSettings, Settings
from tests.conftest import FIXED_NOW, make_paths
from tests.fakes.scripted import GENERIC_SUMMARY, ScriptedClient
from tests.runtime.test_compaction import import_session, projection_is_well_formed, tool_turn

RULE = "Always answer in British English and never touch vendor/."
OVERFLOW = ProviderError(ProviderFailure(kind=FailureKind.INPUT_OVERFLOW, detail="too long"))
RULE_SUMMARY = GENERIC_SUMMARY.replace("Scripted critical context", RULE)
"""A valid summary of `long_session`: it states the first turn's rule, as K-12's check requires."""


def runtime_with(tmp_path: Path, workdir: Path, client: Any, **compaction: Any) -> Runtime:
    settings = Settings(retry_backoff=0.0, compaction=CompactionSettings(**compaction))
    return Runtime(settings, make_paths(tmp_path), client=client, workdir=workdir, clock=lambda: FIXED_NOW)


def long_session(runtime: Runtime, turns: int = 8, size: int = 1200) -> str:
    first = [{"role": "user", "content": RULE}, {"role": "assistant", "content": "Understood."}]
    return import_session(runtime, [*first, *(m for i in range(1, turns + 1) for m in tool_turn(i, size))])


def diagnostics(runtime: Runtime, session_id: str) -> list[dict[str, Any]]:
    return [dict(d.payload) for d in runtime.inspect(session_id).diagnostics]


# -- the deterministic fallback (K-10, K-12) ---------------------------------------------------


def test_fallback_makes_a_valid_checkpoint_without_any_model(tmp_path: Path, workdir: Path) -> None:
    """K-10: no request is sent; the checkpoint passes the same checks as a model's (five sections,
    acceptance, verify); the rule of the first turn survives verbatim in the ledger (K-12)."""
    client = ScriptedClient()
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime)
        result = runtime.compact(session_id, use_model=False)
        assert result.outcome is Outcome.ACCEPTED, result.reason
        assert client.summary_requests == [] and result.requests == 0
        checkpoint = result.checkpoint
        assert checkpoint is not None and checkpoint.producer == "fallback"
        (segment,) = checkpoint.segments
        assert summary_problems(segment.text, "stop", (segment.from_seq, segment.through_seq)) == []
        assert result.tokens_after is not None and result.tokens_after < result.tokens_before
        view = runtime.context(session_id)
        sent = json.dumps(list(view.messages))
        assert RULE in sent
        assert projection_is_well_formed(list(view.messages)[1:])
        assert runtime.verify(session_id).ok
        assert diagnostics(runtime, session_id)[-1]["producer"] == "fallback"


def test_fallback_keeps_whole_units_from_the_newest_end(tmp_path: Path, workdir: Path) -> None:
    """K-10: kept messages are whole units, newest last; a tool call never loses its result."""
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        session_id = long_session(runtime, turns=10)
        checkpoint = runtime.compact(session_id, use_model=False).checkpoint
        assert checkpoint is not None and checkpoint.kept_messages
        kept = list(checkpoint.kept_messages)
        assert projection_is_well_formed(kept)
        # the newest covered unit is kept: standalone covers all but the last step
        texts = [m.get("content") or "" for m in kept]
        assert any("module_10.py" in text or "module_9.py" in text for text in texts)
        assert all(m["role"] != "tool" or m["tool_call_id"] in json.dumps(kept) for m in kept)


def test_fallback_never_keeps_image_bytes(tmp_path: Path, workdir: Path) -> None:
    """K-10, K-13: an image in a kept unit becomes a placeholder."""
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
        ],
    }
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        session_id = import_session(
            runtime,
            [
                *tool_turn(1, 3000),
                *tool_turn(2, 3000),
                image,
                {"role": "assistant", "content": "a pixel"},
                *tool_turn(3, 3000),
            ],
        )
        checkpoint = runtime.compact(session_id, use_model=False).checkpoint
        assert checkpoint is not None
        assert pixel[:20] not in checkpoint.serialised()


# -- effect gates (K-9) ----------------------------------------------------------------------------


def test_effect_gates() -> None:
    """K-9: at most 80% of a large source; at most half the window; at most 50,000 tokens."""
    assert effect_gate_problems(replacement=700, source=1_000, window=100_000) == []  # small source
    assert effect_gate_problems(replacement=3_000, source=4_000, window=100_000) == []
    assert "not enough reduction" in effect_gate_problems(replacement=3_300, source=4_000, window=100_000)[0]
    assert "half the window" in effect_gate_problems(replacement=5_000, source=40_000, window=8_192)[0]
    assert "50,000" in effect_gate_problems(replacement=60_000, source=900_000, window=1_000_000)[0]


def bloated_summary(words: int) -> str:
    bodies = ["Fix it [seq 3].", "- padding " * words, "- none", "- continue", RULE]
    titles = ("Goal", "Progress", "Key Decisions", "Next Steps", "Critical Context")
    return "\n\n".join(f"## {t}\n{b}" for t, b in zip(titles, bodies, strict=True))


def test_a_summary_without_enough_reduction_goes_to_the_fallback(tmp_path: Path, workdir: Path) -> None:
    """K-9: a valid summary that keeps more than 80% of a large source is a summariser failure;
    an automatic compaction then uses the fallback in the same attempt."""
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        session_id = long_session(runtime, turns=8, size=1600)
        before = runtime.context(session_id).layers.total
        client = runtime._client
        assert isinstance(client, ScriptedClient)
        client.summaries = [bloated_summary(before // 3)] * 2
        session = runtime.open_session(session_id)
        result = runtime.parts.compaction.compact(session_id, session.route, Trigger.BUDGET)
        assert result.outcome is Outcome.ACCEPTED and result.producer == "fallback", result.reason
        failed = [d for d in diagnostics(runtime, session_id) if d["summariser_failed"]]
        assert len(failed) == 1 and "not enough reduction" in failed[0]["reason"]


# -- summary sampling (K-8) ------------------------------------------------------------------------


def test_an_overflowing_summary_request_is_retried_strictly_smaller(tmp_path: Path, workdir: Path) -> None:
    """K-8: after an overflow the same summary is asked with a smaller input, file contents that
    can be read again dropped first; at most three attempts per summary."""
    client = ScriptedClient(summaries=[OVERFLOW, OVERFLOW, RULE_SUMMARY])
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=4)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED, result.reason
        sizes = [len(request.messages[1]["content"]) for request in client.summary_requests]
        assert len(sizes) == 3 and sizes[0] > sizes[1] > sizes[2]
        assert REREADABLE_OMITTED in client.summary_requests[1].messages[1]["content"]
        assert REREADABLE_OMITTED not in client.summary_requests[0].messages[1]["content"]


def test_three_overflows_back_the_coverage_off(tmp_path: Path, workdir: Path) -> None:
    """K-8 then C-13: three attempts of one summary overflow; the plan covers less and tries again;
    everything stays within the request budget."""
    client = ScriptedClient(summaries=[OVERFLOW] * 3 + [RULE_SUMMARY])
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=6)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED, result.reason
        assert len(client.summary_requests) == 4
        assert result.checkpoint is not None
        assert result.checkpoint.through_seq < runtime.parts.store.last_seq(session_id) - 4


# -- the circuit breaker (K-11) --------------------------------------------------------------------


def test_a_summariser_that_always_fails_trips_the_breaker(tmp_path: Path, workdir: Path) -> None:
    """K-11: three consecutive summariser failures open the breaker of this (workspace, session);
    from then on automatic compactions ask no model and the fallback keeps the session going; a
    manual compaction tries the summariser again and its success closes the breaker."""
    client = ScriptedClient(summaries=["nonsense"] * 6)
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=4)
        session = runtime.open_session(session_id)
        producers = []
        for turn in range(4):
            append = [
                NewEvent(EventKind.USER_MESSAGE, {"text": f"next request {turn}"}),
                NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": f"answer {turn} " * 200}),
            ]
            runtime.parts.store.append(session_id, append)
            asked = len(client.summary_requests)
            result = runtime.parts.compaction.compact(session_id, session.route, Trigger.BUDGET)
            assert result.outcome is Outcome.ACCEPTED, result.reason
            producers.append((result.producer, len(client.summary_requests) - asked))
        # three failures (two requests each: first answer and its repair), each saved by the fallback
        assert producers[:3] == [("fallback", 2)] * 3
        assert producers[3] == ("fallback", 0)  # the breaker is open: no model was asked
        breaker = inspect_json(runtime.inspect(session_id))["breaker"]
        assert breaker["state"] == "open" and breaker["failures"] == 3
        assert "rejected twice" in breaker["reasons"][0]
        # a manual compaction asks the summariser again; success closes the breaker
        runtime.parts.store.append(
            session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": "one more " * 300})]
        )
        runtime.parts.store.append(session_id, [NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "ok " * 300})])
        client.summaries = [RULE_SUMMARY]
        manual = runtime.compact(session_id)
        assert manual.outcome is Outcome.ACCEPTED and manual.producer == "llm", manual.reason
        assert inspect_json(runtime.inspect(session_id))["breaker"]["state"] == "closed"


def test_the_breaker_is_keyed_by_workspace_and_session(tmp_path: Path, workdir: Path) -> None:
    """K-11: failures recorded in another workspace do not count here."""
    client = ScriptedClient(summaries=["nonsense"] * 6)
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=4)
        session = runtime.open_session(session_id)
        for turn in range(3):
            runtime.parts.store.append(
                session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": f"q{turn} " * 300})]
            )
            runtime.parts.compaction.compact(session_id, session.route, Trigger.BUDGET)
        assert runtime.parts.compaction.breaker(session_id).open
        other = tmp_path / "elsewhere"
        other.mkdir()
        runtime.parts.store._sql.execute_sql(
            "UPDATE session SET workspace = ? WHERE id = ?", (str(other), session_id)
        )
        assert not runtime.parts.compaction.breaker(session_id).open
        assert runtime.parts.compaction.breaker(session_id).failures == 0


# -- the compaction hook (K-7) ---------------------------------------------------------------------


def hook_script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "hook.py"
    script.write_text("import json, sys\nfacts = json.load(sys.stdin)\n" + body, encoding="utf-8")
    return f"{sys.executable} {script}"


def test_a_hook_that_vetoes_blocks_cleanly(tmp_path: Path, workdir: Path) -> None:
    """K-7: the hook's veto keeps the context: no checkpoint, no fallback faked, no model asked;
    the reason is its first output line, without terminal escapes."""
    client = ScriptedClient()
    hook = hook_script(tmp_path, "print('\\x1b[31mno compaction during the deploy\\x1b[0m')\nsys.exit(3)\n")
    with runtime_with(tmp_path, workdir, client, hook=hook) as runtime:
        session_id = long_session(runtime, turns=4)
        session = runtime.open_session(session_id)
        result = runtime.parts.compaction.compact(session_id, session.route, Trigger.BUDGET)
        assert result.outcome is Outcome.BLOCKED
        assert result.reason == "the compaction hook blocked it: no compaction during the deploy"
        assert (
            client.summary_requests == []
            and runtime.parts.compiler.checkpoint_state(session_id).current is None
        )
        last = diagnostics(runtime, session_id)[-1]
        assert last["outcome"] == "blocked" and not last["summariser_failed"]


def test_a_hook_that_allows_gets_the_facts(tmp_path: Path, workdir: Path) -> None:
    seen = tmp_path / "facts.json"
    hook = hook_script(tmp_path, f"open({str(seen)!r}, 'w').write(json.dumps(facts))\n")
    with runtime_with(tmp_path, workdir, ScriptedClient(summaries=[RULE_SUMMARY]), hook=hook) as runtime:
        session_id = long_session(runtime, turns=4)
        assert runtime.compact(session_id).outcome is Outcome.ACCEPTED
        facts = json.loads(seen.read_text())
        assert facts["session"] == session_id and facts["trigger"] == "manual"
        assert facts["through_seq"] > facts["from_seq"] >= 1


def test_a_broken_or_slow_hook_blocks(tmp_path: Path, workdir: Path) -> None:
    """K-7: a gate that cannot run stays closed, and says why."""
    with runtime_with(tmp_path, workdir, ScriptedClient(), hook="/no/such/hook --x") as runtime:
        session_id = long_session(runtime, turns=3)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.BLOCKED and "could not run" in result.reason
    slow = hook_script(tmp_path, "import time\ntime.sleep(5)\n")
    with runtime_with(tmp_path / "b", workdir, ScriptedClient(), hook=slow, hook_timeout=0.3) as runtime:
        session_id = long_session(runtime, turns=3)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.BLOCKED and "did not answer within 0.3 s" in result.reason


# -- a separate summary route ----------------------------------------------------------------------


def test_summaries_go_to_the_summary_route_and_fall_back_to_the_session_route(
    tmp_path: Path, workdir: Path
) -> None:
    """`[compaction] model`: summaries are asked there first; a failure there asks the session's
    own route; the checkpoint names the model that wrote it."""
    failing = ProviderError(ProviderFailure(kind=FailureKind.CONNECTION, detail="refused"))
    client = ScriptedClient(summaries=[failing, RULE_SUMMARY])
    with runtime_with(tmp_path, workdir, client, model="foya-sim/large") as runtime:
        session_id = long_session(runtime, turns=4)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.checkpoint is not None
        assert [r.route.model for r in client.summary_requests] == ["foya-sim/large", "foya-sim/small"]
        assert result.checkpoint.model == "foya-sim/small"
        first = diagnostics(runtime, session_id)[0]
        assert first["model"] == "foya-sim/large" and first["summariser_failed"]
    client = ScriptedClient(summaries=[RULE_SUMMARY])
    with runtime_with(tmp_path / "ok", workdir, client, model="foya-sim/large") as runtime:
        session_id = long_session(runtime, turns=4)
        result = runtime.compact(session_id)
        assert result.checkpoint is not None and result.checkpoint.model == "foya-sim/large"
        assert [r.route.model for r in client.summary_requests] == ["foya-sim/large"]


# -- reactive recovery (K-6) -----------------------------------------------------------------------


class OverflowingClient(ScriptedClient):
    """Streams from a script in which an Exception is raised and ("partial", error) streams some
    text and then fails, as a provider that rejects the context mid-reply."""

    def __init__(self, *steps: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = list(steps)

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self.requests.append(request)
        step = self.script.pop(0) if self.script else "done"
        if isinstance(step, Exception):
            raise step
        if isinstance(step, tuple) and step and step[0] == "partial":
            yield TextDelta("Here is the first part")
            raise step[1]
        if isinstance(step, str):
            yield TextDelta(step)
            yield StreamFinished(text=step, reasoning="", tool_calls=(), finish_reason="stop", usage=None)
            return
        yield StreamFinished(text="", reasoning="", tool_calls=step, finish_reason="tool_calls", usage=None)


def read(call_id: str) -> tuple[ToolCall, ...]:
    return (ToolCall(call_id, "list_dir", json.dumps({"path": "."})),)


def run_turn(runtime: Runtime, session_id: str, text: str) -> list[Any]:
    return list(runtime.open_session(session_id).send(text))


def test_reactive_recovery_runs_at_most_once_per_turn(tmp_path: Path, workdir: Path) -> None:
    """C-2 (K-6 resolved): an overflow before any output compacts once and retries; a later
    overflow in the same turn, even after replies that arrived whole, fails the turn without a
    second compaction and says why; the next turn may recover again."""
    client = OverflowingClient(OVERFLOW, read("a"), read("b"), OVERFLOW, OVERFLOW, "done")
    with runtime_with(tmp_path, workdir, client, mid_turn_min_steps=2) as runtime:
        session_id = long_session(runtime, turns=6)
        updates = run_turn(runtime, session_id, "continue the work")
        finished = [u.result for u in updates if isinstance(u, CompactionFinished)]
        assert [(r.trigger, r.outcome) for r in finished] == [("provider", "accepted")]
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "input_overflow"
        assert "already compacted once in this turn" in failed.reason
        assert len(client.requests) == 4  # overflow, retry (a), b, overflow: no fifth request
        updates = run_turn(runtime, session_id, "go on")
        finished = [u.result for u in updates if isinstance(u, CompactionFinished)]
        assert [r.trigger for r in finished] == ["provider"] and isinstance(updates[-1], TurnFinished)


def test_two_overflows_without_a_reply_between_them_recover_once(tmp_path: Path, workdir: Path) -> None:
    """K-6: no second recovery before a provider boundary: the turn fails, no loop."""
    client = OverflowingClient(OVERFLOW, OVERFLOW, "never reached")
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=6)
        updates = run_turn(runtime, session_id, "continue the work")
        finished = [u for u in updates if isinstance(u, CompactionFinished)]
        assert len(finished) == 1
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "input_overflow"
        assert len(client.requests) == 2


def test_an_overflow_after_output_started_fails_closed(tmp_path: Path, workdir: Path) -> None:
    """K-6: after content was delivered nothing is replayed or compacted; the message says so and
    the partial reply stays in history."""
    client = OverflowingClient(("partial", OVERFLOW))
    with runtime_with(tmp_path, workdir, client) as runtime:
        session_id = long_session(runtime, turns=3)
        updates = run_turn(runtime, session_id, "go on")
        assert not any(isinstance(u, CompactionFinished) for u in updates)
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and "already started" in failed.reason
        assert "K-6" not in failed.reason and "SPEC" not in failed.reason  # words, not rule ids
        kinds = [e.kind for e in runtime.parts.store.events(session_id)]
        # The partial reply is kept, then the turn's outcome; no compaction was tried.
        assert kinds[-2:] == [EventKind.ASSISTANT_MESSAGE, EventKind.TURN_OUTCOME]
        assert EventKind.COMPACTION_DIAGNOSTIC not in kinds


def test_a_blocked_hook_fails_the_reactive_path_and_keeps_the_context(tmp_path: Path, workdir: Path) -> None:
    """K-7: the provider overflowed, the hook vetoes the compaction: the turn fails with the hook's
    reason, nothing is compacted and no fallback is made."""
    hook = hook_script(tmp_path, "print('frozen for review')\nsys.exit(1)\n")
    client = OverflowingClient(OVERFLOW)
    with runtime_with(tmp_path, workdir, client, hook=hook) as runtime:
        session_id = long_session(runtime, turns=3)
        updates = run_turn(runtime, session_id, "go on")
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and "frozen for review" in failed.reason
        assert runtime.parts.compiler.checkpoint_state(session_id).current is None
        assert not any(isinstance(u, TurnFinished) for u in updates)


def _sizes(requests: Sequence[ProviderRequest]) -> list[int]:
    return [len(json.dumps(list(r.messages))) for r in requests]


def test_completion_repairs_count_toward_three_attempts(tmp_path: Path, workdir: Path) -> None:
    """K-8: overflow, smaller retry rejected, its repair rejected: three attempts, then the failure."""
    client = ScriptedClient(summaries=[OVERFLOW, "nonsense", Completion("still nonsense", "stop", None)])
    with runtime_with(tmp_path, workdir, client, fallback=False) as runtime:
        session_id = long_session(runtime, turns=4)
        session = runtime.open_session(session_id)
        result = runtime.parts.compaction.compact(session_id, session.route, Trigger.BUDGET)
        assert result.outcome is Outcome.FAILED and result.requests == 3
        assert _sizes(client.summary_requests)[1] < _sizes(client.summary_requests)[0]


def test_a_mid_turn_fallback_keeps_the_active_task_before_its_steps(tmp_path: Path, workdir: Path) -> None:
    """K-10, K-12, C-3: when the fallback covers the anchor, the user's request is kept verbatim in
    its place — once, before the steps kept after it — never re-inserted after them."""
    steps = []
    for n in range(8):
        call = {"id": f"s{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        steps += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"s{n}", "content": f"step {n} " + "x " * 400},
        ]
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        request = {"role": "user", "content": "explore every module and report"}
        session_id = import_session(runtime, [*tool_turn(1), request, *steps])
        session = runtime.open_session(session_id)
        result = runtime.parts.compaction.compact(
            session_id, session.route, Trigger.BUDGET, phase=Phase.MID_TURN, use_model=False
        )
        assert result.outcome is Outcome.ACCEPTED, result.reason
        messages = list(runtime.context(session_id).messages)
        positions = [i for i, m in enumerate(messages) if m.get("content") == request["content"]]
        # system, checkpoint message, then the request, then the steps the fallback kept
        assert positions == [2]
        assert result.checkpoint is not None and len(result.checkpoint.kept_messages) > 2
        assert messages[3]["role"] == "assistant"
        assert projection_is_well_formed(messages[positions[0] + 1 :])


def test_cli_compact_fallback_and_inspect_show_producer_and_breaker(
    tmp_path: Path, workdir: Path, capsys: Any
) -> None:
    """`foya compact --fallback` asks no model; `foya inspect` names the producer, the kept
    messages and the circuit breaker (K-10, K-11)."""
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        session_id = long_session(runtime, turns=6)
        database = str(runtime.parts.store.path)
    assert main(["--db", database, "compact", session_id, "--fallback", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"] == "accepted" and report["producer"] == "fallback" and report["requests"] == 0
    assert main(["--db", database, "inspect", session_id]) == 0
    text = capsys.readouterr().out
    assert "fallback" in text and "kept verbatim" in text
    assert "circuit breaker: closed (0 of 3 consecutive failures)" in text


def test_a_turn_of_large_steps_compacts_mid_turn_below_the_preferred_step_count(
    tmp_path: Path, workdir: Path
) -> None:
    """C-3 under pressure: with everything before the anchor covered, two complete steps after it
    are enough for a mid-turn checkpoint (the earlier step is covered, the latest kept)."""
    with runtime_with(tmp_path, workdir, ScriptedClient()) as runtime:
        steps = []
        for n in range(2):
            call = {"id": f"p{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            steps += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"p{n}", "content": "data " * 500},
            ]
        session_id = import_session(runtime, [{"role": "user", "content": "read both"}, *steps])
        snapshot = runtime.parts.compiler.snapshot(session_id)
        plan = plan_compaction(
            snapshot.units,
            anchor_seq=snapshot.anchor_seq,
            covered_through=0,
            phase=None,
            mid_turn_min_steps=3,
        )
        assert not isinstance(plan, NothingToCompact) and plan.phase is Phase.MID_TURN
        assert [unit.first_seq for unit in plan.units] == [1, 2]
        # asked for explicitly, mid_turn still wants its configured number of steps
        explicit = plan_compaction(
            snapshot.units,
            anchor_seq=snapshot.anchor_seq,
            covered_through=0,
            phase=Phase.MID_TURN,
            mid_turn_min_steps=3,
        )
        assert isinstance(explicit, NothingToCompact)


def test_with_an_unknown_token_snapshot_snip_runs_but_no_handoff_or_llm_compaction(
    tmp_path: Path, workdir: Path, capsys: Any
) -> None:
    """K-5: the window is unknown and no usage was measured yet: the 80% line is a guess, so no
    handoff reminder and no LLM compaction; snipping old tool results still runs."""
    client = ScriptedClient()
    settings = Settings(
        model="custom/unknown-model",
        retry_backoff=0.0,
        models={"custom/unknown-model": ModelSettings(max_input=6_000)},
    )
    runtime = Runtime(settings, make_paths(tmp_path), client=client, workdir=workdir, clock=lambda: FIXED_NOW)
    with runtime:
        session_id = long_session(runtime, turns=10, size=2_000)
        session = runtime.open_session(session_id)
        assert not session.context().snapshot_known
        updates = list(session.send("continue"))
        assert any(isinstance(u, ContextSnipped) for u in updates)
        assert not any(isinstance(u, (CompactionFinished, HandoffRecorded)) for u in updates)
        assert client.summary_requests == []
        database = str(runtime.parts.store.path)
    home = Path(os.environ["FOYA_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "custom/unknown-model"\n[models."custom/unknown-model"]\nmax_input = 6000\n'
    )
    assert main(["--db", database, "context", session_id]) == 0
    text = capsys.readouterr().out
    assert "old tool result(s) shown as placeholders" in text and "no handoff or LLM compaction" in text


def test_the_fallback_cuts_at_most_one_unit(tmp_path: Path, workdir: Path) -> None:
    """K-10: when the newest covered unit does not fit whole, it is kept with its messages capped
    (its call and result together) and nothing older is kept verbatim."""
    request = {"role": "user", "content": "now read the big log, then the small one"}

    def step(call_id: str, content: str) -> list[dict[str, Any]]:
        call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": content},
        ]

    with runtime_with(tmp_path, workdir, ScriptedClient(), mid_turn_min_steps=2) as runtime:
        transcript = [*tool_turn(1), *tool_turn(2), request, *step("big", "log line\n" * 6_000)]
        session_id = import_session(runtime, [*transcript, *step("small", "ok")])
        session = runtime.open_session(session_id)
        result = runtime.parts.compaction.compact(
            session_id, session.route, Trigger.BUDGET, phase=Phase.MID_TURN, use_model=False
        )
        assert result.outcome is Outcome.ACCEPTED and result.checkpoint is not None, result.reason
        kept = list(result.checkpoint.kept_messages)
        # the request in its place, then the boundary unit, cut but whole; nothing older
        assert kept[0] == request
        assert kept[1]["tool_calls"][0]["id"] == "big" and kept[2]["tool_call_id"] == "big"
        assert "characters left out" in kept[2]["content"] and len(kept[2]["content"]) < 20_000
        assert len(kept) == 3
