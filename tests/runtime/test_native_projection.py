"""Tests the native projection: a provider-native checkpoint is sent as state only on the route that
made it; other routes use the portable text checkpoint or full history; the planner's snapshot
sees what its route sees (SPEC C-11, R-2, C-3, X-7, B-5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from foya_tui.cli_json import json_of
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.digests import canonical_json
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, count_messages, count_tools, counter_for_model
from foya_tui.runtime.view.checkpoint import Checkpoint, Phase, ProjectionKind, Segment

NATIVE_STATE = {"type": "foya-sim.native", "summary": "the user asked about modules 1 and 2", "n": 2}


def append(runtime: Runtime, session_id: str, kind: EventKind, **payload: Any) -> int:
    return runtime.parts.store.append(session_id, [NewEvent(kind, payload)])[0].seq


def make_checkpoint(
    runtime: Runtime,
    session_id: str,
    route: Route,
    *,
    through_seq: int,
    anchor_seq: int | None,
    native_state: Mapping[str, Any] | None = None,
    previous: Checkpoint | None = None,
    kept: Sequence[Mapping[str, Any]] = (),
    phase: Phase = Phase.PRE_TURN,
) -> Checkpoint:
    """A valid V3 checkpoint over seqs 1..through_seq: native (state, no segments) or text."""
    native = native_state is not None
    segments = () if native else (Segment(1, 1, through_seq, 0, "## Goal\nsummary text of the prefix", 8),)
    return Checkpoint(
        id="",
        previous_id=previous.id if previous is not None else None,
        session_id=session_id,
        through_seq=through_seq,
        source_digest=runtime.parts.compaction_store.source_digest(session_id, through_seq),
        head_anchor_seq=anchor_seq,
        phase=phase,
        projection_kind=ProjectionKind.NATIVE if native else ProjectionKind.TEXT,
        level=0,
        segments=segments,
        route_id=route.id,
        model=route.model,
        created_at="2026-11-29T12:00:00+00:00",
        tokens_before=1_000,
        tokens_after=100,
        covered_messages=through_seq,
        producer="native" if native else "llm",
        native_state=native_state,
        kept_messages=tuple(kept),
    ).with_id()


def commit_checkpoint(runtime: Runtime, checkpoint: Checkpoint) -> None:
    """Commit as the compaction service does: row and completion event in one transaction (P-1)."""
    runtime.parts.compaction_store.commit(
        checkpoint.session_id,
        checkpoint.id,
        checkpoint.serialised(),
        [
            NewEvent(
                EventKind.COMPACTION_COMPLETED, {"checkpoint": checkpoint.to_payload(), "trigger": "manual"}
            )
        ],
        lambda: None,
    )


def conversation(runtime: Runtime, route: Route) -> tuple[str, list[int]]:
    """u1, a1, u2, a2, u3 (the anchor): returns the session id and the five seqs."""
    session = runtime.new_session(route)
    seqs = []
    for i, kind in enumerate(
        [EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE] * 2 + [EventKind.USER_MESSAGE]
    ):
        seqs.append(append(runtime, session.id, kind, text=f"message {i + 1}"))
    return session.id, seqs


def contents(view: RequestView) -> list[Any]:
    return [message["content"] for message in view.messages[1:]]


def exact(view: RequestView) -> bool:
    counter = counter_for_model(view.route.model)
    sent = count_messages(view.messages, counter) + count_tools(view.tools, counter)
    return view.layers.total == sent + view.layers.native_state


def text_then_native(runtime: Runtime) -> tuple[Route, Route, str, list[int], Checkpoint, Checkpoint]:
    """A conversation on foya-sim/native with a text checkpoint (made on foya-sim/small) and a
    native one on top of it: (native route, other route, session, seqs, text, native)."""
    native_route = runtime.route_for("foya-sim/native")
    other = runtime.route_for("foya-sim/small")
    session_id, seqs = conversation(runtime, native_route)
    text = make_checkpoint(runtime, session_id, other, through_seq=seqs[1], anchor_seq=seqs[2])
    commit_checkpoint(runtime, text)
    native = make_checkpoint(
        runtime,
        session_id,
        native_route,
        through_seq=seqs[3],
        anchor_seq=seqs[4],
        native_state=NATIVE_STATE,
        previous=text,
    )
    commit_checkpoint(runtime, native)
    return native_route, other, session_id, seqs, text, native


def test_a_native_checkpoint_sends_state_on_its_own_route(runtime: Runtime) -> None:
    """C-11: the head is the system prompt and kept messages, no checkpoint text; the state travels
    in the provider request and is counted in its own layer (X-7, B-5), exactly."""
    native_route = runtime.route_for("foya-sim/native")
    session_id, seqs = conversation(runtime, native_route)
    kept = {"role": "user", "content": "kept verbatim"}
    checkpoint = make_checkpoint(
        runtime,
        session_id,
        native_route,
        through_seq=seqs[3],
        anchor_seq=seqs[4],
        native_state=NATIVE_STATE,
        kept=[kept],
    )
    commit_checkpoint(runtime, checkpoint)
    view = runtime.parts.compiler.compile(session_id, native_route)
    assert view.checkpoint == checkpoint
    assert contents(view) == ["kept verbatim", "message 5"]  # no summary message
    assert view.native_state == NATIVE_STATE
    assert view.provider_request().native_state == NATIVE_STATE
    counter = counter_for_model(native_route.model)
    assert view.layers.native_state == TOKENS_PER_MESSAGE + counter.count(canonical_json(NATIVE_STATE))
    assert exact(view)
    assert json_of(view.report())["native"] == {
        "checkpoint_id": checkpoint.id,
        "bound_model": "foya-sim/native",
        "sent": True,
    }
    assert not any("not sent" in notice for notice in view.notices)


def test_another_route_gets_the_portable_text_checkpoint_never_the_native_state(runtime: Runtime) -> None:
    """R-2: after a switch the native state is not replayed; the text ancestor applies, said so."""
    native_route, other, session_id, _, text, native = text_then_native(runtime)
    view = runtime.parts.compiler.compile(session_id, other)
    assert view.checkpoint == text and view.native_state is None
    assert view.provider_request().native_state is None and view.layers.native_state == 0
    assert "summary text of the prefix" in contents(view)[0]
    assert contents(view)[1:] == ["message 3", "message 4", "message 5"]
    assert (
        f"the native state of checkpoint {native.id[:12]} belongs to foya-sim/native, another route: "
        "not sent" in (view.notices)
    )
    assert json_of(view.report())["native"] == {
        "checkpoint_id": native.id,
        "bound_model": "foya-sim/native",
        "sent": False,
    }
    assert exact(view)
    on_its_route = runtime.parts.compiler.compile(session_id, native_route)
    assert on_its_route.checkpoint == native and on_its_route.native_state == NATIVE_STATE
    assert on_its_route.revision != view.revision


def test_without_a_text_ancestor_another_route_sees_full_history(runtime: Runtime) -> None:
    native_route = runtime.route_for("foya-sim/native")
    session_id, seqs = conversation(runtime, native_route)
    native = make_checkpoint(
        runtime, session_id, native_route, through_seq=seqs[3], anchor_seq=seqs[4], native_state=NATIVE_STATE
    )
    commit_checkpoint(runtime, native)
    view = runtime.parts.compiler.compile(session_id, runtime.route_for("foya-sim/large"))
    assert view.checkpoint is None and view.native_state is None
    assert contents(view) == [f"message {i}" for i in range(1, 6)]
    assert json_of(view.report())["native"]["sent"] is False


def test_a_covered_anchor_is_reinserted_verbatim_after_the_native_head(runtime: Runtime) -> None:
    """C-3: a checkpoint that covers the anchor (mid_turn, standalone) re-inserts it verbatim."""
    native_route = runtime.route_for("foya-sim/native")
    session_id, seqs = conversation(runtime, native_route)
    after = append(runtime, session_id, EventKind.ASSISTANT_MESSAGE, text="working on it")
    append(runtime, session_id, EventKind.ASSISTANT_MESSAGE, text="still working")
    native = make_checkpoint(
        runtime,
        session_id,
        native_route,
        through_seq=after,
        anchor_seq=seqs[4],
        native_state=NATIVE_STATE,
        phase=Phase.MID_TURN,
    )
    commit_checkpoint(runtime, native)
    view = runtime.parts.compiler.compile(session_id, native_route)
    assert contents(view) == ["message 5", "still working"]
    assert view.anchor_seq == seqs[4] and view.native_state == NATIVE_STATE and exact(view)


def test_the_snapshot_carries_the_checkpoint_its_route_applies(runtime: Runtime) -> None:
    """The planner plans from what the route actually sees; `checkpoints` stays the full state."""
    native_route, other, session_id, _, text, native = text_then_native(runtime)
    assert runtime.parts.compiler.snapshot(session_id, native_route).checkpoint == native
    elsewhere = runtime.parts.compiler.snapshot(session_id, other)
    assert elsewhere.checkpoint == text
    assert elsewhere.checkpoints is not None and elsewhere.checkpoints.current == native
    assert runtime.parts.compiler.snapshot(session_id).checkpoint == native


def test_a_native_candidate_is_measured_on_its_route_only(runtime: Runtime) -> None:
    """A candidate overrides the current checkpoint (C-12 measures it) but still never crosses routes."""
    native_route = runtime.route_for("foya-sim/native")
    session_id, seqs = conversation(runtime, native_route)
    candidate = make_checkpoint(
        runtime, session_id, native_route, through_seq=seqs[3], anchor_seq=seqs[4], native_state=NATIVE_STATE
    )
    measured = runtime.parts.compiler.compile(session_id, native_route, candidate=candidate)
    assert measured.checkpoint == candidate and measured.native_state == NATIVE_STATE and exact(measured)
    assert measured.layers.history == 0 < measured.layers.native_state  # the prefix is state now
    crossed = runtime.parts.compiler.compile(
        session_id, runtime.route_for("foya-sim/small"), candidate=candidate
    )
    assert crossed.checkpoint is None and crossed.native_state is None
    assert json_of(crossed.report())["native"] == {
        "checkpoint_id": candidate.id,
        "bound_model": "foya-sim/native",
        "sent": False,
    }
    after = runtime.parts.compiler.compile(session_id, native_route).report()
    assert json_of(after)["native"] is None  # nothing committed
