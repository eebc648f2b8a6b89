"""Provides the inspector: a session's checkpoints and segments, compaction diagnostics, failure
fingerprints, the circuit breaker, accepted boundaries per route and rewound ranges, read from the
store.

Left, the checkpoint lineage as a tree (CheckpointTree) above the compaction log (each diagnostic
with its producer and outcome, "blocked" when a compaction hook vetoed it; the failure fingerprints
and the circuit breaker's state with its reasons, SPEC K-11); right, the selected segment's text,
or the selected checkpoint's facts and ledger, with its validation status and route. Everything
comes from one `InspectReport` that the Bridge reads in a worker (`runtime.inspect`): the screen
only renders it, and asks the conversation screen (through the callbacks it is given) to refresh,
undo a checkpoint or compact. Model text is shown as plain Text or Content, never parsed as markup.

The right side can also list events of canonical history (HistoryList) in place of the segment:
`/` searches the whole valid history (`runtime.search`; each hit says which segment of the current
checkpoint summarises it, or that the model sees it verbatim), and `s` lists the message events the
selected segment summarises. Enter opens one in full (HistoryEventScreen), whose `g` comes back here
with that segment selected. Esc closes the list; a second Esc closes the inspector. The reads run in
Bridge workers too, started through the callbacks; their results arrive through `show_hits`,
`show_sources`, `open_event` and `show_failure`.
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
from textual.widgets import Footer, Input, OptionList, Static, Tree

from foya_tui.ui.widgets.budget_meter import one_line
from foya_tui.ui.widgets.checkpoint_tree import (
    CheckpointTree,
    TreeEntry,
    clean,
    ledger_counts_text,
    ledger_kinds_text,
    producer_detail,
    segment_title,
    short_id,
)
from foya_tui.ui.widgets.history_list import HistoryList, covered_mark

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.failures import BreakerState
    from foya_tui.runtime.compaction.report import CoveredBy, DiagnosticRecord, InspectReport, RecallHit
    from foya_tui.runtime.view.checkpoint import Checkpoint
    from foya_tui.runtime.view.recovery import CheckpointRecord
    from foya_tui.ui.screens.tool_output import PreparedText

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
    # A compaction hook vetoed it (SPEC K-7): not a failure of the summariser, and nothing was faked.
    "blocked": ("⊘", "$text-warning"),
}
FAILED_MARK = ("✗", "$text-warning")
SEARCH_HINT = 'all words must match · "a phrase" · any language · enter searches'
SELECT_SEGMENT = "Select a segment in the tree first: its source events are the messages it summarises."


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
    """Two lines: `12:00 budget pre_turn fallback ✓ accepted` (the producer when the attempt got
    that far), then `1,702→1,549 · reason`."""
    payload: Mapping[str, Any] = diagnostic.payload
    outcome = str(payload.get("outcome") or "unknown")
    mark, style = OUTCOME_MARKS.get(outcome, FAILED_MARK)
    trigger, phase = payload.get("trigger") or "?", payload.get("phase") or "-"
    producer = payload.get("producer")
    made_by = f"{producer} " if isinstance(producer, str) and producer else ""
    head = f"{local_time(diagnostic.created_at)} {trigger} {phase} {made_by}"
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
    if report.breaker is not None:
        parts += [Content(""), *breaker_lines(report.breaker)]
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


def breaker_lines(breaker: BreakerState) -> list[Content]:
    """`BREAKER open · 3/3 failed summaries` and what that means, then each failure's reason (newest
    first): the circuit breaker of SPEC K-11, as the runtime derived it from the diagnostics. While
    it is closed the count is enough (the failures are in the diagnostics just above)."""
    failures = f"{breaker.failures}/{breaker.threshold} failed summaries"
    if not breaker.open:
        return [Content.assemble(("BREAKER ", "bold"), ("closed ", "$text-success"), f"· {failures}")]
    return [
        Content.assemble(("BREAKER ", "bold"), ("open ", "bold $text-warning"), f"· {failures} in a row"),
        Content.styled("automatic compactions use the fallback, no model", "$text-warning"),
        # The indent is a run of its own: SVG renderers drop a styled run's leading spaces.
        *(Content.assemble("  ", (f"✗ {one_line(reason, 200)}", MUTED)) for reason in breaker.reasons),
    ]


def checkpoint_facts(
    record: CheckpointRecord, checkpoint: Checkpoint, status: str, native_state_bytes: int | None = None
) -> str:
    """The selected checkpoint's fields, then its ledger as the model sees it (`native_state_bytes`:
    a native checkpoint's state size, measured when the report was read)."""
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
    ]
    if detail := producer_detail(record, native_state_bytes):
        lines.append(detail)
    lines += [
        "",
        "LEDGER (exact records kept beside the summary)",
        ledger_kinds_text(checkpoint.ledger.kinds, checkpoint.ledger.budget_chars),
        "",
        checkpoint.ledger.render() or "(empty)",
    ]
    return clean("\n".join(lines))


