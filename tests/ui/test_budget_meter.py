"""Provides tests of the budget meter and the route switcher, against a real Runtime and simulator,
plus unit tests of the meter's pure helpers (bar widths, markers, clamping)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.color import Color
from textual.command import CommandList
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import OptionList

from foya_tui.runtime.context.report import ContextReport
from foya_tui.runtime.model import Event, EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.bridge import input_steps
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.screens.routes import RouteSwitcher
from foya_tui.ui.widgets.budget_meter import (
    LAYER_KEYS,
    MAX_STEPS,
    BudgetMeter,
    MeterBar,
    MeterLine,
    MeterReading,
    apportion,
    badge_text,
    bar_cells,
    bar_segments,
    clean_steps,
    columns,
    marker_columns,
    read_report,
    sparkline,
)
from tests.reports import context_report
from tests.ui.probes import notifications

WIDE = (120, 34)
NARROW = (90, 30)
Send = Callable[[Pilot[None], str], Awaitable[None]]
NO_USAGE = "estimate (no usage on this route yet)"


def visible_text(widget: Widget) -> str:
    """What the widget shows, as plain text with its lines joined by spaces (wrapping undone)."""
    lines: list[str] = []
    for node in [widget, *widget.query("*")]:
        if node.children or not node.display:
            continue
        region = Region(0, 0, node.region.width, node.region.height)  # padding included
        lines += [strip.text.strip() for strip in node.render_lines(region)]
    return " ".join(line for line in lines if line)


def close(color: Color, expected: str | None) -> bool:
    """Equal up to the rounding of Textual's colour system."""
    wanted = Color.parse(expected or "")
    return all(abs(a - b) <= 2 for a, b in zip(color.rgb, wanted.rgb, strict=True))


def header(app: FoyaApp) -> str:
    return visible_text(app.conversation.query_one("#header"))


def reading(app: FoyaApp) -> MeterReading:
    return app.conversation.meter.reading


def crafted(**changes: Any) -> ContextReport:
    """A report like `RequestView.report()` for foya-sim/small; `changes` replace fields."""
    return context_report(**changes)


async def preview_shown(pilot: Pilot[None], wait_until) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready and app.conversation.context_report is not None)


async def open_switcher(pilot: Pilot[None], wait_until) -> RouteSwitcher:
    await pilot.press("ctrl+r")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, RouteSwitcher))
    screen = pilot.app.screen
    assert isinstance(screen, RouteSwitcher)
    return screen


