"""Provides tests of compaction, undo, rewind and the inspector in the TUI, against a real Runtime and
SQLite file: the simulator, or a scripted provider where a test needs an exact summary or a
compaction that waits. They assert the Bridge's messages, the store and what the screen shows."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Button

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import CompactionFinished, CompactionProgressed
from foya_tui.settings import BudgetSettings, Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.messages import (
    CompactionEnded,
    CompactionProposed,
    CompactionStaged,
    CompactionUndone,
    ContextReported,
    RuntimeUpdated,
    SessionInspected,
    SessionRewound,
)
from foya_tui.ui.screens.compaction import CompactionScreen
from foya_tui.ui.screens.confirm import ConfirmScreen
from foya_tui.ui.screens.conversation_history import SELECT_MESSAGE
from foya_tui.ui.screens.inspector import InspectorScreen
from foya_tui.ui.widgets.budget_meter import (
    PRODUCERS,
    CompactionStatus,
    MeterCompaction,
    compaction_ended,
    compaction_running,
    read_report,
    short_tokens,
    sparkline,
    status_text,
)
from foya_tui.ui.widgets.checkpoint_tree import TreeEntry, ledger_counts_text
from foya_tui.ui.widgets.message_block import MessageBlock
from foya_tui.ui.widgets.prompt import Prompt
from tests.fakes.scripted import ScriptedClient, WaitingSummaries
from tests.reports import context_report
from tests.snapshots.snapshot_scene import (
    SEGMENTED,
    compaction_history,
    fixed_surroundings,
    long_message,
    open_runtime,
)
from tests.ui.conftest import FIXED_NOW
from tests.ui.probes import notifications, record, stage_bar_share
from tests.ui.screen_text import visible_text

WIDE = (120, 40)
Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]
SECTIONS = ("Goal", "Progress", "Key Decisions", "Next Steps", "Critical Context")
MARKUP_SUMMARY = "\n\n".join(
    f"## {title}\n" + ("Keep [bold red]x[/] exactly as written." if title == "Goal" else f"Scripted {title}.")
    for title in SECTIONS
)
"""A valid five-section summary (SPEC C-8) whose text looks like Textual markup."""


def of_type(posted: list[Message], kind: type[Message]) -> list[Any]:
    return [message for message in list(posted) if isinstance(message, kind)]


def meter_lines(app: FoyaApp) -> str:
    return visible_text(app.conversation.meter.query_one(MeterCompaction))


def tree_lines(inspector: InspectorScreen) -> list[str]:
    lines: list[str] = []
    for node in inspector.tree.root.children:
        lines.append(node.label.plain)
        lines += [f"  {child.label.plain}" for child in node.children]
    return lines


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction dialog answers keys at once (its grace period is tested on its own)."""
    monkeypatch.setattr(CompactionScreen, "GRACE_SECONDS", 0.0)


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """A Runtime on the snapshot scene holding `compaction_history`'s session: checkpoints B (3
    segments) and C (current), a rejected and a failed compaction, a fingerprint and a rewind."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path, settings=SEGMENTED)
        try:
            yield runtime, compaction_history(runtime)
        finally:
            runtime.close()


@pytest.fixture
def scripted(tmp_path: Path, workdir: Path) -> Iterator[Callable[..., Runtime]]:
    """Runtimes on a temporary database whose provider is `client` (on foya-sim/small's window)."""
    opened: list[Runtime] = []

    def make(client: ScriptedClient) -> Runtime:
        paths = FoyaPaths(data_dir=tmp_path, config_dir=tmp_path, database=tmp_path / "foya.sqlite3")
        runtime = Runtime(
            Settings(retry_backoff=0.0), paths, client=client, workdir=workdir, clock=lambda: FIXED_NOW
        )
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


async def inspector_shown(pilot: Pilot[None], wait_until: WaitUntil) -> InspectorScreen:
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, InspectorScreen))
    screen = pilot.app.screen
    assert isinstance(screen, InspectorScreen)
    await wait_until(pilot, lambda: screen.report is not None)
    return screen


