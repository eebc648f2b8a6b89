"""Tests micro-compaction and snip: strict records, K-4 order, the recent window, pending versus
committed snips, exact accounting with T-1 shortening, and read-back of a snipped result
(SPEC K-2, K-3, K-4, T-1, T-2, T-3, B-7)."""

from __future__ import annotations

import json
import random
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli_json import json_of
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tokens import count_messages, count_tools, counter_for_model
from foya_tui.runtime.tools.registry import HISTORY_READ_TOOL, ToolContext
from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.runtime.view.snip import (
    CandidateKind,
    SnipCandidate,
    SnipMode,
    SnipPlan,
    cache_is_cold,
    parse_snip,
    plan_micro,
    plan_snip,
)
from tests.conftest import FIXED_NOW
from tests.runtime.test_native_projection import commit_checkpoint, make_checkpoint


def append(runtime: Runtime, session_id: str, kind: EventKind, **payload: Any) -> int:
    return runtime.parts.store.append(session_id, [NewEvent(kind, payload)])[0].seq


def tool_step(
    runtime: Runtime,
    session_id: str,
    call_id: str,
    content: str,
    *,
    name: str = "read_file",
    error: bool = False,
) -> int:
    """An assistant tool call and its recorded result (a tool turn); returns the result's seq."""
    call = {"id": call_id, "name": name, "arguments": "{}"}
    append(runtime, session_id, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call])
    return append(
        runtime,
        session_id,
        EventKind.TOOL_RESULT,
        tool_call_id=call_id,
        name=name,
        content=content,
        is_error=error,
    )


def body(tag: str, words: int = 300) -> str:
    return f"BEGIN {tag}\n" + " ".join(f"{tag}{i}" for i in range(words)) + f"\nEND {tag}"


def exact(view: RequestView) -> bool:
    """The layers count exactly what is sent: the compiled messages and tools re-counted."""
    counter = counter_for_model(view.route.model)
    sent = count_messages(view.messages, counter) + count_tools(view.tools, counter)
    return view.layers.total == sent + view.layers.native_state


def tool_names(view: RequestView) -> list[str]:
    return [tool["function"]["name"] for tool in view.tools]


def fresh(runtime: Runtime, workdir: Path) -> ContextCompiler:
    return ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=workdir,
        clock=lambda: FIXED_NOW,
        registry=runtime.parts.registry,
        checkpoints=runtime.parts.checkpoints,
    )


@pytest.fixture
def turns(runtime: Runtime) -> tuple[str, dict[str, int]]:
    """A turn of eight tool turns on the 32K simulator: a small read, a read, a write, an error, an
    unknown tool, then three recent reads (the recent window). Returns the session id and seqs."""
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    append(runtime, session.id, EventKind.USER_MESSAGE, text="look around")
    seqs = {
        "small": tool_step(runtime, session.id, "c_small", "ok"),
        "read": tool_step(runtime, session.id, "c_read", body("read")),
        "write": tool_step(runtime, session.id, "c_write", body("write"), name="write_file"),
        "error": tool_step(runtime, session.id, "c_error", body("error"), error=True),
        "unknown": tool_step(runtime, session.id, "c_unknown", body("unknown"), name="mystery_tool"),
    }
    for i in range(3):
        seqs[f"recent{i}"] = tool_step(runtime, session.id, f"c_recent{i}", body(f"recent{i}"))
    return session.id, seqs


# -- records and plans (pure) ----------------------------------------------------------------------


def candidate(seq: int, kind: CandidateKind, saved: int = 100) -> SnipCandidate:
    return SnipCandidate(seq=seq, tool_call_id=f"c{seq}", name="t", kind=kind, tokens_saved=saved)


def test_plan_snip_takes_reads_then_writes_then_errors_until_enough_is_free() -> None:
    """K-4: read-only successes go first, then writes, then errors, each oldest first."""
    pool = [
        candidate(2, CandidateKind.ERROR),
        candidate(4, CandidateKind.WRITE),
        candidate(6, CandidateKind.READ),
        candidate(8, CandidateKind.READ),
        candidate(10, CandidateKind.WRITE),
    ]
    assert plan_snip(pool, 150) == SnipPlan(SnipMode.SNIP, (6, 8), 200)
    assert plan_snip(pool, 201) == SnipPlan(SnipMode.SNIP, (4, 6, 8), 300)
    assert plan_snip(pool, 350) == SnipPlan(SnipMode.SNIP, (4, 6, 8, 10), 400)  # errors kept longest
    everything = plan_snip(pool, 10_000)  # not enough: all of them, the rest is left to compaction
    assert everything is not None and everything.seqs == (2, 4, 6, 8, 10) and everything.tokens_saved == 500
    assert plan_snip(pool, 0) is None and plan_snip([], 100) is None


