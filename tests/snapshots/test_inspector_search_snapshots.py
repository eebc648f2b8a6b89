"""Provides snapshot tests of the inspector's search of history and of an event opened from it
(regenerate with `--snapshot-update`). The session is `recall_history` on the fixed scene: an
imported transcript compacted by the simulator into one checkpoint, so ids, seqs and sizes are the
same on every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_scene import fixed_surroundings, open_runtime, recall_history, wait_until
from textual.pilot import Pilot

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.history_event import HistoryEventScreen
from foya_tui.ui.screens.inspector import InspectorScreen

WIDE = (120, 34)


@pytest.fixture
def recall_app(tmp_path: Path) -> Iterator[FoyaApp]:
    """The app resumed on `recall_history`'s session; the scene stays fixed for the whole test."""
    with fixed_surroundings():
        runtime: Runtime = open_runtime(tmp_path)
        try:
            yield FoyaApp(runtime, session_id=recall_history(runtime))
        finally:
            runtime.close()


async def searched(pilot: Pilot[None], query: str) -> InspectorScreen:
    """Open the inspector, search for `query` and wait for the hits."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None)
    inspector = app.screen
    assert isinstance(inspector, InspectorScreen)
    await pilot.press("slash", *query, "enter")
    await wait_until(pilot, lambda: bool(inspector.history_list.hits))
    return inspector


def test_search_hits_say_what_summarises_them(snap_compare, recall_app: FoyaApp) -> None:
    """The inspector after `/` and "flaky io test" in quotes: on the right, a bold "SEARCH" then
    '· "flaky io test" · 4 hits, newest first' in grey, the search box holding the query, a grey hint
    line, and four two-line hits on a darker panel. The first, highlighted, is "seq 14 · assistant ·
    verbatim in context" (green); seq 13, 8 and 5 each say "summarised by checkpoint 8e453a9b… seg
    1" in teal. Under each, one line of the message, cut with "…"; seq 5's shows "[bold]this[/bold]"
    literally. The footer offers esc back, u undo checkpoint, s source events, / find, ^k compact
    now, f5 refresh. The left side is unchanged: one current checkpoint "● 8e453a9b… current  L0  1
    seg  llm" with "seg 1  seq 1–13"; in its log "manual standalone llm ✓ accepted" and "BREAKER
    closed · 0/3 failed summaries"."""

    async def run_before(pilot: Pilot[None]) -> None:
        await searched(pilot, '"flaky io test"')

    assert snap_compare(recall_app, terminal_size=WIDE, run_before=run_before)


def test_an_opened_hit_shows_its_full_text_and_segment(snap_compare, recall_app: FoyaApp) -> None:
    """The hit at seq 5 opened with Enter: a teal-bordered dialog titled "user · seq 5 · canonical
    history" over the dimmed inspector; a grey facts line "seq 5 · imported_message · 111 characters
    · 2 lines · sha256 …", then "summarised by checkpoint 8e453a9b… seg 1" in teal and "· the
    segment covers seq 1–13" in grey; the two lines of the message exactly as written, brackets and
    all ("Keep [bold]this[/bold] exactly as written…", "Second line: [red]stays[/] too."), in plain
    text; the help line offers "g go to the segment"."""

    async def run_before(pilot: Pilot[None]) -> None:
        await searched(pilot, "Tuesdays")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HistoryEventScreen))

    assert snap_compare(recall_app, terminal_size=WIDE, run_before=run_before)