async def candidate_shown(pilot: Pilot[None], wait_until: WaitUntil) -> CompactionScreen:
    await pilot.press("ctrl+k")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CompactionScreen))
    screen = pilot.app.screen
    assert isinstance(screen, CompactionScreen)
    return screen


async def compaction_done(pilot: Pilot[None], wait_until: WaitUntil) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: not app.conversation.compacting and app.conversation.ready)


TURNS_WORTH_COMPACTING = (
    "hello",
    long_message(0),
    long_message(1),
    "what files are in this project?",
    "remember: always use tabs",
    "summarise",
)
"""Enough history for a checkpoint to shrink the projection even though, once one exists, the
model also gets the recall tools' schemas (one user rule among it)."""


async def turns_worth_compacting(pilot: Pilot[None], send: Send) -> None:
    for text in TURNS_WORTH_COMPACTING:
        await send(pilot, text)


# -- the inspector -----------------------------------------------------------------------------------


async def test_the_inspector_shows_lineage_segments_and_the_compaction_log(
    history: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = history
    expected = runtime.inspect(session_id)
    # The scene's first manual compaction left a fallback checkpoint that a rewind voided.
    earlier, current = [r for r in expected.records if r.usable]
    assert current.id == expected.current_id and current.checkpoint and earlier.checkpoint
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        posted = record(app)
        inspector = await inspector_shown(pilot, wait_until)
        assert len(of_type(posted, SessionInspected)) == 1  # everything came from one read

        lines = tree_lines(inspector)
        assert lines[0].startswith(f"● {current.id[:8]}… current  L{current.checkpoint.level}  1 seg")
        assert lines[2] == f"○ {earlier.id[:8]}… earlier  L0  3 seg  llm"
        segments = earlier.checkpoint.segments
        assert lines[3:6] == [
            f"  seg {s.index}  seq {s.from_seq}–{s.through_seq}  L{s.level}  {s.tokens:,}" for s in segments
        ]
        assert lines[-1] == "○ (none) · the model sees the full history"

        log = visible_text(inspector.query_one("#log")).replace("\n", " ")
        for text in ("✓ accepted", "✗ failed", "✗ rejected", "FINGERPRINTS 1/16", "rejected twice:"):
            assert text in log, text
        rewound = expected.rewound[0]
        assert f"seq {rewound.first_seq}–{rewound.last_seq} (rewind at seq {rewound.rewind_seq})" in log
        assert "foya-sim/large" in log and "through seq" in log  # accepted boundaries, by route

        # The cursor starts on the current checkpoint's segment: its text, ledger and status.
        detail = visible_text(inspector.query_one("#inspector-detail"))
        segment = current.checkpoint.segments[0]
        assert f"SEGMENT 1 · SEQ {segment.from_seq}–{segment.through_seq} · LEVEL {segment.level}" in detail
        assert "## Goal" in detail
        assert ledger_counts_text(current.checkpoint.ledger.counts)[:30] in detail.replace("\n", " ")
        assert "✓ valid" in detail and "foya-sim/small" in detail

        # Down to the earlier checkpoint's second segment: its own text.
        await pilot.press("down", "down", "down")
        node = inspector.tree.cursor_node
        assert node is not None and isinstance(node.data, TreeEntry)
        assert node.data.segment == segments[1]
        title = visible_text(inspector.query_one("#detail-title"))
        assert title.startswith(f"SEGMENT 2 · SEQ {segments[1].from_seq}–")
        first_line = segments[1].text.splitlines()[0]
        assert first_line in visible_text(inspector.query_one("#detail-text"))

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.conversation)


