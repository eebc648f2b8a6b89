"""Provides the budget meter: the next request's context layers, budget and lines at a glance.

`BudgetMeter` is the sidebar; `MeterLine` is its one-line form for narrow terminals. Both follow
Textual's ProgressBar: the screen pushes the runtime's report (`RequestView.report()`, a typed
`ContextReport`) into a `report` reactive with `data_bind`; `compute_reading` turns it into a
clamped `MeterReading`; the meter's parts are bound to that reading and only render it. Nothing here
counts tokens or reads the store: every number arrives in the report. Text is assembled as
`Content` from plain strings, so a model name such as `[bold]x` is shown literally.

Below the layer rows it says what else shapes the request: tool results snipped from the model's
view (micro-compaction or snip, SPEC K-3/K-4) and what they save; in the handoff band, whether the
hidden continuation reminder is stored (K-1); and a provider-native checkpoint this route may not
use (R-2). Below the sparkline it names the checkpoint the request applies and who made it (from
the report), and the last compaction (a `CompactionStatus` the screen sets from compaction
reports): how it ended, or the stage of the one running now, with a stage-count progress bar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from foya_tui.runtime.compaction.failures import Producer
from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.context.report import (
    CheckpointSummary,
    ContextReport,
    HandoffState,
    NativeSummary,
)
from foya_tui.runtime.context.tracker import EstimateSource
from foya_tui.runtime.text import terminal_safe
from foya_tui.runtime.view.handoff import EpochStatus

if TYPE_CHECKING:
    # A type only: importing it pulls in the planner and the checkpoint model, 50 ms that the first
    # frame does not need (tests/bench/bench_startup.py).
    from foya_tui.runtime.compaction.attempt import CompactionResult

# The layers of SPEC X-7, in the order the bar stacks them: (report key, label, theme variable).
LAYERS: tuple[tuple[str, str, str], ...] = (
    ("pinned", "pinned", "meter-pinned"),
    ("history", "history", "meter-history"),
    ("working_set", "working set", "meter-working-set"),
    ("tool_schema", "tool schema", "meter-tool-schema"),
    ("native_state", "native state", "meter-native-state"),
)
LAYER_KEYS = tuple(key for key, _, _ in LAYERS)
PRODUCERS: dict[str, str] = {
    Producer.LLM: "llm summary",
    Producer.REPAIRED: "llm, repaired",
    Producer.NATIVE: "provider (native)",
    Producer.FALLBACK: "fallback (no model)",
}
"""How the meter names who made a checkpoint (`report.checkpoint.producer`); each fits the sidebar
after "  made by "."""
MAX_STEPS = 256
"""Steps the sparkline keeps; older ones scrolled off the sidebar long ago."""
MAX_NOTICES = 3
SPARK_BARS = "▁▂▃▄▅▆▇█"
GLYPHS = {"free": "·", "reserve": "▒", "handoff": "│", "compact": "│"}
LAYER_GLYPH = "█"
NOTCH = "┃"
"""A line that the total has already passed, cut into the coloured run."""


def tokens(value: object) -> int:
    """A token count from a report: a whole number ≥ 0; anything else (None, text, NaN, bool) is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


