"""Provides the inspector: a session's checkpoints and segments, compaction diagnostics, failure
fingerprints, accepted boundaries per route and rewound ranges, read from the store.

Left, the checkpoint lineage as a tree (CheckpointTree) above the compaction log; right, the
selected segment's text, or the selected checkpoint's facts and ledger, with its validation
status and route. Everything comes from one `InspectReport` that the Bridge reads in a worker
(`runtime.inspect`): the screen only renders it, and asks the conversation screen (through the
callbacks it is given) to refresh, undo a checkpoint or compact. Model text is shown as plain
Text or Content, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static, Tree

from foya_tui.ui.widgets.checkpoint_tree import (
    CheckpointTree,
    TreeEntry,
    clean,
    ledger_counts_text,
    segment_title,
    short_id,
)

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.checkpoint import Checkpoint
    from foya_tui.runtime.compaction.recovery import CheckpointRecord
    from foya_tui.runtime.compaction.report import DiagnosticRecord, InspectReport

READING = "reading the session…"
MUTED = "$foreground 60%"
"""Dim text inside Content: "auto" colours such as $text-muted are not resolved in Content spans."""
NO_CHECKPOINT = (
    "No checkpoint is applied here: the model sees every message of valid history (large tool "
    "results may still be shortened in its view). Undoing the oldest checkpoint returns to this."
)
# Outcome of a compaction diagnostic: (mark, style).
OUTCOME_MARKS = {
    "accepted": ("✓", "$text-success"),
    "nothing_to_compact": ("·", MUTED),
    "cancelled": ("·", MUTED),
}
FAILED_MARK = ("✗", "$text-warning")


def local_time(stamp: str) -> str:
    """`12:00` in the local time zone, from a stored ISO timestamp (as written, when unreadable)."""
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%H:%M")
    except ValueError:
        return clean(stamp)[:16]


def count(value: object) -> str:
    """A stored token count with thousands separators; "?" when the store has none."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "?"


def diagnostic_lines(diagnostic: DiagnosticRecord) -> Content:
    """Two lines: `12:00 manual standalone ✓ accepted`, then `1,702→1,549 · reason`."""
    payload: Mapping[str, Any] = diagnostic.payload
    outcome = str(payload.get("outcome") or "unknown")
    mark, style = OUTCOME_MARKS.get(outcome, FAILED_MARK)
    trigger, phase = payload.get("trigger") or "?", payload.get("phase") or "-"
    head = f"{local_time(diagnostic.created_at)} {trigger} {phase} "
    before, after = payload.get("tokens_before"), payload.get("tokens_after")
    sizes = f"{count(before)}→{count(after)}" if after is not None else f"{count(before)} before"
    reason = " ".join(clean(str(payload.get("reason") or "")).split())
    return Content.assemble(
        clean(head),
        (f"{mark} {outcome.replace('_', ' ')}", style),
        "\n  ",
        (f"{sizes} · {reason}" if reason else sizes, MUTED),
    )


