"""Provides HistoryEventScreen: the full text of one message of canonical history, opened from the
inspector (a search hit or a segment's source event).

It is the tool result viewer (`ToolOutputScreen`: plain text drawn on demand, `/` finds), plus a
line saying what the model sees of the event (the checkpoint segment that summarises it, or
verbatim) and `g`, which closes the viewer and selects that segment in the inspector's tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.content import Content

from foya_tui.ui.screens.tool_output import PreparedText, ToolOutputScreen
from foya_tui.ui.widgets.checkpoint_tree import clean

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.report import CoveredBy, RecallHit

HELP = "/ find · enter or n next match{} · esc close · the text is read from canonical history"


class HistoryEventScreen(ToolOutputScreen):
    """One event's full text, with what summarises it; `g` goes to that segment."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "g",
            "go_to_segment",
            "go to segment",
            id="event.segment",
            tooltip="Close the text and select, in the checkpoint tree, the segment that summarises it",
        ),
    ]

    def __init__(
        self,
        hit: RecallHit,
        facts: str,
        prepared: PreparedText,
        *,
        mark: Content,
        go_to_segment: Callable[[CoveredBy], None],
    ) -> None:
        """`mark` says what summarises the event (see `covered_mark`); `go_to_segment` is called with
        `hit.covered_by` after this screen is dismissed by `g`."""
        title = f"{clean(hit.role or hit.kind)} · seq {hit.seq} · canonical history"
        jump = " · g go to the segment" if hit.covered_by is not None else ""
        super().__init__(title, facts, prepared, note=mark, help_text=HELP.format(jump))
        self.hit = hit
        self._go_to_segment = go_to_segment

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # An event the model sees verbatim has no segment to go to: the key is hidden.
        if action == "go_to_segment":
            return self.hit.covered_by is not None
        return True

    def action_go_to_segment(self) -> None:
        covered = self.hit.covered_by
        if covered is None:
            return
        self.dismiss(None)
        self._go_to_segment(covered)