async def test_the_inspector_lists_each_kind_of_evidence_with_what_was_shortened_and_left_out(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    """SPEC K-12: per kind, its count, how many were shortened, how many were left out."""
    runtime = make_runtime()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Never force-push to main."}]
    for index in range(90):
        call = {
            "id": f"e{index}",
            "type": "function",
            "function": {"name": "edit_file", "arguments": json.dumps({"path": f"src/mod_{index:03d}.py"})},
        }
        messages += [
            {"role": "user", "content": f"request {index}: " + "details " * 60},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"e{index}", "content": "1 replacement"},
            {"role": "assistant", "content": f"Edited mod_{index:03d}."},
        ]
    session_id = runtime.import_transcript(json.dumps(messages).encode(), "t.json").id
    result = runtime.compact(session_id, runtime.route_for("foya-sim/small"))
    assert result.checkpoint is not None, result.reason
    ledger = result.checkpoint.ledger
    kinds = {kind.kind: kind for kind in ledger.kinds}
    assert kinds["files_modified"].left_out and kinds["requests"].shortened
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        inspector = await inspector_shown(pilot, wait_until)
        await pilot.press("up")  # from the segment to its checkpoint
        await wait_until(pilot, lambda: "LEDGER" in visible_text(inspector.query_one("#detail-text")))
        detail = visible_text(inspector.query_one("#detail-text"))
        modified, requests = kinds["files_modified"], kinds["requests"]
        assert f"files modified  {modified.kept} kept · {modified.left_out} left out" in detail
        assert f"requests        {requests.kept} kept · {requests.shortened} shortened" in detail
        assert "history_search finds it" in detail
        assert f"({modified.left_out} older paths left out; history_search finds them" in detail