def route_models(report: InspectReport, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """The model of each route id: the routes the switcher knows (`known`), and those the report
    names with their model (diagnostics and checkpoints; boundaries carry only the id)."""
    models: dict[str, str] = dict(known or {})
    for diagnostic in report.diagnostics:
        route, model = diagnostic.payload.get("route_id"), diagnostic.payload.get("model")
        if isinstance(route, str) and isinstance(model, str):
            models[route] = model
    for record in report.records:
        if record.checkpoint is not None:
            models[record.checkpoint.route_id] = record.checkpoint.model
    return models


def route_name(route_id: str, models: Mapping[str, str]) -> str:
    model = models.get(route_id)
    return f"{clean(model)} ({route_id[:8]})" if model else f"route {route_id[:8]}"


def log_content(report: InspectReport, max_fingerprints: int, models: Mapping[str, str]) -> Content:
    """The compaction log under the tree: diagnostics (newest first), fingerprints, accepted
    boundaries per route, rewound ranges and what recovery noticed."""
    muted = MUTED
    parts: list[Content] = [Content.styled("DIAGNOSTICS", "bold")]
    if report.diagnostics:
        parts += [diagnostic_lines(d) for d in reversed(report.diagnostics)]
    else:
        parts.append(Content.styled("no compaction has run", muted))
    remembered = f"FINGERPRINTS {len(report.fingerprints)}/{max_fingerprints}"
    parts += [Content(""), Content.styled(remembered, "bold")]
    if report.fingerprints:
        for fingerprint in report.fingerprints:
            parts.append(
                Content.assemble(
                    (f"{fingerprint.fingerprint[:8]}… ", "$text-warning"),
                    f"{local_time(fingerprint.recorded_at)} ",
                    (" ".join(clean(fingerprint.reason).split()), muted),
                )
            )
    else:
        parts.append(Content.styled("none: no equivalent attempt is suppressed", muted))
    parts += [Content(""), Content.styled("ACCEPTED BOUNDARIES", "bold")]
    if report.boundaries:
        for boundary in report.boundaries:
            parts.append(
                Content.assemble(
                    # The indent ends the plain part: SVG renderers drop a styled run's leading spaces.
                    f"{route_name(boundary.route_id, models)} through seq {boundary.through_seq}\n  ",
                    (
                        f"in {count(boundary.input_tokens)} · out {count(boundary.output_tokens)}"
                        f" · {boundary.payload_bytes:,} bytes",
                        muted,
                    ),
                )
            )
    else:
        parts.append(Content.styled("none yet", muted))
    parts += [Content(""), Content.styled("REWOUND", "bold")]
    if report.rewound:
        for rewound in report.rewound:
            parts.append(
                Content(f"seq {rewound.first_seq}–{rewound.last_seq} (rewind at seq {rewound.rewind_seq})")
            )
    else:
        parts.append(Content.styled("nothing rewound", muted))
    if report.notices:
        parts += [Content(""), Content.styled("NOTICES", "bold")]
        parts += [Content.styled(clean(notice), "$text-warning") for notice in report.notices]
    return Content("\n").join(parts)


def checkpoint_facts(record: CheckpointRecord, checkpoint: Checkpoint, status: str) -> str:
    """The selected checkpoint's fields, then its ledger as the model sees it."""
    previous = short_id(checkpoint.previous_id) if checkpoint.previous_id else "none"
    anchor = checkpoint.head_anchor_seq if checkpoint.head_anchor_seq is not None else "none"
    lines = [
        f"id {checkpoint.id}",
        f"{status} · committed at seq {record.event_seq} · previous {previous}",
        f"covers seq {checkpoint.from_seq}–{checkpoint.through_seq} · anchor seq {anchor}"
        f" · {checkpoint.covered_messages:,} messages",
        f"phase {checkpoint.phase} · projection {checkpoint.projection_kind}"
        f" · producer {checkpoint.producer}",
        f"tokens {checkpoint.tokens_before:,} → {checkpoint.tokens_after:,}"
        f" · created {local_time(checkpoint.created_at)}",
        "",
        "LEDGER (exact records kept beside the summary)",
        checkpoint.ledger.render() or "(empty)",
    ]
    return clean("\n".join(lines))


def status_content(record: CheckpointRecord, models: Mapping[str, str]) -> Content:
    """`✓ valid · source 4be1c0de… · route foya-sim/small (bde85c5f)`, or the problem."""
    checkpoint = record.checkpoint
    # The spaces end the styled part: SVG renderers drop a text run's leading spaces.
    if record.problem:
        validity = (f"✗ {' '.join(clean(record.problem).split())} ", "$text-warning")
    else:
        validity = ("✓ valid ", "$text-success")
    if checkpoint is None:
        return Content.assemble(validity)
    return Content.assemble(
        validity,
        f"· source {short_id(checkpoint.source_digest)} · route {route_name(checkpoint.route_id, models)}",
    )


class InspectorScreen(Screen[None]):
    """Checkpoints, segments and the compaction log of one session; `show` renders a report."""

    CSS_PATH = "inspector.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close", id="inspector.close", tooltip="Back to the conversation"),
        Binding(
            "u",
            "undo",
            "undo checkpoint",
            id="inspector.undo",
            tooltip="Make the previous checkpoint (or none) current again; a new event records it, "
            "nothing is deleted",
        ),
        Binding(
            "ctrl+k",
            "compact",
            "compact now",
            id="inspector.compact",
            tooltip="Compact the session now; you see the candidate before it is committed",
        ),
        Binding("f5", "refresh", "refresh", id="inspector.refresh", tooltip="Read the session again"),
    ]

    def __init__(
        self,
        session_label: str,
        *,
        refresh: Callable[[], None],
        undo: Callable[[], None],
        compact: Callable[[], None],
    ) -> None:
        """`refresh` asks for a new report (it arrives through `show`); `undo` and `compact` start
        those actions on the conversation screen, which confirms and runs them."""
        super().__init__()
        self.session_label = session_label
        self._refresh = refresh
        self._undo = undo
        self._compact = compact
        self.report: InspectReport | None = None
        self.max_fingerprints = 0
        self._known: Mapping[str, str] = {}
        self._models: dict[str, str] = {}
        self._mounted = False
        """A report may arrive before the screen is mounted; it is then rendered on mount."""

    def compose(self) -> ComposeResult:
        yield Static(id="inspector-header")
        with Horizontal(id="inspector-main"):
            with Vertical(id="inspector-left"):
                yield Static(Content.styled("CHECKPOINTS", "bold"), classes="section-title")
                yield CheckpointTree(id="checkpoints")
                with VerticalScroll(id="inspector-log"):
                    yield Static(id="log")
            with Vertical(id="inspector-detail"):
                yield Static(id="detail-title")
                with VerticalScroll(id="detail-scroll"):
                    yield Static(id="detail-text")
                yield Static(id="detail-ledger")
                yield Static(id="detail-status")
        yield Footer()

    def on_mount(self) -> None:
        self._mounted = True
        self.query_one(CheckpointTree).focus()
        if self.report is not None:
            self._render_report()
        else:
            self._show_header(READING)

    @property
    def tree(self) -> CheckpointTree:
        return self.query_one(CheckpointTree)

    def _show_header(self, note: str | None) -> None:
        parts: list[str | tuple[str, str]] = [
            ("Inspector ", "bold $primary"),
            f"· session {self.session_label} ",
        ]
        if note:
            parts += ["· ", (note, MUTED)]
        self.query_one("#inspector-header", Static).update(Content.assemble(*parts))

    def show(
        self, report: InspectReport, max_fingerprints: int, models: Mapping[str, str] | None = None
    ) -> None:
        """Render a freshly read report (the cursor stays on the line it was on); `models` names the
        model of each route id."""
        self.report = report
        self.max_fingerprints = max_fingerprints
        self._known = models or {}
        if self._mounted:
            self._render_report()

    def _render_report(self) -> None:
        report = self.report
        assert report is not None
        self._models = route_models(report, self._known)
        count_ = len(report.records)
        self._show_header(f"{count_} checkpoint{'s' if count_ != 1 else ''} · read from the store")
        self.query_one("#log", Static).update(log_content(report, self.max_fingerprints, self._models))
        self.tree.show(report)
        self._show_entry(self.tree.cursor_node.data if self.tree.cursor_node is not None else None)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[TreeEntry]) -> None:
        event.stop()
        self._show_entry(event.node.data)

    def _show_entry(self, entry: TreeEntry | None) -> None:
        title = self.query_one("#detail-title", Static)
        text = self.query_one("#detail-text", Static)
        ledger = self.query_one("#detail-ledger", Static)
        status = self.query_one("#detail-status", Static)
        record = entry.record if entry is not None else None
        checkpoint = entry.checkpoint if entry is not None else None
        if entry is None or entry.kind == "none" or record is None:
            title.update(Content.styled("NO CHECKPOINT" if entry is not None else "", "bold"))
            text.update(Text(NO_CHECKPOINT if entry is not None else ""))
            ledger.update("")
            status.update("")
        elif entry.segment is not None:
            title.update(Content.styled(segment_title(entry.segment).upper(), "bold"))
            text.update(Text(clean(entry.segment.text)))
        elif checkpoint is not None:
            title.update(Content.styled(f"CHECKPOINT {short_id(record.id)} · {entry.status}", "bold"))
            text.update(Text(checkpoint_facts(record, checkpoint, entry.status)))
        else:
            title.update(Content.styled(f"CHECKPOINT {clean(record.id)} · unreadable", "bold"))
            problem = record.problem or "neither its row nor its event holds a valid checkpoint"
            text.update(Text(clean(problem)))
        if record is not None:
            ledger.update(Content(ledger_counts_text(checkpoint.ledger.counts)) if checkpoint else "")
            status.update(status_content(record, self._models))
        self.query_one("#detail-scroll", VerticalScroll).scroll_home(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_undo(self) -> None:
        self._undo()

    def action_compact(self) -> None:
        self._compact()

    def action_refresh(self) -> None:
        self._show_header(READING)
        self._refresh()