def one_line(value: object, limit: int = 300) -> str:
    """A string from a report as one clean line: escapes and control characters removed."""
    if value is None:
        return ""
    cleaned = " ".join(terminal_safe(str(value)).split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


@dataclass(frozen=True)
class MeterReading:
    """A report as the meter shows it: every number clamped, every string one clean line."""

    known: bool = False
    """False until the first report arrives (the route is still being resolved)."""
    model: str = ""
    simulator: bool = False
    window: int | None = None
    input_budget: int = 0
    output_reserve: int = 0
    reserve_basis: str = ""
    handoff_at: int = 0
    high_water: int = 0
    total: int = 0
    source: EstimateSource = EstimateSource.ESTIMATE
    reason: str = ""
    layers: tuple[int, ...] = (0, 0, 0, 0, 0)
    counter: str = ""
    counted_exactly: bool = False
    verdict: Verdict = Verdict.OK
    notices: tuple[str, ...] = ()
    checkpoint: CheckpointSummary | None = None
    snipped: int = 0
    """Tool results the model sees as placeholders (micro-compaction or snip, SPEC K-3/K-4)."""
    snipped_saved: int = 0
    handoff_state: HandoffState = HandoffState.BELOW_HANDOFF
    handoff_status: EpochStatus = EpochStatus.NONE
    """Whether this compaction epoch's hidden continuation reminder is stored (SPEC K-1)."""
    snapshot_known: bool = True
    """False while no trustworthy token snapshot exists: the handoff and LLM compaction wait (K-5)."""
    native: NativeSummary | None = None

    @property
    def native_elsewhere(self) -> bool:
        """A provider-native checkpoint exists but belongs to another route (not sent: SPEC R-2)."""
        return self.native is not None and not self.native.sent

    @property
    def scale(self) -> int:
        """The tokens the bar spans: the window, or budget + reserve when the window is unknown."""
        return max(1, self.window or (self.input_budget + self.output_reserve))

    @property
    def percent(self) -> int:
        """The total as a share of the input budget (above 100 once the estimate exceeds it)."""
        return round(100 * self.total / self.input_budget) if self.input_budget else 0

    @property
    def route_label(self) -> str:
        return f"{self.model} (simulator)" if self.simulator else self.model


EMPTY_READING = MeterReading()


def read_report(report: ContextReport | None) -> MeterReading:
    """A report as the meter shows it: numbers clamped to whole tokens ≥ 0, every string one clean
    line (a model name or notice cannot carry escapes or markup into the sidebar)."""
    if report is None:
        return EMPTY_READING
    checkpoint = report.checkpoint
    native = report.native
    return MeterReading(
        known=True,
        model=one_line(report.route.model) or "unknown model",
        simulator=report.route.simulator,
        window=tokens(report.window) or None,
        input_budget=tokens(report.input_budget),
        output_reserve=tokens(report.output_reserve),
        reserve_basis=one_line(report.reserve_basis),
        handoff_at=tokens(report.handoff_at),
        high_water=tokens(report.high_water),
        total=tokens(report.estimate.total),
        source=report.estimate.source,
        reason=one_line(report.estimate.reason),
        layers=tuple(tokens(getattr(report.layers, key)) for key in LAYER_KEYS),
        counter=one_line(report.counter),
        counted_exactly=report.counted_exactly,
        verdict=report.verdict,
        notices=tuple(line for notice in report.notices if (line := one_line(notice))),
        checkpoint=None
        if checkpoint is None
        else replace(checkpoint, id=one_line(checkpoint.id, 64), producer=one_line(checkpoint.producer, 20)),
        snipped=tokens(report.snipped.count),
        snipped_saved=tokens(report.snipped.tokens_saved),
        handoff_state=report.handoff.state,
        handoff_status=report.handoff.status,
        snapshot_known=report.snapshot_known,
        native=None
        if native is None
        else replace(
            native,
            checkpoint_id=one_line(native.checkpoint_id, 64),
            bound_model=one_line(native.bound_model, 80),
        ),
    )


@dataclass(frozen=True)
class CompactionStatus:
    """The meter's "last" line: the compaction running now (`stage` set), or how the last one ended
    (`outcome` set). Built with `compaction_running` or `compaction_ended`, which clamp their input."""

    trigger: str
    stage: str = ""
    detail: str = ""
    """Progress within the stage, e.g. "2/3" while summarising the second of three chunks."""
    outcome: str = ""
    phase: str = ""
    tokens_before: int = 0
    tokens_after: int | None = None
    reason: str = ""
    declined: bool = False
    """The user looked at the candidate and said no (stored as a rejection)."""

    @property
    def running(self) -> bool:
        return not self.outcome


def compaction_running(trigger: object, stage: object, detail: object = "") -> CompactionStatus:
    return CompactionStatus(
        trigger=one_line(trigger, 20) or "manual", stage=one_line(stage, 20), detail=one_line(detail, 12)
    )


def compaction_ended(result: CompactionResult, *, declined: bool = False) -> CompactionStatus:
    """How a compaction ended (live, or read back from a resumed session's diagnostic)."""
    return CompactionStatus(
        trigger=str(result.trigger),
        outcome=str(result.outcome),
        phase=one_line(result.phase, 20),
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        reason=one_line(result.reason),
        declined=declined,
    )


def short_tokens(value: int) -> str:
    """A token count in at most five characters: 812, 9.8k, 12k, 1.2M."""
    if value < 1000:
        return str(value)
    if value < 10_000:
        return f"{value / 1000:.1f}k"
    if value < 1_000_000:
        return f"{value // 1000}k"
    return f"{value / 1_000_000:.1f}M"


def checkpoint_text(checkpoint: CheckpointSummary) -> str:
    """`7a91… L1 · 3 seg` (the id shortened as the inspector shows it); a provider-native
    checkpoint has no segments: `ca65… native`."""
    if checkpoint.producer == "native" and not checkpoint.segments:
        return f"{checkpoint.id[:4]}… native"
    return f"{checkpoint.id[:4]}… L{checkpoint.level} · {checkpoint.segments} seg"


def producer_text(checkpoint: CheckpointSummary) -> str:
    """`made by llm summary`, `made by fallback (no model)`; "" when the report does not say."""
    if not checkpoint.producer:
        return ""
    return f"made by {PRODUCERS.get(checkpoint.producer, checkpoint.producer)}"


def snipped_text(reading: MeterReading) -> str:
    """`snipped 12 results −3.4k` (the tokens their placeholders save); "" when none is."""
    if not reading.snipped:
        return ""
    noun = "result" if reading.snipped == 1 else "results"
    return f"snipped {reading.snipped} {noun} −{short_tokens(reading.snipped_saved)}"


def handoff_text(reading: MeterReading) -> str:
    """The handoff reminder's state (SPEC K-1) in the band, or whenever this epoch has a record:
    `handoff: reminder stored`; "" below the band with no record."""
    if reading.handoff_status == "recorded":
        return "handoff: reminder stored"
    if reading.handoff_status == "suppressed":
        return "handoff: suppressed (bad record)"
    if reading.handoff_state != "handoff_band":
        return ""
    if not reading.snapshot_known:
        return "handoff: waits for measured usage"  # K-5: no reminder on an unknown snapshot
    return "handoff: reminder before next step"


# A running compaction's stages, in order: the progress bar counts them (summarising in chunks
# advances within its stage). Declining and committing both end it.
STAGE_STEPS = {"planning": 0.5, "summarising": 1.0, "validating": 2.5, "committing": 3.5, "declining": 3.5}
STAGE_TOTAL = 4


def stage_progress(status: CompactionStatus) -> float:
    """How far a running compaction is, in stages out of STAGE_TOTAL: `summarising 2/3` is part-way
    through its stage; the paths without chunks (native, fallback) sit half-way through it."""
    base = STAGE_STEPS.get(status.stage, 0.0)
    if status.stage != "summarising":
        return base
    done, _, total = status.detail.partition("/")
    if done.isdigit() and total.isdigit() and 0 < int(done) <= int(total):
        return base + (int(done) - 0.5) / int(total)
    return base + 0.5


def stage_bar(progress: float, width: int) -> tuple[str, str]:
    """A running compaction's progress as a bar of `width` cells, in half cells: (done, left).
    Drawn as text in the stage line's own render, so it is always in step with the stage named
    above it (a separate progress widget could lag a frame behind, and costs the first frame)."""
    halves = max(0, min(2 * width, round(progress / STAGE_TOTAL * 2 * width)))
    full, half = divmod(halves, 2)
    done = "━" * full + ("╸" if half else "")
    return done, "─" * (width - full - half)


def status_text(status: CompactionStatus) -> tuple[str, str]:
    """The "last" line and its style role: `last: pre_turn ✓ 9.8k→2.1k`, `last: budget ✗ suppressed`,
    or, while one runs, `manual: summarising 2/3…`."""
    if status.running:
        detail = f" {status.detail}" if status.detail else ""
        return f"{status.trigger}: {status.stage}{detail}…", "running"
    if status.outcome == "accepted":
        after = short_tokens(status.tokens_after or 0)
        return f"last: {status.phase or status.trigger} ✓ {short_tokens(status.tokens_before)}→{after}", "ok"
    if status.declined:
        return f"last: {status.trigger} · declined", "dim"
    if status.outcome == "nothing_to_compact":
        return f"last: {status.trigger} · nothing to do", "dim"  # the full phrase would wrap
    if status.outcome == "cancelled":
        return f"last: {status.trigger} · cancelled", "dim"
    if status.outcome == "blocked":
        return f"last: {status.trigger} ⊘ blocked", "failed"  # by the hook (SPEC K-7): a veto, not a failure
    return f"last: {status.trigger} ✗ {status.outcome.replace('_', ' ')}", "failed"


def clean_steps(steps: object) -> tuple[int, ...]:
    """Input tokens per step, clamped to whole numbers ≥ 0, at most the last MAX_STEPS."""
    if not isinstance(steps, Sequence) or isinstance(steps, str):
        return ()
    return tuple(tokens(step) for step in steps[-MAX_STEPS:])


# -- the bar, as pure functions of a reading and a width ------------------------------------


def columns(amount: int, scale: int, width: int) -> int:
    """How many cells of a `width`-cell bar spanning `scale` tokens `amount` tokens reach.

    Rounded up, so that any non-zero amount shows, and a total equal to a line's tokens always
    covers that line's marker (see `marker_columns`)."""
    if width <= 0 or scale <= 0 or amount <= 0:
        return 0
    return min(width, -(-amount * width // scale))


def apportion(values: Sequence[int], cells: int) -> list[int]:
    """Split `cells` among `values` in proportion; the parts always sum to `cells`.

    Every non-zero value gets a cell first while there are cells enough, so each layer present in
    the request shows its colour however small it is; the rest goes by largest remainder."""
    values = [max(0, value) for value in values]
    cells = max(0, cells)
    parts = [0] * len(values)
    if not values or not cells:
        return parts
    if not any(values):
        parts[0] = cells
        return parts
    present = [index for index, value in enumerate(values) if value]
    if len(present) <= cells:
        for index in present:
            parts[index] = 1
    rest = cells - sum(parts)
    total = sum(values)
    shares = [value * rest // total for value in values]
    order = sorted(range(len(values)), key=lambda index: (-(values[index] * rest % total), index))
    for index in order[: rest - sum(shares)]:
        shares[index] += 1
    return [part + share for part, share in zip(parts, shares, strict=True)]


def bar_segments(reading: MeterReading, width: int) -> list[tuple[str, int]]:
    """The bar's runs from left to right as (role, cells): the five layers, the free input
    budget, then the output reserve. The cells always sum to `width`; a total past the budget
    eats into the reserve, and one past the window fills the whole bar."""
    width = max(0, width)
    if not reading.known:
        return [("free", width)]
    used = columns(reading.total, reading.scale, width)
    budget = max(used, columns(reading.input_budget, reading.scale, width))
    values = reading.layers if any(reading.layers) else (reading.total, 0, 0, 0, 0)
    runs = list(zip(LAYER_KEYS, apportion(values, used), strict=True))
    return [*runs, ("free", budget - used), ("reserve", width - budget)]


def marker_columns(reading: MeterReading, width: int) -> dict[int, str]:
    """The cells of the handoff and compaction lines: the last cell their tokens reach. When
    both fall in one cell (a narrow bar), the compaction line wins."""
    if not reading.known or width <= 0:
        return {}
    marks: dict[int, str] = {}
    for role, amount in (("handoff", reading.handoff_at), ("compact", reading.high_water)):
        if amount > 0:
            marks[max(0, columns(amount, reading.scale, width) - 1)] = role
    return marks


class BarCell(NamedTuple):
    glyph: str
    role: str
    """A layer key, "free", "reserve", "handoff" or "compact"."""
    under: str
    """What a marker covers (the role itself for any other cell)."""


def bar_cells(reading: MeterReading, width: int) -> list[BarCell]:
    """Every cell of the bar, markers drawn over whatever they fall on (as a notch on a layer)."""
    cells: list[BarCell] = []
    for role, count in bar_segments(reading, width):
        glyph = GLYPHS.get(role, LAYER_GLYPH)
        cells += [BarCell(glyph, role, role)] * count
    for column, role in marker_columns(reading, width).items():
        under = cells[column].under
        cells[column] = BarCell(NOTCH if under in LAYER_KEYS else GLYPHS[role], role, under)
    return cells


def sparkline(steps: Sequence[int], width: int) -> str:
    """One character per step (the newest `width`), heights from zero to the largest step, so a
    compaction shows as a drop rather than being stretched to the bottom of the range."""
    shown = [max(0, step) for step in steps][-width:] if width > 0 else []
    top = max(shown, default=0)
    if not top:
        return SPARK_BARS[0] * len(shown)
    return "".join(SPARK_BARS[min(7, step * 8 // top) if step < top else 7] for step in shown)


def badge_text(reading: MeterReading) -> str:
    """Whether the total is measured, with the reason whenever any of it is an estimate."""
    if reading.source != "measured" and reading.reason:
        return f"{reading.source} ({reading.reason})"
    return reading.source


def counting_text(reading: MeterReading) -> str:
    """How the layers were counted: with the model's own tokenizer, or estimated from characters."""
    if reading.counted_exactly:
        return f"layers: exact ({reading.counter})" if reading.counter else "layers: exact"
    return "layers: estimated from text"


def spread(left: str, right: str, width: int) -> str:
    """`left` and `right` on one line of `width` cells, at least one space apart."""
    return left + " " * max(1, width - len(left) - len(right)) + right


# -- widgets ---------------------------------------------------------------------------------

# Styles by role, from theme variables (resolved when drawn, so a theme change restyles the meter).
# Plain style strings rather than component classes: each component class costs a styled node per
# widget, and the meter's parts would have added ~80 of them to the first frame.
STYLES = {
    **{key: f"${variable}" for key, _, variable in LAYERS},
    # Alpha on $foreground, not $text-muted: "auto" colours are not resolved inside Content spans.
    "free": "$foreground 40%",
    "reserve": "$meter-reserve",
    "handoff": "bold $warning",
    "compact": "bold $error",
    "dim": "$foreground 70%",
    "measured": "bold $text-success",
    "measured+estimate": "bold $text-primary",
    "estimate": "bold $text-warning",
    "notice": "$text-warning",
    "running": "bold $text-primary",
    "ok": "$text-success",
    "failed": "$text-warning",
}


class MeterPart(Widget):
    """A part of the meter: renders the reading its meter binds to it."""

    DEFAULT_CSS = """
    MeterPart {
        height: auto;
    }
    """

    reading: reactive[MeterReading] = reactive(EMPTY_READING, layout=True)

    def bar(self, width: int) -> Content:
        """The stacked bar, `width` cells wide, coloured from the theme."""
        parts: list[tuple[str, str]] = []
        for cell in bar_cells(self.reading, width):
            style = STYLES[cell.role]
            if cell.glyph == NOTCH:
                # A line inside the coloured run: a cut in the meter's background colour shows on
                # any layer, where a yellow or red line would vanish on an orange or violet one.
                style = f"$surface on {STYLES[cell.under]}"
            parts.append((cell.glyph, style))
        return Content.assemble(*parts)


class MeterTitle(MeterPart):
    """`CONTEXT  5,412 / 6,144   88%`: the total against the input budget."""

    def render(self) -> Content:
        reading = self.reading
        if not reading.known:
            return Content.assemble(("CONTEXT", "bold"), ("  waiting for the route…", STYLES["dim"]))
        numbers = f"{reading.total:,} / {reading.input_budget:,}  {reading.percent:>3}%"
        line = spread("CONTEXT", numbers, self.size.width)
        return Content.styled(line, "bold")


class MeterBar(MeterPart):
    """The stacked bar: one colour per layer, then the reserve, with the two lines marked."""

    def render(self) -> Content:
        return self.bar(self.size.width)


class MeterDetails(MeterPart):
    """The numbers behind the bar: layers, reserve, the two lines, the badge and the route."""

    def render(self) -> Content:
        reading, width = self.reading, self.size.width
        if not reading.known:
            return Content("")
        dim = STYLES["dim"]

        def row(mark: str, role: str, label: str, value: int) -> Content:
            return Content.assemble((mark, STYLES[role]), " ", spread(label, f"{value:,}", width - 2))

        lines: list[Content] = []
        for (key, label, _), value in zip(LAYERS, reading.layers, strict=True):
            if key == "native_state" and reading.native_elsewhere:
                # A native checkpoint exists, but only its own route may replay it (SPEC R-2).
                value_text = f"{value:,} (other route)"
                lines.append(Content.assemble(("■", STYLES[key]), " ", spread(label, value_text, width - 2)))
            else:
                lines.append(row("■", key, label, value))
        if snipped := snipped_text(reading):
            lines.append(Content.styled(f"  {snipped}", dim))
        lines.append(row(GLYPHS["reserve"], "reserve", "output reserve", reading.output_reserve))
        if reading.reserve_basis:
            lines.append(Content.styled(f"  {reading.reserve_basis}", dim))
        lines.append(row(GLYPHS["handoff"], "handoff", "handoff line", reading.handoff_at))
        if handoff := handoff_text(reading):
            # Warning-coloured in the band, like the border; dim once the request is below it.
            role = "dim" if reading.handoff_state == "below_handoff" else "notice"
            lines.append(Content.styled(f"  {handoff}", STYLES[role]))
        lines.append(row(GLYPHS["compact"], "compact", "compaction line", reading.high_water))
        lines.append(Content(""))
        source, _, reason = badge_text(reading).partition(" ")
        badge = STYLES[reading.source]
        lines.append(Content.assemble((source, badge), (f" {reason}" if reason else "", dim)))
        lines.append(Content.styled(counting_text(reading), dim))
        lines.append(Content(""))
        lines.append(Content.styled(reading.route_label, "bold"))
        window = f"window {reading.window:,}" if reading.window else "window unknown"
        lines.append(Content.styled(window, dim))
        return Content("\n").join(lines)


class StepSparkline(MeterPart):
    """Input tokens per step, newest on the right; compactions show as drops."""

    steps: reactive[tuple[int, ...]] = reactive((), layout=True)

    def render(self) -> Content:
        label = " input per step"
        if not self.steps:
            return Content.styled("no steps yet", STYLES["dim"])
        line = sparkline(self.steps, max(1, self.size.width - len(label)))
        return Content.assemble((line, STYLES["working_set"]), (label, STYLES["dim"]))


class MeterCompaction(MeterPart):
    """`CHECKPOINT 7a91… L1 · 3 seg`, who made it, and `last: pre_turn ✓ 9.8k→2.1k` (or the running
    stage); hidden while there is neither, so a session that never compacted shows nothing here."""

    compaction: reactive[CompactionStatus | None] = reactive(None, layout=True)

    def watch_reading(self) -> None:
        self._show()

    def watch_compaction(self) -> None:
        self._show()

    def _show(self) -> None:
        self.display = self.reading.checkpoint is not None or self.compaction is not None

    def render(self) -> Content:
        lines: list[Content] = []
        checkpoint = self.reading.checkpoint
        if checkpoint is not None:
            lines.append(Content.assemble(("CHECKPOINT ", "bold"), checkpoint_text(checkpoint)))
            if made_by := producer_text(checkpoint):
                lines.append(Content.styled(f"  {made_by}", STYLES["dim"]))
        if self.compaction is not None:
            text, role = status_text(self.compaction)
            lines.append(Content.styled(text, STYLES[role]))
            if self.compaction.running:
                done, left = stage_bar(stage_progress(self.compaction), max(4, self.size.width or 20))
                lines.append(Content.assemble((done, STYLES["running"]), (left, STYLES["dim"])))
        return Content("\n").join(lines)


class MeterNotices(MeterPart):
    """The compiler's notices (caps hit, unknown window, shortened results), one line each."""

    def render(self) -> Content:
        notices = self.reading.notices
        if not notices:
            return Content("")
        shown = [Content.styled(f"! {notice}", STYLES["notice"]) for notice in notices[:MAX_NOTICES]]
        if len(notices) > MAX_NOTICES:
            shown.append(Content.styled(f"  +{len(notices) - MAX_NOTICES} more", STYLES["dim"]))
        return Content("\n").join(shown)


def set_verdict_classes(widget: Widget, verdict: str) -> None:
    """Warning colours in the handoff band, error colours at or past the compaction line."""
    widget.set_class(verdict == "handoff", "-handoff")
    widget.set_class(verdict == "compact", "-compact")


class BudgetMeter(VerticalScroll):
    """The sidebar meter. Set `report` (a typed `RequestView.report()`) and `steps` (input tokens
    per step); the parts follow through `reading`."""

    DEFAULT_CSS = """
    BudgetMeter {
        height: 1fr;
        padding: 0 1;
        border: round $panel-lighten-2;
        background: $surface;
        scrollbar-size-vertical: 1;
        &.-handoff { border: round $warning; }
        &.-compact { border: round $error; }
        &.-handoff > MeterTitle { color: $text-warning; }
        &.-compact > MeterTitle { color: $text-error; }
        & > MeterBar, & > MeterDetails, & > StepSparkline, & > MeterNotices { margin: 1 0 0 0; }
        & > MeterCompaction { margin: 1 0 0 0; display: none; }
        & > MeterBar { margin: 0; }
    }
    """

    can_focus = False  # read at a glance: Tab moves between the prompt and the messages only
    report: reactive[ContextReport | None] = reactive(None, always_update=True)
    steps: reactive[tuple[int, ...]] = reactive(())
    compaction: reactive[CompactionStatus | None] = reactive(None)
    """The last compaction, or the one running now (None: none since the session opened)."""
    reading: reactive[MeterReading] = reactive(EMPTY_READING)

    def compose(self) -> ComposeResult:
        yield MeterTitle().data_bind(BudgetMeter.reading)
        yield MeterBar().data_bind(BudgetMeter.reading)
        yield MeterDetails().data_bind(BudgetMeter.reading)
        yield StepSparkline().data_bind(BudgetMeter.steps)
        yield MeterCompaction().data_bind(BudgetMeter.reading, BudgetMeter.compaction)
        yield MeterNotices().data_bind(BudgetMeter.reading)

    def validate_report(self, report: object) -> ContextReport | None:
        return report if isinstance(report, ContextReport) else None

    def validate_steps(self, steps: object) -> tuple[int, ...]:
        return clean_steps(steps)

    def validate_compaction(self, status: object) -> CompactionStatus | None:
        return status if isinstance(status, CompactionStatus) else None

    def compute_reading(self) -> MeterReading:
        return read_report(self.report)

    def watch_reading(self, reading: MeterReading) -> None:
        set_verdict_classes(self, reading.verdict)


class MeterLine(MeterPart):
    """The meter in one line, for terminals too narrow for the sidebar:
    `context 5,412/6,144 88% ▕████··│··▒▒▏ measured`."""

    DEFAULT_CSS = """
    MeterLine {
        height: 1;
        padding: 0 1;
        background: $surface;
        &.-handoff { color: $text-warning; }
        &.-compact { color: $text-error; }
    }
    """

    report: reactive[ContextReport | None] = reactive(None, always_update=True)
    # Declared again so that it is computed here (a reactive finds its compute method in its own class).
    reading: reactive[MeterReading] = reactive(EMPTY_READING)

    def validate_report(self, report: object) -> ContextReport | None:
        return report if isinstance(report, ContextReport) else None

    def compute_reading(self) -> MeterReading:
        return read_report(self.report)

    def watch_reading(self, reading: MeterReading) -> None:
        set_verdict_classes(self, reading.verdict)

    def render(self) -> Content:
        reading = self.reading
        if not reading.known:
            return Content.assemble(("context", "bold"), (" waiting for the route…", STYLES["dim"]))
        numbers = f" {reading.total:,}/{reading.input_budget:,} {reading.percent}% "
        source = f" {reading.source}"
        room = self.size.width - len("context") - len(numbers) - len(source) - 2
        # The short tags take room from the bar, most important first, only while it stays readable.
        shown: list[str] = []
        for tag in line_tags(reading):
            if room - len(tag) < MIN_LINE_BAR:
                break
            shown.append(tag)
            room -= len(tag)
        bar = Content.assemble("▕", self.bar(room), "▏") if room >= 8 else Content("")
        return Content.assemble(
            ("context", "bold"),
            numbers,
            bar,
            (source, STYLES[reading.source]),
            ("".join(shown), STYLES["notice"]),
        )


MIN_LINE_BAR = 16
"""The one-line meter's bar keeps at least this many cells before a tag may take room from it."""


def line_tags(reading: MeterReading) -> list[str]:
    """The sidebar's extra lines in a few words each, for the one-line meter: ` · handoff stored`,
    ` · snipped −3.4k`, ` · native: other route`."""
    tags: list[str] = []
    if reading.handoff_status == "recorded":
        tags.append(" · handoff stored")
    elif reading.handoff_status == "suppressed":
        tags.append(" · handoff suppressed")
    if reading.snipped:
        tags.append(f" · snipped −{short_tokens(reading.snipped_saved)}")
    if reading.native_elsewhere:
        tags.append(" · native: other route")
    return tags
