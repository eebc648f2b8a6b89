"""Provides snapshot tests of the inspector, the compaction dialog and the meter's checkpoint and
"last" lines (regenerate with `--snapshot-update`). Sessions are made through the real runtime and
the simulator on the fixed scene (`compaction_history` for the inspector), so ids, seqs and token
counts are the same on every run; times read 12:00 (a fixed clock, in UTC).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_scene import (
    SEGMENTED,
    compaction_history,
    fixed_surroundings,
    long_message,
    make_app,
    open_runtime,
    send,
    wait_until,
)
from textual.pilot import Pilot

from foya_tui.runtime.providers.client import CANCELLED_COMPLETION, CancelToken, Completion, ProviderRequest
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.compaction import CompactionScreen
from foya_tui.ui.screens.confirm import ConfirmScreen
from foya_tui.ui.screens.inspector import InspectorScreen
from foya_tui.ui.widgets.budget_meter import MeterCompaction
from tests.fakes.scripted import ScriptedClient

WIDE = (120, 34)
TALL = (120, 48)
"""Tall enough for every section of the inspector's log to be in view."""
TURNS = (
    "hello",
    long_message(0),
    long_message(1),
    "what files are in this project?",
    "remember: always use tabs",
    "summarise",
)
"""Enough history for a checkpoint to shrink the projection (recall tools included)."""


@pytest.fixture
def history_app(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """The scene's Runtime (on SEGMENTED settings) and the id of `compaction_history`'s session;
    the scene stays fixed for the whole test."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path, settings=SEGMENTED)
        try:
            yield runtime, compaction_history(runtime)
        finally:
            runtime.close()


async def inspector_open(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None)


async def candidate_open(pilot: Pilot[None]) -> None:
    for text in TURNS:
        await send(pilot, text)
    await pilot.press("ctrl+k")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CompactionScreen))


def test_inspector_with_two_checkpoints(snap_compare, history_app: tuple[Runtime, str]) -> None:
    """The inspector on foya-dark: header "Inspector · session 3f2a9c · 3 checkpoints · read from the
    store". Left, CHECKPOINTS: "● 6bc92234… current  L1  1 seg  llm" in bold teal with "seg 1  seq
    1–49" under it (highlighted), then "○ a79018e6… earlier  L0  3 seg  llm" with three segments
    (seq 1–26, 27–36, 37–44), the first manual compaction's fallback "○ … voided  L0  1 seg
    fallback" ("⚠ voided by the rewind at seq 25") and a last line "○ (none) · the model sees the
    full history" in grey.
    Below, DIAGNOSTICS newest first, each naming its producer ("manual standalone llm"): a yellow
    "✗ failed" (rejected twice, C-9), two green "✓ accepted" with their sizes, a yellow "✗ rejected"
    (would not shrink); FINGERPRINTS 1/16 with the same reason; "BREAKER closed · 1/3 failed
    summaries" (closed in green); ACCEPTED BOUNDARIES for foya-sim/large; REWOUND "seq 21–23 (rewind
    at seq 24)". Right, "SEGMENT 1 · SEQ 1–49 · LEVEL 1 · 374 TOKENS" above the summary ("## Goal: The
    user asked: …")
    on a darker panel, the ledger counts in grey and "✓ valid · source … · route foya-sim/small
    (bde85c5f)". The footer offers esc close, u undo checkpoint, s source events, / find, ^k compact
    now, f5 refresh."""
    runtime, session_id = history_app
    app = FoyaApp(runtime, session_id=session_id)
    assert snap_compare(app, terminal_size=TALL, run_before=inspector_open)


def test_inspector_light_theme(snap_compare, history_app: tuple[Runtime, str]) -> None:
    """The same inspector on foya-light, with the earlier checkpoint's second segment selected: a
    pale background, the current checkpoint in dark teal, the failed and rejected marks in dark
    yellow, the accepted ones and "closed" (the breaker) in green; the right side shows "SEGMENT 2 ·
    SEQ 25–34 · LEVEL 0" and its summary. Every line is easy to read."""
    runtime, session_id = history_app
    app = FoyaApp(runtime, session_id=session_id, theme="foya-light")

    async def run_before(pilot: Pilot[None]) -> None:
        await inspector_open(pilot)
        await pilot.press("down", "down", "down")

    assert snap_compare(app, terminal_size=TALL, run_before=run_before)


def test_compaction_candidate_dialog(snap_compare, scene_runtime: Runtime) -> None:
    """After six turns and ctrl+k: a dialog titled "Accept this checkpoint?" (subtitle "standalone ·
    foya-sim/small · llm summary": who made it) over the dimmed conversation. A bold line "1,938 →
    1,503 tokens (−22%) · 1 segment · level 0 · seq 1–22 · 15 messages" (on this small window the
    recall tools wait for tool_search, so they do not join the request), then the summary on a darker
    panel under a dim "segment 1 · seq 1–22 · level 0 · 260 tokens" line (## Goal … ## Critical
    Context), the grey ledger line "ledger: 1 rule · 5 requests · 0 files modified · 1 file read · 0
    commands · 0 errors", the buttons "Accept (a)" and "Decline (d)" (focused) and the help line, all
    in view. Behind it, the meter's stage bar stands at validating."""
    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=candidate_open)