def test_plan_micro_takes_every_candidate() -> None:
    """K-3: after a cold cache only the recent window (never a candidate) keeps its content."""
    pool = [candidate(9, CandidateKind.ERROR, 5), candidate(3, CandidateKind.READ, 7)]
    assert plan_micro(pool) == SnipPlan(SnipMode.MICRO, (3, 9), 12)
    assert plan_micro([]) is None


def test_snip_records_are_strict() -> None:
    plan = SnipPlan(SnipMode.MICRO, (3, 9), 12)
    event = plan.event()
    assert event.kind is EventKind.CONTEXT_SNIPPED
    assert event.payload == {"version": 1, "mode": "micro", "seqs": [3, 9], "tokens_saved": 12}
    assert parse_snip(event.payload) == plan
    good = dict(event.payload)
    for broken in (
        {**good, "extra": 1},
        {key: value for key, value in good.items() if key != "tokens_saved"},
        {**good, "version": True},
        {**good, "version": 2},
        {**good, "mode": "mega"},
        {**good, "seqs": []},
        {**good, "seqs": [9, 3]},
        {**good, "seqs": [3, 3]},
        {**good, "seqs": [0, 3]},
        {**good, "seqs": [3, True]},
        {**good, "seqs": "3"},
        {**good, "tokens_saved": -1},
        {**good, "tokens_saved": 1.5},
        "not an object",
    ):
        assert parse_snip(broken) is None, broken


def test_the_cache_is_cold_only_after_the_ttl_since_a_real_call() -> None:
    """K-3: no call yet means no cache to lose; the store's created_at strings are read as UTC."""
    last = FIXED_NOW.isoformat(timespec="microseconds")
    assert not cache_is_cold(None, FIXED_NOW, 60)
    assert not cache_is_cold(last, FIXED_NOW + timedelta(seconds=59), 60)
    assert cache_is_cold(last, FIXED_NOW + timedelta(seconds=61), 60)
    assert not cache_is_cold("not a time", FIXED_NOW + timedelta(days=1), 60)


# -- candidates ---------------------------------------------------------------------------------


def test_candidates_are_old_recorded_results_in_k4_order(
    runtime: Runtime, turns: tuple[str, dict[str, int]]
) -> None:
    """Older tool turns only (the three most recent are the recent window), not a result whose
    placeholder would be larger, reads before writes before errors; an unknown tool counts as read."""
    session_id, seqs = turns
    route = runtime.route_for("foya-sim/large")
    found = runtime.parts.compiler.snip_candidates(session_id, route)
    assert [(c.seq, c.kind) for c in found] == [
        (seqs["read"], CandidateKind.READ),
        (seqs["unknown"], CandidateKind.READ),
        (seqs["write"], CandidateKind.WRITE),
        (seqs["error"], CandidateKind.ERROR),
    ]
    assert {c.name for c in found} == {"read_file", "mystery_tool", "write_file"}
    assert all(c.tokens_saved > 0 for c in found)
    # An open group at the end (calls still waiting) is no tool turn: the window stays the three
    # complete ones, and a later complete turn moves the window on.
    append(
        runtime,
        session_id,
        EventKind.ASSISTANT_MESSAGE,
        text="",
        tool_calls=[{"id": "c_open", "name": "read_file", "arguments": "{}"}],
    )
    assert runtime.parts.compiler.snip_candidates(session_id, route) == found
    append(runtime, session_id, EventKind.TOOL_RESULT, tool_call_id="c_open", name="read_file", content="x")
    moved = runtime.parts.compiler.snip_candidates(session_id, route)
    assert [c.seq for c in moved][:3] == [seqs["read"], seqs["unknown"], seqs["recent0"]]


