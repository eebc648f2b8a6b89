"""Provides what is said when a compaction or a turn ends without its usual result: for a
compaction the one-line notification and the dim note it leaves in the conversation (when it ran,
why, the tokens before → after and who made the checkpoint, or why it failed); for a failed or
cancelled turn the line under it ("✗ …", "cancelled"). Built from how it ended, live or read back
from its stored event (compaction diagnostic, turn outcome), so a resumed session shows the same
line as the live one did (message_list reads the events; the turn and compaction flows the live
results)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from foya_tui.ui.widgets.message_block import ContextNote

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from foya_tui.runtime.compaction.attempt import CompactionResult

TRIGGERS = {
    "budget": "the context passed the compaction line",
    "provider": "the provider said the input was too long",
    "manual": "you asked",
}
"""Why a compaction ran, as the note says it."""
SHOWN_OUTCOMES = ("accepted", "failed", "rejected", "blocked")
"""Outcomes worth a line in the conversation; a suppressed repeat, a cancel or "nothing to compact"
changes nothing the user would look for later."""


def compaction_note(result: CompactionResult) -> ContextNote | None:
    """The conversation's line for a finished compaction, or None for an outcome not shown."""
    from foya_tui.ui.widgets.budget_meter import PRODUCERS, one_line

    outcome = str(result.outcome)
    if outcome not in SHOWN_OUTCOMES:
        return None
    why = TRIGGERS.get(str(result.trigger), str(result.trigger))
    if outcome == "accepted":
        before, after = result.tokens_before, result.tokens_after or 0
        producer = one_line(result.producer)
        made_by = f" · made by {PRODUCERS.get(producer, producer)}" if producer else ""
        return ContextNote(f"context · compacted ({why}): {before:,} → {after:,} tokens{made_by}")
    reason = one_line(result.reason)
    return ContextNote(f"context · compaction {outcome} ({why}): {reason} · the context was kept")


def compaction_notice(result: CompactionResult, *, declined: bool = False) -> tuple[str, SeverityLevel]:
    """One line for a notification about how a compaction ended, and its severity."""
    from foya_tui.ui.widgets.budget_meter import one_line
    from foya_tui.ui.widgets.checkpoint_tree import counted

    outcome = str(result.outcome)
    reason = one_line(result.reason)
    if outcome == "accepted":
        after = result.tokens_after or 0
        shape = f"{counted(result.segments or 0, 'segment', 'segments')}, level {result.level or 0}"
        return f"Context compacted: {result.tokens_before:,} → {after:,} tokens ({shape}).", "information"
    if declined:
        return "Compaction declined; nothing was committed.", "information"
    if outcome == "cancelled":
        return "Compaction cancelled; nothing was written.", "information"
    if outcome == "nothing_to_compact":
        return f"Nothing to compact: {reason}.", "information"
    severity: SeverityLevel = "error" if outcome == "failed" else "warning"
    return f"Compaction {outcome.replace('_', ' ')}: {reason}", severity


def turn_outcome_line(kind: str, reason: str) -> str:
    """The line under a turn that ended without its reply: `cancelled`, or `✗ ` and why it failed
    (`kind` is a failure kind, `cancelled` or `step_limit`; the reason is one line from the runtime)."""
    from foya_tui.ui.widgets.budget_meter import one_line

    if kind == "cancelled":
        return "cancelled"
    return f"✗ {one_line(reason, limit=500)}"