def test_meter_after_an_accepted_compaction(
    snap_compare, scene_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate accepted with a: the dialog is gone and a notification says "Context compacted:
    1,938 → 1,503 tokens (1 segment, level 0)."; the conversation ends with a dim foya line
    "context · compacted (you asked): 1,938 → 1,503 tokens · made by llm summary". At the bottom
    of the meter, under the sparkline:
    "CHECKPOINT 685a… L0 · 1 seg" (the first word bold), a dim "made by llm summary" and a green
    "last: standalone ✓ 1.9k→1.5k"; the badge reads "estimate (history was rewritten since the last
    measured request)". The meter is one line taller than the sidebar here: a thin scrollbar shows
    at its right edge."""
    monkeypatch.setattr(CompactionScreen, "GRACE_SECONDS", 0.0)

    async def run_before(pilot: Pilot[None]) -> None:
        await candidate_open(pilot)
        await pilot.press("a")
        app = pilot.app
        assert isinstance(app, FoyaApp)
        await wait_until(pilot, lambda: app.conversation.ready and "last:" in str(meter_text(app)))

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


class WaitingSummaries(ScriptedClient):
    """Answers turns from a script; a compaction request waits until it is cancelled."""

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        while not cancel.cancelled:
            cancel._event.wait(0.01)
        return CANCELLED_COMPLETION


def test_meter_while_a_compaction_runs(snap_compare, tmp_path: Path) -> None:
    """A manual compaction waiting for its summary (a scripted provider that never answers): the
    meter's last line reads "manual: summarising…" in bold teal, with a stage bar under it, teal for
    about three eighths of its width (planning done, summarising under way) on a faint grey track;
    the prompt's placeholder says "compacting: summarising · esc cancel", and the footer offers "esc
    cancel compaction"."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path, client=WaitingSummaries("A first answer.", "A second answer."))
        try:

            async def run_before(pilot: Pilot[None]) -> None:
                await send(pilot, "hello")
                await send(pilot, "and then?")
                await pilot.press("ctrl+k")
                app = pilot.app
                assert isinstance(app, FoyaApp)
                await wait_until(pilot, lambda: "summarising" in str(meter_text(app)))

            # Leaving the app cancels the waiting compaction (the Bridge does so when unmounted).
            assert snap_compare(make_app(runtime), terminal_size=WIDE, run_before=run_before)
        finally:
            runtime.close()


def meter_text(app: FoyaApp) -> object:
    return app.conversation.meter.query_one(MeterCompaction).render()


def test_rewind_confirmation_on_a_focused_message(snap_compare, scene_runtime: Runtime) -> None:
    """After "hello" and "what files are in this project?", the second user message has the focus
    (an orange bar and a faint orange background) and r was pressed: a yellow-bordered dialog
    "Rewind to before this message?" explains that the message and everything after it leave the
    conversation (the log keeps them) and that its text goes back into the prompt; the buttons
    "Rewind (y)" and "Keep (n)" (focused) and a help line. The footer behind it offers "c copy",
    "r rewind to here" and "f fork from here"."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await send(pilot, "what files are in this project?")
        app = pilot.app
        assert isinstance(app, FoyaApp)
        app.conversation.messages.blocks[2].focus()
        await pilot.pause()
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)