def test_candidates_skip_interrupted_calls_and_what_a_checkpoint_covers(runtime: Runtime) -> None:
    """A call without a result gets the MISSING_TOOL_RESULT placeholder: never a candidate. Results
    the checkpoint of this route covers are not in the request: not candidates either."""
    route = runtime.route_for("foya-sim/large")
    session = runtime.new_session(route)
    append(runtime, session.id, EventKind.USER_MESSAGE, text="go")
    call = {"id": "lost", "name": "read_file", "arguments": "{}"}
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call])
    anchor = append(runtime, session.id, EventKind.USER_MESSAGE, text="that was interrupted; go on")
    first = tool_step(runtime, session.id, "c0", body("b0"))
    tool_step(runtime, session.id, "c1", body("b1"))
    for i in range(2, 5):
        tool_step(runtime, session.id, f"c{i}", body(f"b{i}"))
    found = runtime.parts.compiler.snip_candidates(session.id, route)
    assert [c.tool_call_id for c in found] == ["c0", "c1"]  # "lost" is only a placeholder
    checkpoint = make_checkpoint(
        runtime, session.id, route, through_seq=first, anchor_seq=anchor, phase=Phase.MID_TURN
    )
    commit_checkpoint(runtime, checkpoint)
    assert [c.tool_call_id for c in runtime.parts.compiler.snip_candidates(session.id, route)] == ["c1"]


# -- pending and committed snips in the compiler -----------------------------------------------------


def test_pending_snips_shape_one_compile_and_count_exactly(
    runtime: Runtime, turns: tuple[str, dict[str, int]]
) -> None:
    """K-2: pending snips change this compile only; nothing is written. The placeholder keeps role,
    tool_call_id and name; it names seq, call id, tool, size and SHA-256; the reader is offered (X-9);
    layers count the placeholders exactly; the revision changes (B-7)."""
    session_id, seqs = turns
    route = runtime.route_for("foya-sim/large")
    before = runtime.parts.compiler.compile(session_id, route)
    found = runtime.parts.compiler.snip_candidates(session_id, route)
    events_before = runtime.parts.store.events(session_id)
    view = runtime.parts.compiler.compile(session_id, route, snips=frozenset(c.seq for c in found))
    assert exact(before) and exact(view)
    assert view.snipped_seqs == tuple(sorted(c.seq for c in found))
    assert view.snip_saved_tokens == sum(c.tokens_saved for c in found)
    assert view.layers.total == before.layers.total - view.snip_saved_tokens + (
        view.layers.tool_schema - before.layers.tool_schema
    )
    assert HISTORY_READ_TOOL in tool_names(view) and HISTORY_READ_TOOL not in tool_names(before)
    assert view.revision != before.revision
    assert json_of(view.report())["snipped"] == {"count": 4, "tokens_saved": view.snip_saved_tokens}
    results = {m["tool_call_id"]: m for m in view.messages if m["role"] == "tool"}
    write = results["c_write"]
    assert write["name"] == "write_file"
    assert f"seq={seqs['write']}" in write["content"] and 'tool_call_id="c_write"' in write["content"]
    assert f'sha256="{sha256_hex(body("write"))}"' in write["content"]
    assert f"{len(body('write')):,} characters" in write["content"] and "write_file" in write["content"]
    for recent in ("c_recent0", "c_recent1", "c_recent2", "c_small"):
        assert results[recent]["content"] in (body(recent[2:]), "ok")
    assert runtime.parts.store.events(session_id) == events_before  # nothing persisted
    again = runtime.parts.compiler.compile(session_id, route)
    assert (
        again.snipped_seqs == () and again.revision == before.revision and again.messages == before.messages
    )


def test_a_committed_snip_applies_to_every_later_compile(
    runtime: Runtime, workdir: Path, turns: tuple[str, dict[str, int]]
) -> None:
    session_id, seqs = turns
    route = runtime.route_for("foya-sim/large")
    compiler = runtime.parts.compiler
    compiler.compile(session_id, route)  # warm: the snip arrives incrementally
    plan = plan_snip(compiler.snip_candidates(session_id, route), 1)
    assert plan is not None and plan.seqs == (seqs["read"],)
    append(runtime, session_id, EventKind.CONTEXT_SNIPPED, **plan.event().payload)
    view = compiler.compile(session_id, route)
    assert view.snipped_seqs == (seqs["read"],) and exact(view)
    append(runtime, session_id, EventKind.USER_MESSAGE, text="and now?")
    later = compiler.compile(session_id, route)
    assert later.snipped_seqs == (seqs["read"],) and exact(later)
    assert seqs["read"] not in [c.seq for c in compiler.snip_candidates(session_id, route)]
    cold = fresh(runtime, workdir).compile(session_id, route)
    assert cold.messages == later.messages and cold.layers == later.layers and cold.revision == later.revision
    # Malformed records and seqs that hold no tool result are ignored, said so.
    append(runtime, session_id, EventKind.CONTEXT_SNIPPED, version=2, mode="snip", seqs=[1], tokens_saved=0)
    append(runtime, session_id, EventKind.CONTEXT_SNIPPED, version=1, mode="snip", seqs=[1], tokens_saved=0)
    noted = compiler.compile(session_id, route)
    assert noted.snipped_seqs == (seqs["read"],) and noted.messages == later.messages
    assert any("is malformed" in notice for notice in noted.notices)
    assert any("hold no recorded tool result" in notice for notice in noted.notices)


