"""Provides HistoryList: events of canonical history listed for the inspector (search hits, or the
source events of a segment), two lines each: `seq 42 · user · summarised by checkpoint 393fd1bf…
seg 1`, then one line of the event's text.

Both lists hold `RecallHit`s (`runtime.search` makes them for hits; the Bridge makes them for a
segment's source events, with that segment as `covered_by`). Their text is model, user or tool
text: it is cleaned of escapes and shown as Content built from plain strings, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from foya_tui.ui.widgets.budget_meter import one_line
from foya_tui.ui.widgets.checkpoint_tree import clean, short_id

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.report import CoveredBy, RecallHit

VERBATIM = "verbatim in context"


def covered_mark(covered: CoveredBy | None, status: str | None = None) -> Content:
    """What the model sees of an event: `summarised by checkpoint 393fd1bf… seg 1` (with the
    checkpoint's status when it is not the current one), or `verbatim in context`."""
    if covered is None:
        return Content.styled(VERBATIM, "$text-success")
    mark = f"summarised by checkpoint {short_id(covered.checkpoint_id)} seg {covered.segment}"
    if status and status != "current":
        mark += f" ({status})"
    return Content.styled(mark, "$text-primary")


def hit_row(hit: RecallHit, mark: Content | None) -> Content:
    """The two lines of one event: seq, role (or kind) and `mark`, then its one-line text."""
    # Spaces end a part rather than start the next: SVG renderers drop a text run's leading spaces.
    head = Content.assemble((f"seq {hit.seq} ", "bold"), f"· {clean(hit.role or hit.kind)} ")
    if mark is not None:
        head = Content.assemble(head, "· ", mark)
    text = one_line(hit.snippet) or "(no text)"
    return Content.assemble(head, "\n  ", (text, "$foreground"))


class HistoryList(OptionList):
    """Events of canonical history; selecting one (Enter or a click) posts `OptionSelected`, and
    `hit_at` names the event."""

    DEFAULT_CSS = """
    HistoryList {
        border: none;
        padding: 0 1 0 0;
        background: $surface;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        scrollbar-size-vertical: 1;
        &:focus { border: none; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        # markup=False: a str prompt would otherwise be parsed; the rows are Content anyway.
        super().__init__(id=id, markup=False)
        self.hits: list[RecallHit] = []

    def show(self, hits: Sequence[RecallHit], marks: Sequence[Content | None]) -> None:
        """List `hits` (each with its mark, None for none), the first one highlighted."""
        self.hits = list(hits)
        self.set_options(Option(hit_row(hit, mark)) for hit, mark in zip(hits, marks, strict=True))
        self.highlighted = 0 if self.hits else None

    def forget(self) -> None:
        """Empty the list (a new search or another segment's events are on the way)."""
        self.hits = []
        self.clear_options()

    def hit_at(self, index: int) -> RecallHit | None:
        return self.hits[index] if 0 <= index < len(self.hits) else None
