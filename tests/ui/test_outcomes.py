"""Provides tests that what happened stays in the conversation: a compaction (why, tokens before →
after, who made it) and a declined one show as a dim line live, and the same line in the same place
after a restart, read from the stored diagnostic events; so do a failed and a cancelled turn ("✗ …",
"cancelled"), read from their stored turn outcomes. Against a real Runtime, SQLite file and the
simulator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.compaction import CompactionScreen
from foya_tui.ui.widgets.message_block import ContextNote
from foya_tui.ui.widgets.outcome_notes import compaction_note as note_of
from tests.ui.screen_text import visible_text
from tests.ui.test_compaction_ui import candidate_shown, compaction_done, turns_worth_compacting

Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]
WIDE = (120, 40)


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CompactionScreen, "GRACE_SECONDS", 0.0)


def conversation_lines(app: FoyaApp) -> list[str]:
    """The dim context lines of the conversation, in order."""
    return [visible_text(note) for note in app.conversation.messages.query(".context-note")]


def compaction_note(diagnostic: dict[str, object]) -> ContextNote | None:
    """The line of a compaction as a resumed session reads it from its stored diagnostic."""
    return note_of(CompactionResult.from_diagnostic(diagnostic))


def test_a_compaction_note_says_why_how_much_and_who() -> None:
    accepted = compaction_note(
        {
            "outcome": "accepted",
            "trigger": "budget",
            "tokens_before": 9812,
            "tokens_after": 2104,
            "producer": "llm",
        }
    )
    assert accepted is not None
    assert accepted.text == (
        "context · compacted (the context passed the compaction line): 9,812 → 2,104 tokens"
        " · made by llm summary"
    )
    failed = compaction_note(
        {"outcome": "failed", "trigger": "provider", "reason": "summary had no \x1b[31mGoal"}
    )
    assert failed is not None and "\x1b" not in failed.text and "the context was kept" in failed.text
    assert compaction_note({"outcome": "suppressed", "trigger": "budget"}) is None
    assert compaction_note({"outcome": "nothing_to_compact"}) is None


async def test_compactions_stay_in_the_conversation_after_a_restart(
    runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        await turns_worth_compacting(pilot, send)
        await candidate_shown(pilot, wait_until)
        await pilot.press("d")  # declined first: nothing committed, and said so
        await compaction_done(pilot, wait_until)
        await candidate_shown(pilot, wait_until)
        await pilot.press("a")
        await compaction_done(pilot, wait_until)
        await send(pilot, "and now?")
        live = conversation_lines(app)
        live_roles = [block.role for block in app.conversation.messages.blocks]
        assert app.session is not None
        session_id = app.session.id
    compactions = [line for line in live if "compact" in line]
    assert len(compactions) == 2
    assert "declined by the user" in compactions[0]
    assert compactions[1].startswith("context · compacted (you asked): ") and "made by llm" in compactions[1]

    resumed = FoyaApp(runtime, session_id=session_id)
    async with resumed.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: resumed.conversation.ready and resumed.conversation.messages.blocks)
        assert conversation_lines(resumed) == live
        assert [block.role for block in resumed.conversation.messages.blocks] == live_roles


def marker_lines(app: FoyaApp) -> list[str]:
    """The lines under messages (a turn's outcome, a finish marker), in order."""
    return [visible_text(marker) for marker in app.conversation.messages.query(".marker")]


def conversation_shape(app: FoyaApp) -> list[str]:
    """Each message's role and each marker line, in the order they are shown."""
    shape = []
    for child in app.conversation.messages.children:
        if child.has_class("marker"):
            shape.append(f"marker: {visible_text(child)}")
        elif hasattr(child, "role"):
            shape.append(str(child.role))
    return shape


async def test_failed_and_cancelled_turns_stay_in_the_conversation_after_a_restart(
    make_runtime: Callable[..., Runtime],
    send: Send,
    wait_until: WaitUntil,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A long backoff keeps the rate-limited turn waiting until esc cancels it.
    runtime = make_runtime(Settings(retry_backoff=60.0))
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
        await send(pilot, "and now?")
        monkeypatch.setenv("FOYA_SIM_FAULTS", "429")
        await pilot.press(*"wait for it", "enter")
        await wait_until(pilot, lambda: app.conversation.turn_running)
        await wait_until(pilot, lambda: any("retrying" in text for text, _ in app.__dict__["notified"]))
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.conversation.ready)
        monkeypatch.delenv("FOYA_SIM_FAULTS")
        await send(pilot, "once more")
        live = conversation_shape(app)
        assert app.session is not None
        session_id = app.session.id
    failed = [line for line in live if line.startswith("marker: ✗ ")]
    assert len(failed) == 1 and "quota" in failed[0]
    assert live == [
        "user",
        "assistant",
        "user",
        failed[0],
        "user",
        "marker: cancelled",
        "user",
        "assistant",
    ]

    resumed = FoyaApp(runtime, session_id=session_id)
    async with resumed.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: resumed.conversation.ready and resumed.conversation.messages.blocks)
        assert conversation_shape(resumed) == live