def test_micro_compaction_keeps_only_the_recent_window(
    runtime: Runtime, turns: tuple[str, dict[str, int]]
) -> None:
    """K-3: after micro-compaction every older result with worthwhile content is a placeholder;
    the three most recent tool turns keep theirs."""
    session_id, _ = turns
    route = runtime.route_for("foya-sim/large")
    plan = plan_micro(runtime.parts.compiler.snip_candidates(session_id, route))
    assert plan is not None
    append(runtime, session_id, EventKind.CONTEXT_SNIPPED, **plan.event().payload)
    view = runtime.parts.compiler.compile(session_id, route)
    contents = {m["tool_call_id"]: m["content"] for m in view.messages if m["role"] == "tool"}
    assert [call for call, text in contents.items() if text.startswith("[Foya removed")] == [
        "c_read",
        "c_write",
        "c_error",
        "c_unknown",
    ]
    assert contents["c_small"] == "ok"
    assert runtime.parts.compiler.snip_candidates(session_id, route) == ()


def test_a_rewind_takes_its_snips_with_it(runtime: Runtime, turns: tuple[str, dict[str, int]]) -> None:
    session_id, _ = turns
    route = runtime.route_for("foya-sim/large")
    kept = runtime.parts.store.last_seq(session_id)
    plan = plan_micro(runtime.parts.compiler.snip_candidates(session_id, route))
    assert plan is not None
    append(runtime, session_id, EventKind.CONTEXT_SNIPPED, **plan.event().payload)
    assert runtime.parts.compiler.compile(session_id, route).snipped_seqs
    append(runtime, session_id, EventKind.REWIND, to_seq=kept)
    view = runtime.parts.compiler.compile(session_id, route)
    assert view.snipped_seqs == () and exact(view)


def test_a_snipped_large_result_is_a_placeholder_and_shortening_sees_the_snipped_log(
    runtime: Runtime,
) -> None:
    """T-1 interplay: a shortened old result that is snipped is a placeholder (not both), is no
    longer counted among the large results, and the pressure it removes can leave the others whole.
    The saving is measured against the form it had without any snip (its shortened form)."""
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    route = session.route
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read the logs")
    seqs = [
        tool_step(runtime, session.id, f"call_{i}", body(f"log{i}", words))
        for i, words in enumerate((3_000, 900, 900, 900))
    ]
    before = runtime.parts.compiler.compile(session.id, route)
    assert before.shortened_seqs == tuple(seqs[:3])  # under pressure: all but the newest
    only = runtime.parts.compiler.snip_candidates(session.id, route)[0]
    assert only.seq == seqs[0]
    view = runtime.parts.compiler.compile(session.id, route, snips=frozenset({seqs[0]}))
    assert view.snipped_seqs == (seqs[0],) and exact(view)
    assert view.shortened_seqs == ()  # without the big one there is no pressure left (T-1)
    assert view.snip_saved_tokens == only.tokens_saved
    first = next(m for m in view.messages if m.get("tool_call_id") == "call_0")["content"]
    assert first.startswith("[Foya removed") and "BEGIN" not in first
    others = [m["content"] for m in view.messages if m["role"] == "tool"][1:]
    assert others == [body(f"log{i}", 900) for i in (1, 2, 3)]