async def switch_to(pilot: Pilot[None], wait_until, model: str) -> None:
    """Open the switcher, pick `model`'s route and wait until the meter shows it."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    switcher = await open_switcher(pilot, wait_until)
    index = next(i for i, option in enumerate(switcher.options) if option.route.model == model)
    switcher.query_one(OptionList).highlighted = index
    await pilot.press("enter")
    await wait_until(pilot, lambda: reading(app).model == model and app.conversation.ready)


# -- the meter in the app -------------------------------------------------------------------


async def test_the_meter_shows_the_preview_before_the_first_message(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        shown = reading(app)
        assert app.session is None  # the preview sends nothing and creates no session
        assert shown.layers[0] > 0 and shown.layers[1:3] == (0, 0)  # pinned only: no history yet
        assert (shown.window, shown.input_budget, shown.output_reserve) == (8192, 6144, 2048)
        assert (shown.handoff_at, shown.high_water) == (4300, 4915)
        assert shown.total == sum(shown.layers)
        assert badge_text(shown) == NO_USAGE
        text = visible_text(app.conversation.meter)
        assert f"CONTEXT {shown.total:,} / 6,144" in " ".join(text.split())
        for words in ("pinned", "working set", "window 8,192", "foya-sim/small (simulator)", NO_USAGE):
            assert words in text
        assert "no steps yet" in text
        assert not app.conversation.query_one(MeterLine).display  # wide: the sidebar, not the line


async def test_after_a_turn_the_total_is_measured_and_the_step_is_drawn(
    app: FoyaApp, runtime: Runtime, send: Send
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        shown = reading(app)
        assert shown.source == "measured" and badge_text(shown) == "measured"
        assert shown.layers[2] > 0  # the working set holds the message and the reply
        assert app.session is not None
        steps = input_steps(runtime.parts.store.events(app.session.id))
        assert steps and app.conversation.meter.steps == steps
        text = visible_text(app.conversation.meter)
        assert "measured" in text and "input per step" in text and "estimate" not in text


async def test_one_percentage_of_the_input_budget_everywhere(app: FoyaApp, send: Send, wait_until) -> None:
    """The meter, the narrow line and /context give one share, of the input budget (the handoff and
    compaction lines are shares of it too); the reply says tokens and the window, no percentage."""
    import re

    from tests.ui.test_slash_commands import markers, submit

    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        shown = reading(app)
        share = round(100 * shown.total / shown.input_budget)
        assert shown.percent == share
        title = " ".join(visible_text(app.conversation.meter).split())
        assert f"CONTEXT {shown.total:,} / {shown.input_budget:,} {share}%" in title
        reply = visible_text(app.conversation.messages.blocks[-1])
        assert "tokens in this request; the window is 8,192" in reply and "%" not in reply
        await submit(pilot, "/context", wait_until)
        await wait_until(pilot, lambda: any("next request:" in text for text in markers(app)))
        (line,) = [text for text in markers(app) if "next request:" in text]
        assert re.findall(r"\d+%", line) == [f"{share}%"]
        assert f"of {shown.input_budget:,} input tokens" in line


async def test_every_model_call_of_a_turn_is_a_step(app: FoyaApp, runtime: Runtime, send: Send) -> None:
    """The simulator explores with tools: one turn, several model calls, one bar each."""
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "what files are in this project?")
        assert app.session is not None
        steps = input_steps(runtime.parts.store.events(app.session.id))
        assert len(steps) >= 2
        assert app.conversation.meter.steps == steps


async def test_a_route_switch_changes_header_and_meter_and_sends_nothing(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        session = app.session
        assert session is not None
        stored = len(runtime.parts.store.events(session.id))

        await switch_to(pilot, wait_until, "foya-sim/large")
        assert "foya-sim/large (simulator)" in header(app)
        shown = reading(app)
        assert (shown.window, shown.input_budget) == (32768, 24576)
        assert badge_text(shown) == NO_USAGE
        assert NO_USAGE in visible_text(app.conversation.meter)
        assert "window 32,768" in visible_text(app.conversation.meter)
        assert len(runtime.parts.store.events(session.id)) == stored  # a switch never sends anything
        assert session.route.model == "foya-sim/large"

        await switch_to(pilot, wait_until, "foya-sim/small")
        assert "foya-sim/small (simulator)" in header(app)
        assert reading(app).source == "measured"  # small's own baseline applies again (SPEC R-2)
        assert notifications(app) == []


async def test_a_switch_before_the_first_message_picks_the_new_sessions_route(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        await switch_to(pilot, wait_until, "foya-sim/large")
        assert app.session is None and "new session · foya-sim/large (simulator)" in header(app)
        assert reading(app).window == 32768 and reading(app).layers[0] > 0

        await send(pilot, "hello")
        assert app.session is not None and app.session.route.model == "foya-sim/large"
        usage = [e for e in runtime.parts.store.events(app.session.id) if e.kind is EventKind.PROVIDER_USAGE]
        assert [e.payload["model"] for e in usage] == ["foya-sim/large"]
        assert reading(app).source == "measured" and reading(app).model == "foya-sim/large"


async def test_the_switcher_lists_both_simulator_routes_with_window_and_baseline(
    app: FoyaApp, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        switcher = await open_switcher(pilot, wait_until)
        listed = {option.route.model: (option.window, option.has_baseline) for option in switcher.options}
        assert listed["foya-sim/small"] == (8192, True)
        assert listed["foya-sim/large"] == (32768, False)
        text = visible_text(switcher)
        assert "foya-sim/small (simulator) window 8,192 · baseline" in text
        assert "foya-sim/large (simulator) window 32,768 · no usage yet" in text
        # The route in use is marked and highlighted, so Enter alone changes nothing.
        assert "● foya-sim/small" in text
        current = switcher.query_one(OptionList).highlighted
        assert current is not None and switcher.options[current].route.model == "foya-sim/small"

        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))
        assert reading(app).model == "foya-sim/small"


async def test_route_switch_is_in_the_palette(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        await pilot.press("ctrl+p")
        await pilot.press(*"route: switch")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, RouteSwitcher))


async def test_switching_is_refused_while_a_turn_runs(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "429")
    # A long backoff keeps the turn running (waiting to retry) until it is cancelled.
    app = FoyaApp(make_runtime(Settings(retry_backoff=60.0)))
    async with app.run_test(size=WIDE) as pilot:
        screen = app.conversation
        await preview_shown(pilot, wait_until)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: screen.turn_running)
        await pilot.press("ctrl+r")
        await pilot.pause(0.1)
        assert app.screen is screen  # no switcher
        warnings = [message for message, severity in notifications(app) if severity == "warning"]
        assert warnings and "route cannot change" in warnings[0]
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.ready)


async def test_verdict_classes_follow_the_handoff_and_compaction_lines(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        screen, meter = app.conversation, app.conversation.meter
        line = screen.query_one(MeterLine)
        theme = app.current_theme
        cases = [("ok", 3000, set()), ("handoff", 4500, {"-handoff"}), ("compact", 5200, {"-compact"})]
        for verdict, total, classes in cases:
            estimate = {"total": total, "source": "measured", "reason": ""}
            screen.context_report = crafted(verdict=verdict, estimate=estimate)
            await pilot.pause()
            for widget in (meter, line):
                assert {"-handoff", "-compact"} & set(widget.classes) == classes, (verdict, widget)
        # At the compaction line the sidebar's border is error-coloured; in the band, warning-coloured.
        assert close(meter.styles.border_top[1], theme.error)
        screen.context_report = crafted(verdict="handoff", estimate={"total": 4500, "source": "measured"})
        await pilot.pause()
        assert close(meter.styles.border_top[1], theme.warning)


async def test_a_narrow_terminal_shows_the_one_line_meter(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=NARROW) as pilot:
        await preview_shown(pilot, wait_until)
        screen = app.conversation
        line = screen.query_one(MeterLine)
        assert screen.has_class("-narrow")
        assert line.display and not screen.meter.display
        text = visible_text(line)
        total = reading(app).total
        assert text.startswith(f"context {total:,}/6,144 ") and text.endswith("estimate")
        assert "▕" in text and "│" in text and "▏" in text
        assert line.region.y == screen.query_one("#header").region.y + 1  # right under the header

        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        assert not line.display and screen.meter.display


async def test_markup_in_a_model_name_or_notice_is_shown_literally(app: FoyaApp, wait_until) -> None:
    model = "[bold red]evil[/] [link='https://x.example']model[/link]"
    notice = "AGENTS.md: [b]capped[/b] at 8,000 characters"
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        route = {"id": "r9", "model": model, "connection": "default", "simulator": False}
        app.conversation.context_report = crafted(route=route, notices=[notice])
        await pilot.pause()
        # Joined without spaces: the sidebar wraps the long name anywhere.
        text = visible_text(app.conversation.meter).replace(" ", "")
        assert model.replace(" ", "") in text
        assert f"!{notice}".replace(" ", "") in text


async def test_resume_shows_the_next_request_and_the_earlier_steps(
    make_runtime: Callable[..., Runtime], wait_until
) -> None:
    headless = make_runtime()
    session = headless.new_session()
    for text in ("hello", "and again"):
        list(session.send(text))
    expected = input_steps(headless.parts.store.events(session.id))
    assert len(expected) >= 2

    app = FoyaApp(make_runtime(), session_id=session.id)
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        assert reading(app).source == "measured"
        assert reading(app).layers[1] > 0  # the first turn is history now
        assert app.conversation.meter.steps == expected


async def test_a_new_conversation_resets_the_meter_to_the_preview(
    app: FoyaApp, send: Send, wait_until
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        assert reading(app).source == "measured"
        await app.action_new_session()
        await wait_until(pilot, lambda: reading(app).source == "estimate")
        assert app.conversation.meter.steps == ()
        assert reading(app).layers[2] == 0


async def test_any_installed_theme_can_draw_the_meter(app: FoyaApp, wait_until) -> None:
    """Themes other than Foya's have no meter colours; they borrow them from their palette."""
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        app.theme = "textual-light"
        await pilot.pause()
        assert app.theme_variables["meter-working-set"] == app.theme_variables["primary"]
        assert "pinned" in visible_text(app.conversation.meter)