async def test_undo_from_the_inspector_is_a_new_event_and_deletes_nothing(
    history: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = history
    before = runtime.parts.store.events(session_id)
    earlier, current = [r for r in runtime.inspect(session_id).records if r.usable]
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert app.conversation.meter.reading.checkpoint.id == current.id  # type: ignore[union-attr]
        inspector = await inspector_shown(pilot, wait_until)
        posted = record(app)
        await pilot.press("u")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert current.id[:8] in str(app.screen.query_one("#confirm-dialog").border_title)
        await pilot.press("y")
        await wait_until(
            pilot, lambda: inspector.report is not None and inspector.report.current_id == earlier.id
        )

        after = runtime.parts.store.events(session_id)
        assert len(after) == len(before) + 1
        assert [(e.seq, e.kind) for e in after[:-1]] == [(e.seq, e.kind) for e in before]
        assert after[-1].kind is EventKind.COMPACTION_UNDONE
        assert after[-1].payload == {"undone_id": current.id, "restored_id": earlier.id}

        undone = of_type(posted, CompactionUndone)
        assert [(m.undone_id, m.restored_id) for m in undone] == [(current.id, earlier.id)]
        kinds = [type(m) for m in posted]
        assert kinds.index(CompactionUndone) < kinds.index(ContextReported) < kinds.index(SessionInspected)
        lines = tree_lines(inspector)
        assert lines[0].startswith(f"○ {current.id[:8]}… undone")
        assert lines[2].startswith(f"● {earlier.id[:8]}… current  L0  3 seg")
        assert any("undone" in text and severity == "information" for text, severity in notifications(app))
        await wait_until(pilot, lambda: "L0 · 3 seg" in meter_lines(app))


async def test_undo_without_a_current_checkpoint_says_so(app: FoyaApp, send: Send, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        posted = record(app)
        await pilot.press("ctrl+p")
        await pilot.press(*"context: undo compaction")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: any(s == "error" for _, s in notifications(app)))
        assert ("this session has no current checkpoint to undo", "error") in notifications(app)
        assert not of_type(posted, CompactionUndone)
        assert app.conversation.ready


# -- manual compaction -------------------------------------------------------------------------------


async def test_manual_compaction_shows_the_candidate_then_commits_it(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await turns_worth_compacting(pilot, send)
        session = app.session
        assert session is not None and runtime.inspect(session.id).records == ()
        posted = record(app)
        dialog = await candidate_shown(pilot, wait_until)

        checkpoint = dialog.checkpoint
        shown = visible_text(dialog)
        assert f"{checkpoint.tokens_before:,} → {checkpoint.tokens_after:,} tokens" in shown
        assert "1 segment · level 0" in shown
        assert "## Goal" in shown and "## Critical Context" in shown
        assert ledger_counts_text(checkpoint.ledger.counts) in shown.replace("\n", " ")
        assert checkpoint.ledger.counts["directives"] == 1  # "remember: always use tabs"
        stages = [m.stage for m in of_type(posted, CompactionStaged)]
        assert stages[0] == "planning" and "summarising" in stages and stages[-1] == "validating"
        assert len(of_type(posted, CompactionProposed)) == 1
        assert runtime.inspect(session.id).records == ()  # nothing is committed before the answer

        await pilot.press("a")
        await compaction_done(pilot, wait_until)
        report = runtime.inspect(session.id)
        assert report.current_id == checkpoint.id
        (ended,) = of_type(posted, CompactionEnded)
        assert ended.result.outcome == "accepted"
        kinds = [type(m) for m in posted]
        assert kinds.index(CompactionEnded) < len(kinds) - 1 - kinds[::-1].index(ContextReported)
        assert any(text.startswith("Context compacted: ") for text, _ in notifications(app))
        await wait_until(pilot, lambda: f"CHECKPOINT {checkpoint.id[:4]}… L0 · 1 seg" in meter_lines(app))
        before, after = short_tokens(checkpoint.tokens_before), short_tokens(checkpoint.tokens_after)
        assert f"last: standalone ✓ {before}→{after}" in meter_lines(app)

        # Everything is covered now: the next attempt has nothing to do, and says so.
        await pilot.press("ctrl+k")
        await compaction_done(pilot, wait_until)
        assert any(text.startswith("Nothing to compact: ") for text, _ in notifications(app))
        assert "last: manual · nothing to do" in meter_lines(app)
        assert app.screen is app.conversation


async def test_declining_the_candidate_commits_nothing(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await turns_worth_compacting(pilot, send)
        session = app.session
        assert session is not None
        await candidate_shown(pilot, wait_until)
        await pilot.press("d")
        await compaction_done(pilot, wait_until)
        report = runtime.inspect(session.id)
        assert report.records == () and report.current_id is None
        assert report.diagnostics[-1].payload["reason"] == "declined by the user"
        assert ("Compaction declined; nothing was committed.", "information") in notifications(app)
        assert "last: manual · declined" in meter_lines(app)
        assert "CHECKPOINT" not in meter_lines(app)


async def test_a_candidate_that_does_not_shrink_is_reported_in_one_line(
    app: FoyaApp, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        await send(pilot, "thanks")
        posted = record(app)
        await pilot.press("ctrl+k")
        await compaction_done(pilot, wait_until)
        assert not of_type(posted, CompactionProposed)
        (ended,) = of_type(posted, CompactionEnded)
        assert ended.result.outcome == "rejected"
        warnings = [text for text, severity in notifications(app) if severity == "warning"]
        assert warnings == [f"Compaction rejected: {ended.result.reason}"]
        assert "\n" not in warnings[0]
        assert "last: manual ✗ rejected" in meter_lines(app)


async def test_compaction_is_refused_while_a_turn_runs(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "429")
    # A long backoff keeps the turn running (waiting to retry) until it is cancelled.
    app = FoyaApp(make_runtime(Settings(retry_backoff=60.0)))
    async with app.run_test(size=WIDE) as pilot:
        screen = app.conversation
        await wait_until(pilot, lambda: screen.ready)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: screen.turn_running and app.session is not None)
        posted = record(app)
        await pilot.press("ctrl+k")
        await pilot.pause(0.1)
        assert not screen.compacting and not of_type(posted, CompactionStaged)
        warnings = [text for text, severity in notifications(app) if severity == "warning"]
        assert warnings == ["Cannot compact while a reply is being written; wait for it or press esc."]
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.ready)


async def test_compaction_needs_a_session(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        await pilot.press("ctrl+k")
        await pilot.press("f2")
        await pilot.pause()
        assert app.screen is app.conversation
        texts = [text for text, _ in notifications(app)]
        assert texts == [
            "Nothing to compact yet: send a message first.",
            "Nothing to inspect yet: send a message first.",
        ]


async def test_esc_cancels_a_running_compaction_and_leaves_no_checkpoint(
    scripted: Callable[..., Runtime], send: Send, wait_until
) -> None:
    client = WaitingSummaries("First answer.", "Second answer.")
    runtime = scripted(client)
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        screen = app.conversation
        await send(pilot, long_message(0))
        await send(pilot, long_message(1))
        session = app.session
        assert session is not None
        before = len(runtime.parts.store.events(session.id))
        await pilot.press("ctrl+k")
        await wait_until(pilot, lambda: client.asked.is_set() and "manual: summarising" in meter_lines(app))
        assert screen.check_action("cancel_compaction", ()) and not screen.check_action("cancel_turn", ())
        share = stage_bar_share(meter_lines(app))  # the stage bar: part-way through summarising
        assert share is not None and 1.0 / 4 < share < 2.5 / 4
        # Typing goes on while it runs; Enter does not send.
        await pilot.press("x")
        assert screen.query_one(Prompt).text == "x" and not screen.ready

        await pilot.press("escape")
        await compaction_done(pilot, wait_until)
        report = runtime.inspect(session.id)
        assert report.records == () and report.current_id is None
        assert report.diagnostics[-1].payload["outcome"] == "cancelled"
        events = runtime.parts.store.events(session.id)
        assert len(events) == before + 1 and events[-1].kind is EventKind.COMPACTION_DIAGNOSTIC
        assert ("Compaction cancelled; nothing was written.", "information") in notifications(app)
        assert "last: manual · cancelled" in meter_lines(app)
        assert not screen.check_action("cancel_compaction", ()) and stage_bar_share(meter_lines(app)) is None


async def test_markup_in_a_summary_is_shown_literally(
    scripted: Callable[..., Runtime], send: Send, wait_until
) -> None:
    # Long replies and short questions: the summary (and the ledger's verbatim requests) is shorter.
    replies = [long_message(index) for index in range(3)]
    runtime = scripted(ScriptedClient(*replies, summaries=[MARKUP_SUMMARY]))
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        for text in ("one", "two", "three"):
            await send(pilot, text)
        dialog = await candidate_shown(pilot, wait_until)
        assert "Keep [bold red]x[/] exactly as written." in visible_text(dialog.query_one("#compaction-text"))
        await pilot.press("a")
        await compaction_done(pilot, wait_until)

        inspector = await inspector_shown(pilot, wait_until)
        node = inspector.tree.cursor_node
        assert node is not None and node.data is not None and node.data.segment is not None
        assert "Keep [bold red]x[/] exactly as written." in visible_text(inspector.query_one("#detail-text"))


async def test_a_compaction_inside_a_turn_shows_on_the_meter(
    make_runtime: Callable[..., Runtime], send: Send, wait_until
) -> None:
    # A low compaction line, so that the fourth turn starts with a budget compaction (SPEC C-2).
    settings = Settings(retry_backoff=0.0, budget=BudgetSettings(handoff_ratio=0.15, compact_ratio=0.2))
    app = FoyaApp(make_runtime(settings))
    async with app.run_test(size=WIDE) as pilot:
        for text in TURNS_WORTH_COMPACTING[:-1]:
            await send(pilot, text)
        posted = record(app)
        # Earlier turns crossed the low line with too little history to shrink (warnings then).
        shown_before = len(notifications(app))
        await send(pilot, "summarise the conversation so far")
        updates = [m.update for m in of_type(posted, RuntimeUpdated)]
        stages = [u.stage for u in updates if isinstance(u, CompactionProgressed)]
        assert stages[:2] == ["planning", "summarising"]
        (finished,) = [u for u in updates if isinstance(u, CompactionFinished)]
        assert finished.result.outcome == "accepted" and finished.result.phase == "pre_turn"
        before = short_tokens(finished.result.tokens_before)
        after = short_tokens(finished.result.tokens_after or 0)
        lines = meter_lines(app)
        assert f"last: pre_turn ✓ {before}→{after}" in lines
        result = finished.result
        assert result.checkpoint_id is not None and result.producer is not None
        shape = f"L{result.level} · {result.segments} seg"
        assert f"CHECKPOINT {result.checkpoint_id[:4]}… {shape}" in lines
        # Who made it: the summaries of the earlier, too short histories failed and opened the
        # breaker (SPEC K-11), so this one may be the fallback's; the meter names it either way.
        assert f"made by {PRODUCERS[result.producer]}" in lines
        assert notifications(app)[shown_before:] == []  # a success shows on the meter only


async def test_a_running_compaction_replaces_the_last_line(app: FoyaApp, send: Send, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        screen = app.conversation
        session_id = app.session.id  # type: ignore[union-attr]
        screen.post_message(RuntimeUpdated(CompactionProgressed(session_id, "budget", "summarising", "2/3")))
        await wait_until(pilot, lambda: "budget: summarising 2/3…" in meter_lines(app))
        reason = "an equivalent attempt failed"
        result = ended({"outcome": "suppressed", "trigger": "budget", "reason": reason})
        screen.post_message(RuntimeUpdated(CompactionFinished(session_id, result)))
        await wait_until(pilot, lambda: "last: budget ✗ suppressed" in meter_lines(app))
        assert ("Compaction suppressed: an equivalent attempt failed", "warning") in notifications(app)


async def test_a_resumed_session_shows_its_last_compaction(
    history: tuple[Runtime, str], wait_until: WaitUntil
) -> None:
    runtime, session_id = history
    report = runtime.inspect(session_id)
    current = report.current_id
    assert current is not None
    (record,) = [r for r in report.records if r.id == current]
    assert record.checkpoint is not None
    app = FoyaApp(runtime, session_id=session_id)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: "last:" in meter_lines(app))
        lines = meter_lines(app)
        assert f"CHECKPOINT {current[:4]}… L{record.checkpoint.level} · 1 seg" in lines
        assert "last: manual ✗ failed" in lines  # the most recent diagnostic is the failed attempt


# -- rewind ------------------------------------------------------------------------------------------


async def rewind_confirmed(pilot: Pilot[None], block: MessageBlock, wait_until: WaitUntil) -> None:
    block.focus()
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
    await pilot.press("y")


async def test_blocks_know_the_seqs_of_their_events(app: FoyaApp, runtime: Runtime, send: Send) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "what files are in this project?")
        user, reply = app.conversation.messages.blocks
        events = runtime.parts.store.events(app.session.id)  # type: ignore[union-attr]
        messages = [e.seq for e in events if e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT)]
        assert user.seq == user.last_seq == next(e.seq for e in events if e.kind is EventKind.USER_MESSAGE)
        assert (reply.seq, reply.last_seq) == (messages[0], messages[-1])


async def test_rewind_to_a_user_message_puts_its_text_back_into_the_prompt(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        for text in ("hello", "what files are in this project?", "thanks"):
            await send(pilot, text)
        screen = app.conversation
        session = app.session
        assert session is not None
        before = runtime.parts.store.events(session.id)
        target = screen.messages.blocks[2]
        assert (target.role, target.text) == ("user", "what files are in this project?")
        posted = record(app)
        await rewind_confirmed(pilot, target, wait_until)
        await wait_until(pilot, lambda: bool(of_type(posted, SessionRewound)) and screen.ready)

        prompt = screen.query_one(Prompt)
        assert prompt.text == "what files are in this project?" and prompt.has_focus
        assert [b.role for b in screen.messages.blocks] == ["user", "assistant"]
        after = runtime.parts.store.events(session.id)
        assert [(e.seq, e.kind) for e in after[:-1]] == [(e.seq, e.kind) for e in before]  # nothing deleted
        assert after[-1].kind is EventKind.REWIND and after[-1].payload == {"to_seq": target.seq - 1}  # type: ignore[operator]
        (reported,) = [m for m in of_type(posted, ContextReported)]
        assert reported.report.anchor_seq == screen.messages.blocks[0].seq  # "hello" is the latest now
        assert screen.context_report is reported.report

        # The edited message is sent like any other.
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(screen.messages.blocks) == 4 and screen.ready)
        assert [b.text for b in screen.messages.blocks if b.role == "user"] == [
            "hello",
            "what files are in this project?",
        ]


async def test_rewind_to_a_reply_keeps_its_tool_results(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "what files are in this project?")
        await send(pilot, "hello")
        screen = app.conversation
        reply = screen.messages.blocks[1]
        assert reply.role == "assistant" and len(reply.tools) == 2
        await rewind_confirmed(pilot, reply, wait_until)
        await wait_until(pilot, lambda: len(screen.messages.blocks) == 2 and screen.ready)
        events = runtime.parts.store.events(app.session.id)  # type: ignore[union-attr]
        assert events[-1].kind is EventKind.REWIND and events[-1].payload["to_seq"] == reply.last_seq
        shown = screen.messages.blocks[1]
        assert [tool.status.startswith("✓") for tool in shown.tools] == [True, True]
        assert screen.query_one(Prompt).text == ""


async def test_a_rewind_the_runtime_refuses_is_an_error_notification(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "what files are in this project?")
        await send(pilot, "hello")
        screen = app.conversation
        reply = screen.messages.blocks[1]
        before = len(runtime.parts.store.events(app.session.id))  # type: ignore[union-attr]
        # Its first event is the call of list_dir: a cut there would split it from its result.
        reply.last_seq = reply.seq
        await rewind_confirmed(pilot, reply, wait_until)
        await wait_until(pilot, lambda: any(s == "error" for _, s in notifications(app)))
        (error,) = [text for text, severity in notifications(app) if severity == "error"]
        assert "would separate tool calls from their results" in error and "\n" not in error
        assert len(runtime.parts.store.events(app.session.id)) == before  # type: ignore[union-attr]
        assert len(screen.messages.blocks) == 4 and screen.ready


async def test_rewind_is_in_the_palette_and_needs_a_selected_message(
    app: FoyaApp, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")

        async def run_command() -> None:
            await pilot.press("ctrl+p")
            await pilot.press(*"session: rewind to here")
            await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
            await pilot.press("enter")

        await run_command()  # the prompt has the focus: no message is selected
        await wait_until(pilot, lambda: bool(notifications(app)))
        assert notifications(app)[-1][0] == SELECT_MESSAGE

        app.conversation.messages.blocks[1].focus()
        await pilot.pause()
        await run_command()
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.query_one("#confirm-dialog").border_title == "Rewind to after this reply?"
        await pilot.press("n")
        await pilot.pause()
        assert app.screen is app.conversation and len(app.conversation.messages.blocks) == 2


async def test_the_new_keys_and_commands_have_ids_and_tooltips(app: FoyaApp, wait_until) -> None:
    from textual.binding import Binding

    from foya_tui.ui.screens.conversation import ConversationScreen

    for owner in (ConversationScreen, InspectorScreen, CompactionScreen, ConfirmScreen, MessageBlock):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding) and binding.id and binding.tooltip, (owner, binding)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for title in (
            "inspector: open",
            "inspector: search history",
            "context: compact now",
            "context: compact without a model (fallback)",
            "context: undo compaction",
            "session: rewind to here",
            "session: fork here",
            "session: fork",
        ):
            assert title in titles


# -- pure helpers ------------------------------------------------------------------------------------


def ended(diagnostic: dict[str, Any]) -> CompactionResult:
    """How a compaction ended, as a resumed session reads it from its stored diagnostic."""
    return CompactionResult.from_diagnostic(diagnostic)


def test_the_last_line_says_how_a_compaction_ended() -> None:
    accepted = ended(
        {
            "outcome": "accepted",
            "trigger": "budget",
            "phase": "pre_turn",
            "tokens_before": 9_800,
            "tokens_after": 2_100,
        }
    )
    assert status_text(compaction_ended(accepted)) == ("last: pre_turn ✓ 9.8k→2.1k", "ok")
    suppressed = ended({"outcome": "suppressed", "trigger": "budget", "tokens_before": 5000})
    assert status_text(compaction_ended(suppressed)) == ("last: budget ✗ suppressed", "failed")
    declined = ended({"outcome": "rejected", "trigger": "manual", "tokens_before": 5000})
    assert status_text(compaction_ended(declined, declined=True)) == ("last: manual · declined", "dim")
    assert status_text(compaction_running("manual", "summarising", "2/3")) == (
        "manual: summarising 2/3…",
        "running",
    )
    assert status_text(compaction_running("provider", "planning")) == ("provider: planning…", "running")
    # A stored diagnostic of another version reads as the most cautious ending, never raises.
    odd = compaction_ended(ended({"outcome": "failed\x1b[31m", "trigger": None, "tokens_before": -4}))
    assert odd == CompactionStatus(trigger="manual", outcome="failed", tokens_before=0)
    # Its reason is cleaned and bounded like every other string the meter shows.
    hostile = compaction_ended(ended({"outcome": "rejected", "reason": "too big\x1b]0;title\x07"}))
    assert hostile.reason == "too big" and hostile.outcome == "rejected"


def test_short_token_counts() -> None:
    assert [short_tokens(n) for n in (0, 812, 1_000, 9_849, 12_345, 1_250_000)] == [
        "0",
        "812",
        "1.0k",
        "9.8k",
        "12k",
        "1.2M",
    ]


def test_the_checkpoint_is_read_from_the_report() -> None:
    assert read_report(context_report(checkpoint=None)).checkpoint is None
    checkpoint = {"id": "7a91c3", "level": 1, "segments": 3, "through_seq": 40}
    reading = read_report(context_report(checkpoint=checkpoint))
    assert reading.checkpoint is not None
    assert (reading.checkpoint.id, reading.checkpoint.level, reading.checkpoint.segments) == ("7a91c3", 1, 3)


def test_a_compaction_is_a_visible_drop_in_the_sparkline() -> None:
    # Heights run from zero to the largest step, so the step after a compaction is visibly lower.
    line = sparkline([3_100, 3_900, 4_800, 2_100, 2_400], 5)
    assert line == "▆▇█▄▅"
    assert line[3] < line[2]


async def test_a_failed_manual_compaction_offers_the_fallback_in_the_dialog(
    scripted: Callable[..., Runtime], send: Send, wait_until
) -> None:
    """Issue 18: the model's summaries are rejected; the candidate dialog then shows the
    deterministic fallback, says why the model's failed, and its button commits the fallback."""
    replies = [long_message(index) for index in range(6)]
    bad = "## Goal\nonly one section [seq 9999]"
    runtime = scripted(ScriptedClient(*replies, summaries=[bad] * 10))
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        for text in ("one", "two", "three", "four", "five", "six"):
            await send(pilot, text)
        dialog = await candidate_shown(pilot, wait_until)
        assert dialog.model_failure and dialog.checkpoint.producer == "fallback"
        shown = visible_text(dialog)
        assert "The model's summary failed: " in shown
        assert str(dialog.query_one("#accept", Button).label) == "Use the fallback (a)"
        await wait_until(pilot, lambda: time.monotonic() - dialog._opened > dialog.GRACE_SECONDS)
        await pilot.click("#accept")
        await compaction_done(pilot, wait_until)
        session = app.session
        assert session is not None
        assert runtime.inspect(session.id).current_id == dialog.checkpoint.id