def test_under_lasting_pressure_the_remaining_large_results_are_shortened_around_a_snip(
    runtime: Runtime,
) -> None:
    """T-1 on the snipped log: a snipped result leaves the large results; the others are still
    shortened earlier first, newest kept, and the request is counted exactly."""
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    route = session.route
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read the logs")
    seqs = [
        tool_step(runtime, session.id, f"call_{i}", body(f"log{i}", words))
        for i, words in enumerate((3_000, 3_000, 3_000, 30, 30, 30))
    ]
    assert runtime.parts.compiler.compile(session.id, route).shortened_seqs == (seqs[0], seqs[1])
    found = {c.seq: c for c in runtime.parts.compiler.snip_candidates(session.id, route)}
    assert list(found) == seqs[:3]
    view = runtime.parts.compiler.compile(session.id, route, snips=frozenset({seqs[0]}))
    assert view.snipped_seqs == (seqs[0],) and view.shortened_seqs == (seqs[1],) and exact(view)
    assert view.snip_saved_tokens == found[seqs[0]].tokens_saved


def test_a_placeholder_reference_reads_back_verified(
    runtime: Runtime, workdir: Path, turns: tuple[str, dict[str, int]]
) -> None:
    """T-2, T-3: the seq, call id and SHA-256 a placeholder names are what the reader verifies."""
    session_id, seqs = turns
    route = runtime.route_for("foya-sim/large")
    view = runtime.parts.compiler.compile(session_id, route, snips=frozenset({seqs["error"]}))
    text = next(m["content"] for m in view.messages if m.get("tool_call_id") == "c_error")
    match = re.search(r'seq=(\d+), tool_call_id="([^"]+)", sha256="([0-9a-f]{64})"', text)
    assert match is not None
    arguments = {"op": "read", "seq": int(match[1]), "tool_call_id": match[2], "sha256": match[3]}
    context = ToolContext(workdir=workdir, session_id=session_id, store=runtime.parts.store)
    result = runtime.parts.registry.call(HISTORY_READ_TOOL, json.dumps(arguments), context)
    assert not result.is_error and body("error") in result.content
    forged = {**arguments, "sha256": "0" * 64}
    assert runtime.parts.registry.call(HISTORY_READ_TOOL, json.dumps(forged), context).is_error


def test_last_provider_call_is_the_newest_usage_record(runtime: Runtime) -> None:
    session = runtime.new_session()
    assert runtime.parts.compiler.last_provider_call(session.id) is None
    list(session.send("hello"))
    last = runtime.parts.compiler.last_provider_call(session.id)
    assert last == runtime.parts.store.last_event(session.id, EventKind.PROVIDER_USAGE).created_at
    assert not cache_is_cold(last, FIXED_NOW, runtime.settings.compaction.cache_ttl_seconds)
    assert cache_is_cold(
        last, FIXED_NOW + timedelta(seconds=61), runtime.settings.compaction.cache_ttl_seconds
    )


def test_incremental_snip_views_equal_a_fresh_compile(runtime: Runtime, workdir: Path) -> None:
    """The snipped view is rebuilt from the first changed entry and extended as history grows: after
    every change it equals a compiler that reads everything at once, pending snips included."""
    rng = random.Random(11)
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    route = session.route
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read everything")
    warm = runtime.parts.compiler
    seen: set[str] = set()
    for step in range(14):
        words = rng.choice((60, 300, 2_500))  # some large enough for T-1
        tool_step(runtime, session.id, f"c{step}", body(f"s{step}", words), error=rng.random() < 0.2)
        found = warm.snip_candidates(session.id, route)
        if found and rng.random() < 0.5:
            chosen = sorted(rng.sample([c.seq for c in found], k=rng.randint(1, len(found))))
            append(
                runtime,
                session.id,
                EventKind.CONTEXT_SNIPPED,
                **SnipPlan(SnipMode.SNIP, tuple(chosen), 0).event().payload,
            )
        pending = frozenset(c.seq for c in warm.snip_candidates(session.id, route) if rng.random() < 0.5)
        view = warm.compile(session.id, route, snips=pending)
        cold = fresh(runtime, workdir).compile(session.id, route, snips=pending)
        assert view.messages == cold.messages and view.layers == cold.layers and exact(view)
        assert (view.revision, view.snipped_seqs, view.shortened_seqs, view.snip_saved_tokens) == (
            cold.revision,
            cold.snipped_seqs,
            cold.shortened_seqs,
            cold.snip_saved_tokens,
        )
        seen |= {"snipped"} if view.snipped_seqs else set()
        seen |= {"both"} if view.snipped_seqs and view.shortened_seqs else set()
    assert seen == {"snipped", "both"}  # the run exercised snips, and snips beside T-1 shortening