def test_every_binding_of_the_switcher_has_an_id_and_a_tooltip() -> None:
    for owner in (RouteSwitcher, ConversationScreen):
        for binding in owner.BINDINGS:
            assert getattr(binding, "id", None) and getattr(binding, "tooltip", None), owner.__name__
    assert any(getattr(b, "id", None) == "route.switch" for b in ConversationScreen.BINDINGS)


# -- the pure helpers -------------------------------------------------------------------------


def reading_of(**changes: Any) -> MeterReading:
    return read_report(crafted(**changes))


@pytest.mark.parametrize("width", [0, 1, 2, 5, 7, 28, 30, 33, 80])
def test_bar_segments_always_sum_to_the_width(width: int) -> None:
    totals = [0, 1, 5, 157, 3000, 4300, 4915, 6144, 8191, 8192, 50_000]
    layer_sets = [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (157, 0, 6, 876, 0), (900, 1200, 600, 300, 5)]
    for total in totals:
        for layers in layer_sets:
            for window in (8192, None):
                report = crafted(
                    window=window,
                    estimate={"total": total, "source": "estimate"},
                    layers=dict(zip(LAYER_KEYS, layers, strict=True)),
                )
                shown = read_report(report)
                segments = bar_segments(shown, width)
                assert sum(cells for _, cells in segments) == width
                assert all(cells >= 0 for _, cells in segments)
                assert len(bar_cells(shown, width)) == width


