"""Provides tests of how the TUI shows working-set pressure (SPEC K): the hidden handoff reminder
and tool results cleared from the model's view as context notes (never as user messages, live or
on resume), the meter's handoff, snip and native lines, a running compaction's progress bar and its
cancellation inside a turn, compaction without a model, a compaction hook's veto, and the
inspector's producers and circuit breaker. Sessions are built through the real runtime, SQLite and
the simulator (a scripted provider where a compaction must wait to be cancelled)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList
from textual.message import Message
from textual.pilot import Pilot

from foya_tui.cli_json import inspect_json
from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.compaction.failures import BreakerState
from foya_tui.runtime.compaction.report import DiagnosticRecord
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import (
    CompactionFinished,
    CompactionProgressed,
    ContextSnipped,
    HandoffRecorded,
    TurnFailed,
)
from foya_tui.settings import BudgetSettings, CompactionSettings, Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.messages import CompactionEnded, CompactionStaged, RuntimeUpdated
from foya_tui.ui.screens.compaction import CompactionScreen
from foya_tui.ui.screens.inspector import InspectorScreen, breaker_lines, diagnostic_lines
from foya_tui.ui.widgets.budget_meter import (
    MIN_LINE_BAR,
    MeterDetails,
    MeterLine,
    compaction_ended,
    compaction_running,
    handoff_text,
    line_tags,
    read_report,
    snipped_text,
    stage_progress,
    status_text,
)
from foya_tui.ui.widgets.message_block import ContextNote, MessageBlock, handoff_note, snip_note
from foya_tui.ui.widgets.message_list import history_items
from foya_tui.ui.widgets.prompt import Prompt
from tests.fakes.scripted import WaitingSummaries
from tests.reports import context_report
from tests.snapshots.snapshot_scene import (
    BREAKER_SETTINGS,
    SceneClock,
    breaker_history,
    failing_log,
    fixed_surroundings,
    long_message,
    native_history,
    open_runtime,
    pressure_history,
)
from tests.ui.conftest import FIXED_NOW
from tests.ui.probes import notifications, record, stage_bar_share
from tests.ui.screen_text import visible_text

WIDE = (120, 40)
NARROW = (90, 30)
HANDOFF_MARKER = "[foya:handoff v1]"
MICRO_NOTE = snip_note("micro", 3, 960).text
"""What `pressure_history`'s micro-compaction shows as (three results, 960 tokens)."""
Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]


def updates(posted: list[Message]) -> list[Any]:
    return [message.update for message in list(posted) if isinstance(message, RuntimeUpdated)]


def meter_text(app: FoyaApp) -> str:
    return visible_text(app.conversation.meter)


def user_texts(app: FoyaApp) -> list[str]:
    return [block.text for block in app.conversation.messages.blocks if block.role == "user"]


