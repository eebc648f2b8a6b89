"""Provides tests that what happened stays in the conversation: a compaction (why, tokens before →
after, who made it) and a declined one show as a dim line live, and the same line in the same place
after a restart, read from the stored diagnostic events. Against a real Runtime, SQLite file and
the simulator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.runtime import Runtime
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
