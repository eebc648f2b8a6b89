"""Provides snapshot tests of the budget meter and the route switcher (regenerate with
`--snapshot-update`). The wide layout is 120×34; the narrow one is 90 columns, below the
sidebar's 100-column breakpoint.

The handoff and compaction states are driven with crafted reports (the shape of
`RequestView.report()`), so that the picture shows the meter's colours rather than whatever the
compaction service does at that moment.
"""

from __future__ import annotations

from typing import Any

from snapshot_scene import make_app, send, wait_until
from textual.pilot import Pilot
from textual.widgets import OptionList

from foya_tui.runtime.context.report import ContextReport
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.routes import RouteSwitcher
from tests.reports import context_report

WIDE = (120, 34)
NARROW = (90, 34)


def conversation_of(pilot: Pilot[None]) -> Any:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    return app.conversation


async def preview_shown(pilot: Pilot[None]) -> None:
    screen = conversation_of(pilot)
    await wait_until(pilot, lambda: screen.ready and screen.context_report is not None)


def crafted(total: int, source: str, reason: str, verdict: str, **layers: int) -> ContextReport:
    """A foya-sim/small report after a few measured steps, with the given total and layers."""
    return context_report(
        session="3f2a9c00000040008000000000000000",
        route={
            "id": "bde85c5fa679b104",
            "model": "foya-sim/small",
            "connection": "default",
            "simulator": True,
        },
        window=8192,
        window_source="simulator",
        max_input=None,
        output_reserve=2048,
        reserve_basis="2 × last output",
        input_budget=6144,
        handoff_at=4300,
        high_water=4915,
        estimate={"total": total, "source": source, "reason": reason},
        layers={
            "pinned": 156,
            "history": 0,
            "working_set": 0,
            "tool_schema": 876,
            "native_state": 0,
            **layers,
        },
        counter="o200k_base",
        counted_exactly=True,
        verdict=verdict,
        through_seq=40,
        anchor_seq=31,
        checkpoint_id=None,
        messages=24,
        notices=[],
    )


PAST_HANDOFF = crafted(
    4612,
    "measured+estimate",
    "measured, plus 1,180 estimated since",
    "handoff",
    history=2310,
    working_set=1270,
)
PAST_COMPACTION = context_report(
    crafted(
        5380,
        "measured+estimate",
        "measured, plus 740 estimated since",
        "compact",
        history=3050,
        working_set=1298,
    ),
    notices=["2 large tool result(s) shortened in the model's view"],
)
STEPS = (1038, 1127, 1490, 2210, 2650, 3120, 3395, 3872, 4230, 4612)


async def after_a_turn_then(pilot: Pilot[None], report: ContextReport) -> None:
    await send(pilot, "hello")
    screen = conversation_of(pilot)
    screen.input_steps = STEPS + ((5380,) if report.verdict == "compact" else ())
    screen.context_report = report
    await pilot.pause()


async def switch_to_large(pilot: Pilot[None]) -> None:
    screen = conversation_of(pilot)
    await pilot.press("ctrl+r")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, RouteSwitcher))
    switcher = pilot.app.screen
    assert isinstance(switcher, RouteSwitcher)
    index = next(i for i, option in enumerate(switcher.options) if option.route.model == "foya-sim/large")
    switcher.query_one(OptionList).highlighted = index
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.ready and screen.meter.reading.model == "foya-sim/large")


def test_meter_preview_of_a_new_conversation(snap_compare, scene_runtime: Runtime) -> None:
    """Before the first message, on foya-dark: a rounded grey box on the right titled
    "CONTEXT  597 / 6,144  10%"; under it one bar, a short blue+orange run (pinned, tool schema)
    then dots, a yellow │ (handoff) and a red │ (compaction) and a grey ▒ reserve at the right end.
    The rows list pinned > 0, history 0, working set 0, tool schema, native state 0, output reserve
    2,048 "first request", handoff line 4,300, compaction line 4,915; the badge reads "estimate (no
    usage on this route yet)", then "layers: exact (o200k_base)", "foya-sim/small (simulator)",
    "window 8,192" and "no steps yet". The header says "new session"."""
    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=preview_shown)


def test_meter_measured_after_one_turn(snap_compare, scene_runtime: Runtime) -> None:
    """After "hello": the header shows "session 3f2a9c"; the meter's total now includes the reply,
    the working set row is non-zero (teal), the reserve is "2 × last output" (1,024) and the lines
    moved right (5,017 / 5,734); the badge is a green "measured" with no reason; one teal step
    stands above "input per step". The border is still grey."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


def test_meter_estimate_after_switching_to_large(snap_compare, scene_runtime: Runtime) -> None:
    """After "hello" and a switch to foya-sim/large: the header ends "foya-sim/large (simulator)";
    the meter shows "/ 24,576", a bar almost all dots with the markers further right, reserve 8,192
    "first request", lines 17,203 / 19,660, window 32,768, and the badge is back to a yellow
    "estimate (no usage on this route yet)". The conversation is unchanged: nothing was sent."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await switch_to_large(pilot)

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


def test_meter_past_the_handoff_line(snap_compare, scene_runtime: Runtime) -> None:
    """A crafted report at 4,612 of 6,144 (75%): the meter's border and title turn yellow
    (warning); the bar's coloured run (blue, violet history, teal, orange) covers the yellow handoff
    marker, which is drawn over it, and stops before the red compaction marker; the badge reads
    "measured+estimate (measured, plus 1,180 estimated since)"; the sparkline rises step by step."""

    async def run_before(pilot: Pilot[None]) -> None:
        await after_a_turn_then(pilot, PAST_HANDOFF)

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


def test_meter_past_the_compaction_line(snap_compare, scene_runtime: Runtime) -> None:
    """A crafted report at 5,380 of 6,144 (88%): border and title turn red (error); the coloured
    run covers both markers; one notice in yellow at the bottom: "! 2 large tool result(s)
    shortened in the model's view"; no rule id of the specification on screen."""

    async def run_before(pilot: Pilot[None]) -> None:
        await after_a_turn_then(pilot, PAST_COMPACTION)

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


def test_light_theme_meter_past_the_handoff_line(snap_compare, scene_runtime: Runtime) -> None:
    """The handoff state on foya-light: a pale sidebar, darker layer colours (blue, purple, teal,
    brown), a dark-yellow border and title; every number and the badge easy to read."""

    async def run_before(pilot: Pilot[None]) -> None:
        await after_a_turn_then(pilot, PAST_HANDOFF)

    app = make_app(scene_runtime, theme="foya-light")
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_narrow_terminal_one_line_meter(snap_compare, scene_runtime: Runtime) -> None:
    """At 90 columns after "hello": no sidebar; one line right under the header reads
    "context 690/7,168 10% ▕…▏ measured" with a short coloured run, dots, the two markers and the
    ▒ reserve between the brackets; the conversation takes the whole width."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")

    assert snap_compare(make_app(scene_runtime), terminal_size=NARROW, run_before=run_before)


def test_route_switcher_open(snap_compare, scene_runtime: Runtime) -> None:
    """ctrl+r after "hello": a dialog titled "Switch route" over the dimmed conversation lists
    "● foya-sim/small (simulator)" (highlighted, the route in use) with "window 8,192 · baseline",
    "foya-sim/large (simulator)" with "window 32,768 · no usage yet" and "foya-sim/native
    (simulator)" (provider-native compaction) with "window 16,384 · no usage yet"; a dim help line
    "enter switch · esc close · nothing is sent"."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, "hello")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, RouteSwitcher))

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)