async def command(pilot: Pilot[None], title: str, wait_until: WaitUntil) -> None:
    """Run a palette command by its title."""
    await pilot.press("ctrl+p")
    await pilot.press(*title)
    await wait_until(pilot, lambda: pilot.app.screen.query_one(CommandList).option_count > 0)
    await pilot.press("enter")


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction dialog answers keys at once (its grace period is tested on its own)."""
    monkeypatch.setattr(CompactionScreen, "GRACE_SECONDS", 0.0)


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Callable[..., Runtime]]:
    """Runtimes on the snapshot scene (fixed ids, platform and clock), closed after the test."""
    opened: list[Runtime] = []
    with fixed_surroundings():

        def make(**options: Any) -> Runtime:
            runtime = open_runtime(tmp_path, **options)
            opened.append(runtime)
            return runtime

        try:
            yield make
        finally:
            for runtime in opened:
                runtime.close()


# -- the handoff reminder and snipped results in the conversation -------------------------------------


async def test_a_stored_handoff_is_a_context_note_never_a_user_message_on_resume(
    scene: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    clock = SceneClock()
    runtime = scene(clock=clock)
    session_id = pressure_history(runtime, clock)
    events = runtime.parts.store.events(session_id)
    (handoff,) = [event for event in events if event.kind is EventKind.HANDOFF]
    assert handoff.payload["text"].startswith(HANDOFF_MARKER)
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready and "handoff:" in meter_text(app))
        # Exactly what the user typed, in order: the reminder is not among them.
        assert user_texts(app) == [
            "read every parser module and tell me what each one does",
            "which parser handles rule 3?",
            failing_log(),
        ]
        assert not any(HANDOFF_MARKER in visible_text(block) for block in app.conversation.messages.blocks)
        # Both notes sit in the turn they happened in, above its reply (the frontier the reminder asked for).
        reply = app.conversation.messages.blocks[-1]
        assert reply.role == "assistant"
        assert reply.notes == [handoff_note().text, MICRO_NOTE]
        assert reply.text.startswith("Execution frontier:")
        shown = visible_text(reply).replace("\n", " ")
        assert "context · handoff reminder stored for the model (hidden)" in shown

        meter = meter_text(app)
        assert "handoff: reminder stored" in meter and "snipped 3 results −960" in meter
        assert app.conversation.meter.has_class("-handoff")


async def test_live_handoff_and_snip_updates_show_the_notes_resume_shows(
    scene: Callable[..., Runtime], send: Send, wait_until: WaitUntil
) -> None:
    clock = SceneClock()
    runtime = scene(clock=clock)
    session_id = pressure_history(runtime, clock, last_turn=False)  # the cache has gone cold
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        posted = record(app)
        await send(pilot, failing_log())

        seen = [u for u in updates(posted) if isinstance(u, HandoffRecorded | ContextSnipped)]
        assert [type(u) for u in seen] == [HandoffRecorded, ContextSnipped]
        snipped = seen[1]
        assert (snipped.mode, snipped.results, snipped.tokens_saved) == ("micro", 3, 960)
        reply = app.conversation.messages.blocks[-1]
        assert reply.notes == [handoff_note().text, MICRO_NOTE]
        assert reply.text.startswith("Execution frontier:")
        assert user_texts(app)[-1] == failing_log()
        assert not any(HANDOFF_MARKER in block.text for block in app.conversation.messages.blocks)
        await wait_until(pilot, lambda: "handoff: reminder stored" in meter_text(app))

        # The same conversation read back from the store (as a resume builds it) ends the same way.
        items = history_items(runtime.parts.store.events(session_id))
        assert [item.role for item in items][-2:] == ["user", "assistant"]
        notes = [part for part in items[-1].parts if isinstance(part, ContextNote)]
        assert notes == [handoff_note(), snip_note("micro", 3, 960)]


async def test_a_turn_cancelled_after_its_notes_keeps_them(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handoff line is so low that the first turn stores the reminder; a 429 then keeps the turn
    # waiting to retry until esc. Its reply block has no text, but the note stays, as on resume.
    monkeypatch.setenv("FOYA_SIM_FAULTS", "429")
    settings = Settings(retry_backoff=60.0, budget=BudgetSettings(handoff_ratio=0.1, compact_ratio=0.9))
    runtime = make_runtime(settings)
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        screen = app.conversation
        await wait_until(pilot, lambda: screen.ready)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: screen.turn_running and len(screen.messages.blocks) == 2)
        await wait_until(pilot, lambda: screen.messages.blocks[-1].notes == [handoff_note().text])
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.ready)
        blocks = screen.messages.blocks
        assert [b.role for b in blocks] == ["user", "assistant"] and blocks[1].notes == [handoff_note().text]
        items = history_items(runtime.parts.store.events(app.session.id))  # type: ignore[union-attr]
        assert [(i.role, i.parts) for i in items] == [("user", ()), ("assistant", (handoff_note(),))]


# -- the meter ------------------------------------------------------------------------------------------


async def test_a_native_checkpoint_on_another_route_reads_other_route(
    scene: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    runtime = scene()
    session_id = native_history(runtime)
    current = runtime.inspect(session_id).current_id
    assert current is not None
    app = FoyaApp(runtime, session_id=session_id, model="foya-sim/small")
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready and app.conversation.meter.reading.known)
        reading = app.conversation.meter.reading
        assert reading.native is not None and reading.native.checkpoint_id == current
        assert not reading.native.sent and reading.checkpoint is None  # not replayed here
        details = visible_text(app.conversation.meter.query_one(MeterDetails))
        assert "native state 0 (other route)" in " ".join(details.split())
        assert "CHECKPOINT" not in meter_text(app)

    # On its own route the state is sent: the checkpoint line names it and who made it.
    app = FoyaApp(runtime, session_id=session_id, model="foya-sim/native")
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready and "CHECKPOINT" in meter_text(app))
        text = meter_text(app)
        assert f"CHECKPOINT {current[:4]}… native" in text and "made by provider (native)" in text
        assert "(other route)" not in text


async def test_the_one_line_meter_keeps_the_new_states_short(app: FoyaApp, wait_until: WaitUntil) -> None:
    report = context_report(
        REPORT,
        handoff={"state": "handoff_band", "epoch": "none", "status": "recorded"},
        snipped={"count": 12, "tokens_saved": 3400},
        native={"checkpoint_id": "ca65", "bound_model": "foya-sim/native", "sent": False},
    )
    async with app.run_test(size=NARROW) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        app.conversation.context_report = report
        await pilot.pause()
        text = app.conversation.query_one(MeterLine).render().plain
        assert "\n" not in text and len(text) <= NARROW[0]
        assert "handoff stored" in text and "snipped −3.4k" in text
        bar = text.split("▕")[1].split("▏")[0]
        assert len(bar) >= MIN_LINE_BAR and "native" not in text  # the last tag gave way to the bar


# -- a running compaction: progress and cancel -----------------------------------------------------------


async def test_esc_cancels_a_budget_compaction_inside_a_turn_and_nothing_is_written(
    tmp_path: Path, workdir: Path, wait_until: WaitUntil
) -> None:
    from foya_tui.paths import FoyaPaths

    client = WaitingSummaries("A first answer.", "A second answer.")
    paths = FoyaPaths(data_dir=tmp_path, config_dir=tmp_path, database=tmp_path / "foya.sqlite3")
    # A compaction line so low that the second message starts a budget compaction (SPEC C-2): the
    # small window's brief tool schemas leave the first exchange near 600 tokens, the line at 860.
    settings = Settings(retry_backoff=0.0, budget=BudgetSettings(handoff_ratio=0.11, compact_ratio=0.12))
    runtime = Runtime(settings, paths, client=client, workdir=workdir, clock=lambda: FIXED_NOW)
    app = FoyaApp(runtime)
    try:
        async with app.run_test(size=WIDE) as pilot:
            screen = app.conversation
            prompt = screen.query_one(Prompt)
            await wait_until(pilot, lambda: screen.ready)
            prompt.insert("hello")
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.ready and len(screen.messages.blocks) == 2)
            session = app.session
            assert session is not None
            posted = record(app)
            prompt.insert(long_message(0))
            await pilot.press("enter")
            await wait_until(pilot, lambda: client.asked.is_set() and screen.compaction_status is not None)
            await wait_until(pilot, lambda: "budget: summarising" in meter_text(app))
            share = stage_bar_share(meter_text(app))  # part-way through summarising
            assert share is not None and 1.0 / 4 < share < 2.5 / 4
            assert prompt.placeholder.startswith("compacting: summarising") and "esc" in prompt.placeholder
            assert screen.check_action("cancel_turn", ())  # esc is the turn's: it stops the compaction

            await pilot.press("escape")
            await wait_until(pilot, lambda: screen.ready and not screen.turn_running)
            report = runtime.inspect(session.id)
            assert report.records == () and report.current_id is None  # no checkpoint was written
            assert report.diagnostics[-1].payload["outcome"] == "cancelled"
            kinds = [event.kind for event in runtime.parts.store.events(session.id)]
            user = len(kinds) - 1 - kinds[::-1].index(EventKind.USER_MESSAGE)
            # After the message: the cancelled attempt's diagnostic, no checkpoint, snip or reply;
            # then the record that the turn was cancelled.
            assert kinds[user + 1 :] == [EventKind.COMPACTION_DIAGNOSTIC, EventKind.TURN_OUTCOME]
            seen = updates(posted)
            (finished,) = [u for u in seen if isinstance(u, CompactionFinished)]
            assert finished.result.outcome == "cancelled"
            assert [u.kind for u in seen if isinstance(u, TurnFailed)] == ["cancelled"]
            stages = [u.stage for u in seen if isinstance(u, CompactionProgressed)]
            assert stages[:2] == ["planning", "summarising"]
            await wait_until(pilot, lambda: "last: budget · cancelled" in meter_text(app))
            assert stage_bar_share(meter_text(app)) is None
            assert ("Reply cancelled.", "information") in notifications(app)
    finally:
        runtime.close()


def test_the_progress_bar_counts_stages() -> None:
    values = [
        stage_progress(compaction_running("manual", stage, detail))
        for stage, detail in (
            ("planning", ""),
            ("summarising", "1/3"),
            ("summarising", "2/3"),
            ("summarising", "3/3"),
            ("validating", ""),
            ("committing", ""),
        )
    ]
    assert values == sorted(values) and len(set(values)) == len(values)  # every stage moves it on
    assert values[0] > 0 and values[-1] < 4
    # The paths without chunks sit half-way through summarising; a garbled detail does the same.
    for detail in ("native", "fallback", "9/3", "x/y"):
        assert stage_progress(compaction_running("budget", "summarising", detail)) == 1.5


# -- compaction without a model, and a hook's veto ---------------------------------------------------


TURNS_WORTH_COMPACTING = (
    "hello",
    long_message(0),
    long_message(1),
    "what files are in this project?",
    "remember: always use tabs",
    "summarise",
)


async def test_compact_without_a_model_uses_the_candidate_dialog(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        for text in TURNS_WORTH_COMPACTING:
            await send(pilot, text)
        session = app.session
        assert session is not None
        posted = record(app)

        async def candidate() -> CompactionScreen:
            await command(pilot, "context: compact without a model (fallback)", wait_until)
            await wait_until(pilot, lambda: isinstance(app.screen, CompactionScreen))
            assert isinstance(app.screen, CompactionScreen)
            return app.screen

        dialog = await candidate()
        staged = [(m.stage, m.detail) for m in list(posted) if isinstance(m, CompactionStaged)]
        assert ("summarising", "fallback") in staged
        assert dialog.checkpoint.producer == "fallback"
        subtitle = str(dialog.query_one("#compaction-dialog").border_subtitle)
        assert subtitle.endswith("· fallback (no model)")
        kept = len(dialog.checkpoint.kept_messages)
        facts = " ".join(visible_text(dialog.query_one("#compaction-facts")).split())
        assert facts.endswith(f"· {kept:,} kept verbatim")
        await pilot.press("d")  # declined: nothing is committed
        await wait_until(pilot, lambda: app.conversation.ready and not app.conversation.compacting)
        assert runtime.inspect(session.id).records == ()

        await candidate()
        await pilot.press("a")
        await wait_until(pilot, lambda: app.conversation.ready and not app.conversation.compacting)
        report = runtime.inspect(session.id)
        (record_,) = report.records
        assert record_.checkpoint is not None and record_.checkpoint.producer == "fallback"
        ended = [m.result for m in list(posted) if isinstance(m, CompactionEnded)]
        assert ended[-1].producer == "fallback"
        await wait_until(pilot, lambda: "made by fallback (no model)" in meter_text(app))


async def test_a_compaction_the_hook_blocks_says_so(
    make_runtime: Callable[..., Runtime], send: Send, wait_until: WaitUntil
) -> None:
    hook = shlex.join([sys.executable, "-c", "print('frozen by policy'); raise SystemExit(3)"])
    runtime = make_runtime(Settings(retry_backoff=0.0, compaction=CompactionSettings(hook=hook)))
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        for text in TURNS_WORTH_COMPACTING:
            await send(pilot, text)
        await pilot.press("ctrl+k")
        await wait_until(pilot, lambda: "blocked" in meter_text(app) and app.conversation.ready)
        assert "last: manual ⊘ blocked" in meter_text(app)
        warnings = [text for text, severity in notifications(app) if severity == "warning"]
        assert len(warnings) == 1 and warnings[0].startswith("Compaction blocked: ")
        assert "frozen by policy" in warnings[0]
        assert runtime.inspect(app.session.id).records == ()  # type: ignore[union-attr]

        screen = await inspector(pilot, wait_until)
        log = visible_text(screen.query_one("#log")).replace("\n", " ")
        assert "⊘ blocked" in log and "frozen by policy" in log


# -- the inspector: producers and the circuit breaker ----------------------------------------------------


async def inspector(pilot: Pilot[None], wait_until: WaitUntil) -> InspectorScreen:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None)
    assert isinstance(app.screen, InspectorScreen)
    return app.screen


def tree_lines(screen: InspectorScreen) -> list[str]:
    lines: list[str] = []
    for node in screen.tree.root.children:
        lines.append(node.label.plain)
        lines += [f"  {child.label.plain}" for child in node.children]
    return lines


async def test_the_inspector_shows_a_fallback_checkpoint_and_the_open_breaker(
    scene: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    runtime = scene(settings=BREAKER_SETTINGS)
    session_id = breaker_history(runtime)
    expected = runtime.inspect(session_id)
    assert expected.breaker is not None and expected.breaker.open
    entries = inspect_json(expected)["checkpoints"]
    # Every checkpoint the fallback made; the current one is listed first.
    assert entries and all(e["producer"] == "fallback" for e in entries)
    (entry,) = [e for e in entries if e["id"] == expected.current_id]
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = await inspector(pilot, wait_until)
        lines = tree_lines(screen)
        assert lines[0].startswith(f"● {entry['id'][:8]}… current") and lines[0].endswith("seg  fallback")
        kept = entry["kept_messages"]
        assert lines[1] == f"  no model · {kept} message{'s' if kept != 1 else ''} kept verbatim"

        log = visible_text(screen.query_one("#log"))
        flat = " ".join(log.split())
        assert "BREAKER open · 3/3 failed summaries in a row" in flat
        assert "automatic compactions use the fallback, no model" in flat
        assert flat.count("✗ the summary was rejected twice:") == 3  # the reasons, one line each
        # Each diagnostic names its producer: the model's failed summaries, the fallback's attempts.
        assert "standalone" not in flat and "pre_turn llm ✗ failed" in flat
        assert "pre_turn fallback ✓ accepted" in flat
        # Breaker with the fingerprints, before the boundaries.
        assert log.index("FINGERPRINTS") < log.index("BREAKER") < log.index("ACCEPTED BOUNDARIES")

        await pilot.press("up")  # from the segment to the checkpoint's detail line
        detail = visible_text(screen.query_one("#detail-text"))
        assert "producer fallback" in detail and "kept verbatim" in detail


async def test_the_inspector_shows_a_native_checkpoint_and_its_state(
    scene: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    runtime = scene()
    session_id = native_history(runtime)
    (entry,) = inspect_json(runtime.inspect(session_id))["checkpoints"]
    size = entry["native_state_bytes"]
    assert isinstance(size, int) and size > 0
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = await inspector(pilot, wait_until)
        lines = tree_lines(screen)
        assert lines[0] == f"● {entry['id'][:8]}… current  native"
        assert lines[1] == f"  native state {size:,} bytes · foya-sim/native"
        detail = visible_text(screen.query_one("#detail-text")).replace("\n", " ")
        assert (
            "projection native" in detail and f"native state {size:,} bytes · route foya-sim/native" in detail
        )


# -- pure helpers ----------------------------------------------------------------------------------------

REPORT = context_report(
    route={"id": "r1", "model": "foya-sim/small", "connection": "default", "simulator": True},
    window=8192,
    input_budget=6144,
    output_reserve=2048,
    handoff_at=4300,
    high_water=4915,
    estimate={"total": 4600, "source": "measured", "reason": ""},
    layers={"pinned": 900, "history": 2000, "working_set": 1400, "tool_schema": 300, "native_state": 0},
    verdict="handoff",
    notices=[],
)


def test_the_new_report_fields_are_read_and_clamped() -> None:
    reading = read_report(
        context_report(
            REPORT,
            snipped={"count": 12, "tokens_saved": 3400},
            handoff={"state": "handoff_band", "epoch": "none", "status": "recorded"},
            native={"checkpoint_id": "ca65", "bound_model": "foya-sim/native", "sent": False},
            snapshot_known=True,
            checkpoint={"id": "7a91c3", "level": 1, "segments": 3, "producer": "repaired"},
        )
    )
    assert (reading.snipped, reading.snipped_saved) == (12, 3400)
    assert (reading.handoff_state, reading.handoff_status) == ("handoff_band", "recorded")
    assert reading.native is not None and reading.native_elsewhere
    assert reading.checkpoint is not None and reading.checkpoint.producer == "repaired"
    assert snipped_text(reading) == "snipped 12 results −3.4k"
    assert handoff_text(reading) == "handoff: reminder stored"
    assert line_tags(reading) == [" · handoff stored", " · snipped −3.4k", " · native: other route"]

    odd = read_report(
        context_report(
            REPORT,
            snipped={"count": -3, "tokens_saved": -1},
            handoff={"state": "below_handoff", "status": "none"},
            native=None,
            snapshot_known=False,
        )
    )
    assert (odd.snipped, odd.snipped_saved, odd.native) == (0, 0, None)
    assert (odd.handoff_state, odd.handoff_status) == ("below_handoff", "none")
    assert snipped_text(odd) == "" and handoff_text(odd) == "" and line_tags(odd) == []
    # In the band with no record yet: waiting for a measured request (K-5), or due before the next step.
    band = context_report(REPORT, handoff={"state": "handoff_band", "status": "none"})
    waiting = read_report(context_report(band, snapshot_known=False))
    assert handoff_text(waiting) == "handoff: waits for measured usage"
    assert handoff_text(read_report(band)) == "handoff: reminder before next step"
    suppressed = context_report(REPORT, handoff={"state": "handoff_band", "status": "suppressed"})
    assert handoff_text(read_report(suppressed)) == "handoff: suppressed (bad record)"
    # A report with none of these states: nothing new is shown, and the snapshot counts as known.
    old = read_report(REPORT)
    assert old.snapshot_known and old.native is None and line_tags(old) == []


def test_a_blocked_compaction_and_the_breaker_read_as_such() -> None:
    blocked = {"outcome": "blocked", "trigger": "budget", "phase": "pre_turn", "tokens_before": 5000}
    assert status_text(compaction_ended(CompactionResult.from_diagnostic(blocked))) == (
        "last: budget ⊘ blocked",
        "failed",
    )
    payload = {**blocked, "producer": None, "reason": "the compaction hook blocked it: frozen [b]x[/b]"}
    line = diagnostic_lines(DiagnosticRecord(7, "2026-11-29T12:00:00+00:00", payload)).plain
    assert "budget pre_turn ⊘ blocked" in line and "frozen [b]x[/b]" in line  # no producer: not chosen yet
    accepted = {**blocked, "outcome": "accepted", "producer": "fallback", "tokens_after": 900}
    assert (
        "budget pre_turn fallback ✓ accepted"
        in diagnostic_lines(DiagnosticRecord(8, "2026-11-29T12:00:00+00:00", accepted)).plain
    )
    closed = [c.plain for c in breaker_lines(BreakerState(1, 3, ("bad sections",)))]
    assert closed == ["BREAKER closed · 1/3 failed summaries"]  # its failure is in the diagnostics
    opened = [c.plain for c in breaker_lines(BreakerState(3, 3, ("a [b]x[/b]", "b", "c")))]
    assert opened[0] == "BREAKER open · 3/3 failed summaries in a row"
    assert opened[2:] == ["  ✗ a [b]x[/b]", "  ✗ b", "  ✗ c"]


def test_history_items_place_notes_in_their_turn() -> None:
    from foya_tui.runtime.model import Event

    def event(seq: int, kind: EventKind, payload: dict[str, Any]) -> Event:
        return Event("s1", seq, kind, payload, "2026-11-29T12:00:00+00:00")

    call = {"id": "c1", "name": "read_file", "arguments": "{}"}
    snip = {"version": 1, "mode": "snip", "seqs": [1, 2], "tokens_saved": 300}
    handoff = {"version": 1, "epoch": "none", "text": f"{HANDOFF_MARKER} record your frontier"}
    events = [
        event(1, EventKind.USER_MESSAGE, {"text": "go"}),
        event(2, EventKind.HANDOFF, handoff),
        event(3, EventKind.ASSISTANT_MESSAGE, {"tool_calls": [call], "finish_reason": "tool_calls"}),
        event(4, EventKind.TOOL_RESULT, {"tool_call_id": "c1", "name": "read_file", "content": "x"}),
        event(5, EventKind.CONTEXT_SNIPPED, snip),
        event(6, EventKind.ASSISTANT_MESSAGE, {"text": "done", "finish_reason": "stop"}),
        event(7, EventKind.USER_MESSAGE, {"text": "again"}),
        event(8, EventKind.CONTEXT_SNIPPED, {"version": 2, "mode": "snip"}),  # malformed: not shown
    ]
    items = history_items(events)
    assert [item.role for item in items] == ["user", "assistant", "user"]
    parts = items[1].parts
    kinds = [type(part).__name__ for part in parts]
    assert kinds == ["ContextNote", "ToolItem", "ContextNote", "str"]  # one turn, in the order it happened
    assert parts[0] == handoff_note() and parts[2] == snip_note("snip", 2, 300)
    assert (items[1].seq, items[1].last_seq) == (3, 6)
    assert not any(HANDOFF_MARKER in item.text for item in items)


def test_the_new_keys_and_commands_have_ids_and_tooltips() -> None:
    from textual.binding import Binding

    (fork,) = [b for b in MessageBlock.BINDINGS if isinstance(b, Binding) and b.id == "message.fork"]
    assert fork.key == "f" and fork.tooltip
    keys = [b.key for b in MessageBlock.BINDINGS if isinstance(b, Binding)]
    assert len(keys) == len(set(keys))  # f does not shadow r (rewind)
