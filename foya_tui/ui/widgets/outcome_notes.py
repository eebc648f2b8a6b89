"""Provides the dim note a compaction leaves in the conversation: when it ran, why (trigger), the
tokens before → after and who made the checkpoint, or why it failed. Built from the compaction's
report, which has the fields of its stored diagnostic event, so a resumed session shows the same
line as the live one did (message_list.context_note reads the event; the turn and compaction flows
the live report)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foya_tui.ui.widgets.message_block import ContextNote

TRIGGERS = {
    "budget": "the context passed the compaction line",
    "provider": "the provider said the input was too long",
    "manual": "you asked",
}
"""Why a compaction ran, as the note says it."""
SHOWN_OUTCOMES = ("accepted", "failed", "rejected", "blocked")
"""Outcomes worth a line in the conversation; a suppressed repeat, a cancel or "nothing to compact"
changes nothing the user would look for later."""


def compaction_note(report: Mapping[str, Any]) -> ContextNote | None:
    """The conversation's line for a finished compaction, or None for an outcome not shown."""
    from foya_tui.ui.widgets.budget_meter import PRODUCERS, one_line, tokens

    outcome = one_line(report.get("outcome"))
    if outcome not in SHOWN_OUTCOMES:
        return None
    trigger = one_line(report.get("trigger"))
    why = TRIGGERS.get(trigger, trigger or "compaction")
    if outcome == "accepted":
        before, after = tokens(report.get("tokens_before")), tokens(report.get("tokens_after"))
        producer = one_line(report.get("producer"))
        made_by = f" · made by {PRODUCERS.get(producer, producer)}" if producer else ""
        return ContextNote(f"context · compacted ({why}): {before:,} → {after:,} tokens{made_by}")
    reason = one_line(report.get("reason"))
    return ContextNote(f"context · compaction {outcome} ({why}): {reason} · the context was kept")