def sentence(reason: str) -> str:
    """A one-line reason as a sentence for a notification: capitalised, with a full stop."""
    reason = reason.strip()
    if not reason:
        return "Reading the session's history failed."
    reason = reason[0].upper() + reason[1:]
    return reason if reason[-1] in ".!?" else f"{reason}."


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
        # Two bindings on esc: the first closes a list (search or source events) when one is shown,
        # and is passed over (hidden from the footer) otherwise.
        Binding(
            "escape",
            "close_list",
            "back",
            id="inspector.back",
            tooltip="Close the list and show the selected segment again",
        ),
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
            "s",
            "source_events",
            "source events",
            id="inspector.sources",
            tooltip="List the messages of history the selected segment summarises; Enter opens one in full",
        ),
        Binding(
            "slash",
            "search",
            "find",
            id="inspector.search",
            tooltip='Search the whole valid history: words (all must match) and "quoted phrases"; each hit '
            "says which segment summarises it",
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
        refresh: Callable[[], object],
        undo: Callable[[], None],
        compact: Callable[[], None],
        search: Callable[[str], object],
        read_sources: Callable[[CoveredBy], object],
        read_event: Callable[[RecallHit], object],
    ) -> None:
        """`refresh` asks for a new report (it arrives through `show`); `undo` and `compact` start
        those actions on the conversation screen, which confirms and runs them. `search`,
        `read_sources` and `read_event` start reads of history whose results arrive through
        `show_hits`, `show_sources` and `open_event`."""
        super().__init__()
        self.session_label = session_label
        self._refresh = refresh
        self._undo = undo
        self._compact = compact
        self._search = search
        self._read_sources = read_sources
        self._read_event = read_event
        self.report: InspectReport | None = None
        """Each checkpoint's `foya inspect --json` entry, by id."""
        self.max_fingerprints = 0
        self._known: Mapping[str, str] = {}
        self._models: dict[str, str] = {}
        self._mounted = False
        """A report may arrive before the screen is mounted; it is then rendered on mount."""
        self._search_on_mount = False
        self.listing: str | None = None
        """What the right side lists instead of the selected segment: "search", "sources" or None."""
        self._query: str | None = None
        """The query whose hits are awaited or shown (older searches' results are ignored)."""
        self._sources_of: CoveredBy | None = None
        """The segment whose source events are awaited or shown."""

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
                yield Input(placeholder='search history: words, "a phrase"', id="search-input")
                yield Static(Content.styled(SEARCH_HINT, MUTED), id="search-hint")
                yield HistoryList(id="history-list")
                with VerticalScroll(id="detail-scroll"):
                    yield Static(id="detail-text")
                yield Static(id="detail-ledger")
                yield Static(id="detail-status")
        yield Footer()

    def on_mount(self) -> None:
        self._mounted = True
        self._show_list(None)
        self.query_one(CheckpointTree).focus()
        if self.report is not None:
            self._render_report()
        else:
            self._show_header(READING)
        if self._search_on_mount:
            self.action_search()

    # Shadows DOMNode.tree (Textual's Rich tree of the DOM, for debugging); callers use this name.
    @property
    def tree(self) -> CheckpointTree:  # type: ignore[override]
        return self.query_one(CheckpointTree)

    @property
    def history_list(self) -> HistoryList:
        return self.query_one(HistoryList)

    def _show_header(self, note: str | None) -> None:
        parts: list[str | tuple[str, str]] = [
            ("Inspector ", "bold $primary"),
            f"· session {self.session_label} ",
        ]
        if note:
            parts += ["· ", (note, MUTED)]
        self.query_one("#inspector-header", Static).update(Content.assemble(*parts))

    def show(
        self,
        report: InspectReport,
        max_fingerprints: int,
        models: Mapping[str, str] | None = None,
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
        text = self.query_one("#detail-text", Static)
        ledger = self.query_one("#detail-ledger", Static)
        status = self.query_one("#detail-status", Static)
        record = entry.record if entry is not None else None
        checkpoint = entry.checkpoint if entry is not None else None
        if entry is None or entry.kind == "none" or record is None:
            title = "NO CHECKPOINT" if entry is not None else ""
            text.update(Text(NO_CHECKPOINT if entry is not None else ""))
            ledger.update("")
            status.update("")
        elif entry.segment is not None:
            title = segment_title(entry.segment).upper()
            text.update(Text(clean(entry.segment.text)))
        elif checkpoint is not None:
            title = f"CHECKPOINT {short_id(record.id)} · {entry.status}"
            native_bytes = self.report.native_state_size(record) if self.report is not None else None
            text.update(Text(checkpoint_facts(record, checkpoint, entry.status, native_bytes)))
        else:
            title = f"CHECKPOINT {clean(record.id)} · unreadable"
            problem = record.problem or "neither its row nor its event holds a valid checkpoint"
            text.update(Text(clean(problem)))
        if record is not None:
            ledger.update(Content(ledger_counts_text(checkpoint.ledger.counts)) if checkpoint else "")
            status.update(status_content(record, self._models))
        # While a list is shown the title is the list's; the hidden detail still follows the tree.
        if self.listing is None:
            self.query_one("#detail-title", Static).update(Content.styled(title, "bold"))
        self.query_one("#detail-scroll", VerticalScroll).scroll_home(animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Both are on esc: a shown list is closed first, the inspector only when none is shown.
        if action == "close_list":
            return self.listing is not None
        if action == "close":
            return self.listing is None
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_close_list(self) -> None:
        self._show_list(None)
        self.tree.focus()

    # -- lists of canonical history: search hits and a segment's source events ---------------------

    def _show_list(self, listing: str | None) -> None:
        """Show the search box and list ("search"), the list alone ("sources"), or the selected
        tree line's detail (None)."""
        self.listing = listing
        searching = listing == "search"
        self.query_one("#search-input", Input).display = searching
        self.query_one("#search-hint", Static).display = searching
        self.history_list.display = listing is not None
        for selector in ("#detail-scroll", "#detail-ledger", "#detail-status"):
            self.query_one(selector).display = listing is None
        if listing is None:
            self._query = self._sources_of = None
            self.history_list.forget()
            self._show_entry(self.tree.cursor_node.data if self.tree.cursor_node is not None else None)
        self.refresh_bindings()

    def _list_title(self, *parts: str | tuple[str, str]) -> None:
        self.query_one("#detail-title", Static).update(Content.assemble(*parts))

    def start_search(self) -> None:
        """Open the search box (the palette's "inspector: search history"); before the screen is
        mounted, it opens on mount."""
        if self._mounted:
            self.action_search()
        else:
            self._search_on_mount = True

    def action_search(self) -> None:
        box = self.query_one("#search-input", Input)
        if self.listing != "search":
            self._show_list("search")
            self._list_title(("SEARCH HISTORY", "bold"))
        box.focus()
        box.select_all()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._query = event.value
        self.history_list.forget()
        self._search_title(event.value, "searching…")
        self._search(event.value)

    def _search_title(self, query: str, note: str) -> None:
        """`SEARCH · "flaky io test" · 4 hits, newest first`."""
        self._list_title(("SEARCH ", "bold"), f"· {one_line(query)} ", (f"· {note}", MUTED))

    def show_hits(self, query: str, hits: list[RecallHit], limit: int) -> None:
        """List the hits of a search (ignored unless it is the one the search box last asked for)."""
        if self.listing != "search" or query != self._query:
            return
        if not hits:
            found = "no event of valid history matches"
        elif len(hits) >= limit:
            found = f"the newest {len(hits)} hits (there may be more: add words to narrow it)"
        else:
            found = f"{len(hits)} hit{'s' if len(hits) != 1 else ''}, newest first"
        self._search_title(query, found)
        marks = [covered_mark(hit.covered_by, self._status_of(hit.covered_by)) for hit in hits]
        self.history_list.show(hits, marks)
        if hits:
            self.history_list.focus()

    def action_source_events(self) -> None:
        from foya_tui.runtime.compaction.report import CoveredBy

        node = self.tree.cursor_node
        entry = node.data if node is not None else None
        if entry is None or entry.segment is None or entry.record is None:
            self.notify(SELECT_SEGMENT, timeout=4)
            return
        segment = entry.segment
        self._show_list("sources")
        self._sources_of = CoveredBy(entry.record.id, segment.index, segment.from_seq, segment.through_seq)
        self._sources_title("reading…")
        self._read_sources(self._sources_of)

    def _sources_title(self, note: str) -> None:
        covered = self._sources_of
        assert covered is not None
        seqs = f"SEQ {covered.from_seq}–{covered.through_seq}"
        self._list_title(
            (f"SOURCE EVENTS · SEGMENT {covered.segment} · {seqs} ", "bold"),
            (f"· {note} · checkpoint {short_id(covered.checkpoint_id)}", MUTED),
        )

    def show_sources(self, segment: CoveredBy, events: list[RecallHit], total: int) -> None:
        """List the source events of a segment (ignored unless it is the one last asked for)."""
        if self.listing != "sources" or segment != self._sources_of:
            return
        if not events:
            self._sources_title("no message of valid history (a rewind may have removed them)")
        else:
            shown = f", the first {len(events):,} listed" if total > len(events) else ""
            self._sources_title(f"{total:,} message{'s' if total != 1 else ''}{shown}")
        self.history_list.show(events, [None] * len(events))
        if events:
            self.history_list.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        hit = self.history_list.hit_at(event.option_index)
        if hit is not None:
            self._read_event(hit)

    def open_event(self, hit: RecallHit, facts: str, prepared: PreparedText) -> None:
        """Show an event's full text, read from canonical history, with what summarises it."""
        # Imported on first use, like the tool result viewer it extends.
        from foya_tui.ui.screens.history_event import HistoryEventScreen

        covered = hit.covered_by
        mark = covered_mark(covered, self._status_of(covered))
        if covered is None:
            where = "no checkpoint segment summarises it"
        else:
            where = f"the segment covers seq {covered.from_seq}–{covered.through_seq}"
        # The space is a run of its own: SVG renderers drop a styled run's leading spaces.
        mark = Content.assemble(mark, " ", (f"· {where}", MUTED))
        screen = HistoryEventScreen(hit, facts, prepared, mark=mark, go_to_segment=self.go_to_segment)
        self.app.push_screen(screen)

    def go_to_segment(self, covered: CoveredBy) -> None:
        """Close the list and select `covered`'s segment in the tree (its text shows on the right)."""
        self._show_list(None)
        self.tree.focus()
        if not self.tree.select_segment(covered.checkpoint_id, covered.segment):
            self.notify(
                f"Segment {covered.segment} of checkpoint {short_id(covered.checkpoint_id)} is not in the "
                "tree: press f5 to read the session again.",
                severity="warning",
                markup=False,
            )

    def show_failure(self, reason: str, read: str) -> None:
        """A read of history failed (`read`: "search", "sources" or "event"): one sentence; a bad
        query's SearchError says what to fix."""
        self.notify(sentence(reason), severity="error", markup=False)
        if read == "search" and self.listing == "search" and self._query is not None:
            self._search_title(self._query, "not run")
            self._query = None
            self.query_one("#search-input", Input).focus()
        elif read == "sources" and self.listing == "sources" and self._sources_of is not None:
            self._sources_title("could not be read")

    def _status_of(self, covered: CoveredBy | None) -> str | None:
        """The status of the checkpoint `covered` names, as the report has it (None if unknown)."""
        report = self.report
        if covered is None or report is None:
            return None
        record = next((r for r in report.records if r.id == covered.checkpoint_id), None)
        return report.status(record) if record is not None else None

    def action_undo(self) -> None:
        self._undo()

    def action_compact(self) -> None:
        self._compact()

    def action_refresh(self) -> None:
        self._show_header(READING)
        self._refresh()