def test_apportion_keeps_the_sum_and_shows_every_present_layer() -> None:
    # 6 tokens get a cell of their own; the rest is shared in proportion (1.5 : 8.4 of 10).
    assert apportion([157, 0, 6, 876, 0], 10) == [2, 0, 1, 7, 0]
    assert sum(apportion([157, 0, 6, 876, 0], 1)) == 1
    assert apportion([0, 0, 0], 4) == [4, 0, 0]
    assert apportion([3, 3, 3], 0) == [0, 0, 0]
    assert apportion([-5, 10], 3) == [0, 3]
    for cells in range(12):
        assert sum(apportion([900, 1200, 600, 300, 5], cells)) == cells


def test_the_layers_fill_exactly_the_totals_cells() -> None:
    # 3,000 of 8,192 tokens on 32 cells reach ceil(11.7) = 12 cells.
    segments = dict(bar_segments(reading_of(), 32))
    assert sum(segments[key] for key in LAYER_KEYS) == columns(3000, 8192, 32) == 12
    assert segments["free"] == 24 - 12  # the input budget (6,144 tokens) ends at cell 24
    assert segments["reserve"] == 8


def test_markers_land_on_the_cell_their_line_reaches() -> None:
    shown = reading_of()
    # 4,300 × 32 / 8,192 = 16.8 → the 17th cell (index 16); 4,915 × 32 / 8,192 = 19.2 → index 19.
    assert marker_columns(shown, 32) == {16: "handoff", 19: "compact"}
    cells = bar_cells(shown, 32)
    assert (cells[16].glyph, cells[16].role) == ("│", "handoff")
    assert (cells[19].glyph, cells[19].role) == ("│", "compact")
    assert cells[0].role == "pinned" and cells[-1].role == "reserve"
    # A total exactly at the handoff line covers its marker: the marker is drawn over a layer.
    at_line = reading_of(estimate={"total": 4300, "source": "measured"})
    assert bar_cells(at_line, 32)[16] == ("┃", "handoff", "tool_schema")
    # Both lines in one cell of a tiny bar: the compaction line wins.
    assert marker_columns(shown, 2) == {1: "compact"}


def test_a_total_past_the_window_fills_the_bar_and_markers_stay_visible() -> None:
    shown = reading_of(estimate={"total": 20_000, "source": "estimate"}, verdict="compact")
    segments = dict(bar_segments(shown, 30))
    assert sum(segments[key] for key in LAYER_KEYS) == 30
    assert segments["free"] == segments["reserve"] == 0
    roles = [cell.role for cell in bar_cells(shown, 30)]
    assert "handoff" in roles and "compact" in roles


def test_bad_and_negative_numbers_are_clamped() -> None:
    report = crafted(
        window=-5,
        input_budget=-1,
        output_reserve=-2,
        handoff_at=0,
        high_water=-1,
        estimate={"total": -30, "source": "estimate", "reason": "guessed"},
        layers={"pinned": -3, "history": 2, "working_set": -1, "tool_schema": 0},
        notices=("", "  "),
    )
    shown = read_report(report)
    assert shown.window is None and shown.scale == 1
    assert (shown.input_budget, shown.output_reserve, shown.handoff_at, shown.high_water) == (0, 0, 0, 0)
    assert shown.total == 0 and shown.percent == 0
    assert shown.layers == (0, 2, 0, 0, 0)
    assert shown.source == "estimate" and shown.verdict == "ok" and shown.notices == ()
    assert sum(cells for _, cells in bar_segments(shown, 20)) == 20
    assert read_report(None) == MeterReading()
    assert read_report(crafted(route={"model": "\x1b[0m"})).model == "unknown model"


