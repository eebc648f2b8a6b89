"""Provides snapshot tests of working-set pressure on screen (regenerate with `--snapshot-update`):
the meter in the handoff band with snipped tool results, the inspector with a fallback checkpoint
and an open circuit breaker, and a provider-native checkpoint seen from another route. Every scene
is made through the real runtime and the simulator on the fixed scene (`pressure_history`,
`breaker_history`, `native_history`), so ids, seqs and token counts are the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_scene import (
    BREAKER_SETTINGS,
    SceneClock,
    breaker_history,
    fixed_surroundings,
    native_history,
    open_runtime,
    pressure_history,
    wait_until,
)
from textual.pilot import Pilot

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.inspector import InspectorScreen

WIDE = (120, 40)
"""Tall enough for every line of the meter, the new ones included."""
TALL = (120, 48)
NARROW = (90, 34)


@pytest.fixture
def pressure(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """The scene's Runtime on a SceneClock, and `pressure_history`'s session."""
    with fixed_surroundings():
        clock = SceneClock()
        runtime = open_runtime(tmp_path, clock=clock)
        try:
            yield runtime, pressure_history(runtime, clock)
        finally:
            runtime.close()


@pytest.fixture
def breaker(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """The scene's Runtime on BREAKER_SETTINGS, and `breaker_history`'s session."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path, settings=BREAKER_SETTINGS)
        try:
            yield runtime, breaker_history(runtime)
        finally:
            runtime.close()


@pytest.fixture
def native(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    """The scene's Runtime, and `native_history`'s session."""
    with fixed_surroundings():
        runtime = open_runtime(tmp_path)
        try:
            yield runtime, native_history(runtime)
        finally:
            runtime.close()


async def opened(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready and app.conversation.meter.reading.known)


async def inspector_open(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await opened(pilot)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None)


def test_meter_in_the_handoff_band_with_snipped_results(snap_compare, pressure: tuple[Runtime, str]) -> None:
    """A resumed session on foya-sim/small in the handoff band: the meter's border and title are
    yellow, "CONTEXT 5,499 / 7,168 77%"; under the layer rows a dim "snipped 3 results −960", under
    the "handoff line" row a yellow "handoff: reminder stored"; the compiler's own notice at the
    bottom says the same results are snipped (SPEC K-3, K-4). Left, the last turn: the end of the
    pasted log under "you", then the foya block starting with two dim italic lines, "context ·
    handoff reminder stored for the model (hidden)" and "context · micro-compaction: 3 old tool
    results cleared from the model's view (−960 tokens) · history keeps them", then the reply,
    which begins "Execution frontier:". No "[foya:handoff v1]" text appears anywhere."""
    runtime, session_id = pressure
    app = FoyaApp(runtime, session_id=session_id)
    assert snap_compare(app, terminal_size=WIDE, run_before=opened)


def test_narrow_meter_in_the_handoff_band(snap_compare, pressure: tuple[Runtime, str]) -> None:
    """The same session at 90 columns: no sidebar; the one-line meter under the header is yellow
    ("context 5,499/7,168 77%"), its bar about 20 cells, then "measured · handoff stored · snipped
    −960", all on one line; the two context notes above the reply wrap to the wider conversation."""
    runtime, session_id = pressure
    app = FoyaApp(runtime, session_id=session_id)
    assert snap_compare(app, terminal_size=NARROW, run_before=opened)


def test_inspector_with_a_fallback_checkpoint_and_an_open_breaker(
    snap_compare, breaker: tuple[Runtime, str]
) -> None:
    """The inspector of a session whose summaries always failed: CHECKPOINTS shows five fallback
    checkpoints, the current "● 78754229… current  L3  1 seg  fallback" and four earlier ones, each
    with a child line "no model · N message(s) kept verbatim" and its segments (the current one's
    highlighted). The log is scrolled to its end: the fingerprints' "none: no equivalent attempt is
    suppressed", then "BREAKER open · 3/3 failed summaries in a row" (open in
    yellow), "automatic compactions use the fallback, no model" in yellow and the three reasons in
    grey, each "✗ the summary was rejected twice: …", then ACCEPTED BOUNDARIES and REWOUND.
    Right, the fallback's segment: "## Goal" … "## Progress" "Deterministic fallback checkpoint of
    events 33–37: no model summary was used (the circuit breaker is open after 3 summariser
    failures)" …"""
    runtime, session_id = breaker
    app = FoyaApp(runtime, session_id=session_id)

    async def run_before(pilot: Pilot[None]) -> None:
        await inspector_open(pilot)
        # The log's end: the fingerprints, the breaker and the boundaries, below the diagnostics.
        pilot.app.screen.query_one("#inspector-log").scroll_end(animate=False)
        await pilot.pause()

    assert snap_compare(app, terminal_size=TALL, run_before=run_before)


def test_native_checkpoint_on_another_route(snap_compare, native: tuple[Runtime, str]) -> None:
    """A session compacted natively on foya-sim/native, resumed on foya-sim/small (its conversation
    ends with the dim line "context · compacted (you asked): … · made by provider (native)"): the
    header ends
    "foya-sim/small (simulator)"; the meter's "native state" row reads "0 (other route)" (the
    provider's state is never sent to another route, SPEC R-2), history is the full conversation
    again, and there is no CHECKPOINT line (none applies on this route); the last line still says
    "last: standalone ✓ 2.2k→1.6k" (the native compaction)."""
    runtime, session_id = native
    app = FoyaApp(runtime, session_id=session_id, model="foya-sim/small")
    assert snap_compare(app, terminal_size=WIDE, run_before=opened)


def test_inspector_of_a_native_checkpoint(snap_compare, native: tuple[Runtime, str]) -> None:
    """The same session's inspector: "● cbf573f4… current  native" (highlighted) with the child line
    "native state 478 bytes · foya-sim/native"; the right side shows the checkpoint's facts rather
    than a segment, since it has none: "phase standalone · projection native · producer native" and
    "native state 478 bytes · route foya-sim/native", then its ledger. DIAGNOSTICS: "manual
    standalone native ✓ accepted"; "BREAKER closed · 0/3 failed summaries"."""
    runtime, session_id = native
    app = FoyaApp(runtime, session_id=session_id)
    assert snap_compare(app, terminal_size=TALL, run_before=inspector_open)