def test_report_strings_lose_escapes_and_stay_one_line() -> None:
    shown = reading_of(route={"model": "gpt\x1b[31m-x\nnext", "simulator": False}, notices=["a\x07\nb", ""])
    assert shown.model == "gpt-x next" and shown.notices == ("a b",)


def test_percent_and_unknown_window_scale() -> None:
    assert reading_of().percent == 49  # 3,000 of 6,144
    unknown = reading_of(window=None, input_budget=32_000, output_reserve=16_000)
    assert unknown.scale == 48_000


def test_steps_are_clamped_and_bounded() -> None:
    assert clean_steps([5, -1, 2.5, "x", None]) == (5, 0, 2, 0, 0)
    assert clean_steps("123") == () and clean_steps(None) == ()
    assert len(clean_steps(list(range(MAX_STEPS + 50)))) == MAX_STEPS


def test_sparkline_is_one_cell_per_step_from_zero() -> None:
    assert sparkline([], 10) == ""
    assert sparkline([100, 200, 400, 800], 10) == "▂▃▅█"
    assert sparkline([0, 0], 5) == "▁▁"
    assert sparkline(list(range(1, 40)), 8) == sparkline(list(range(32, 40)), 8)  # the newest steps
    assert len(sparkline([1, 2, 3], 0)) == 0


def test_badge_says_why_the_total_is_an_estimate() -> None:
    assert badge_text(reading_of()) == "measured"
    estimate = reading_of(estimate={"total": 5, "source": "estimate", "reason": "no usage on this route yet"})
    assert badge_text(estimate) == NO_USAGE
    mixed = reading_of(estimate={"total": 5, "source": "measured+estimate", "reason": "2 messages since"})
    assert badge_text(mixed) == "measured+estimate (2 messages since)"


def test_input_steps_come_from_usage_records() -> None:
    def usage(seq: int, payload: dict[str, Any]) -> Event:
        return Event("s", seq, EventKind.PROVIDER_USAGE, payload, "2026-11-29T12:00:00Z")

    events = [
        usage(1, {"usage": {"input_tokens": 163}, "route_id": "a"}),
        usage(2, {"usage": None, "route_id": "a"}),
        usage(3, {"usage": {"input_tokens": 1038}, "route_id": "b"}),
    ]
    assert input_steps(events) == (163, 1038)


def test_the_meter_widget_can_be_driven_directly() -> None:
    """The reactive chain without an app: validate, then compute."""
    meter = BudgetMeter()
    meter.report = "not a report"  # type: ignore[assignment]
    assert meter.report is None and meter.reading == MeterReading()
    meter.steps = (-5, 10)  # type: ignore[assignment]
    assert meter.steps == (0, 10)


async def test_the_bar_colours_follow_the_theme(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        bar = app.conversation.query_one(MeterBar)
        for theme in ("foya-dark", "foya-light", "foya-dark"):
            app.theme = theme
            await pilot.pause()
            first = bar.render_lines(Region(0, 0, bar.size.width, 1))[0]
            pinned = next(iter(first)).style
            assert pinned is not None and pinned.color is not None
            drawn = Color.from_rich_color(pinned.color)
            assert close(drawn, app.current_theme.variables["meter-pinned"]), theme


async def test_a_route_that_cannot_be_sent_is_marked_and_not_switched_to(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: the same pre-flight as `foya run`, in the switcher: the route's problem is shown
    beside it, and choosing it keeps the switcher open with the problem in its help line."""
    from foya_tui.settings import ModelSettings

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    app = FoyaApp(make_runtime(Settings(retry_backoff=0.0, models={"anthropic/claude-x": ModelSettings()})))
    async with app.run_test(size=WIDE) as pilot:
        await preview_shown(pilot, wait_until)
        switcher = await open_switcher(pilot, wait_until)
        index = next(
            i for i, option in enumerate(switcher.options) if option.route.model == "anthropic/claude-x"
        )
        assert "set ANTHROPIC_API_KEY" in (switcher.options[index].problem or "")
        assert "✗ anthropic/claude-x: no API key" in visible_text(switcher.query_one(OptionList))
        switcher.query_one(OptionList).highlighted = index
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: "ANTHROPIC_API_KEY" in visible_text(switcher.query_one("#route-help"))
        )
        assert app.screen is switcher and reading(app).model == "foya-sim/small"
