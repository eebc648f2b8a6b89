"""Provides the conversation screen's manual compaction flow: propose, then accept or decline; undo.

ctrl+k (or the palette, with the model or the deterministic fallback without one) starts a
proposal in a Bridge worker: its stages show on the meter's "last" line and esc cancels it. The
candidate then opens in a dialog; accepting commits it (re-checked by the runtime), declining
records that nothing was committed. Undo makes the previous checkpoint (or none) current again,
after a confirmation. Each ends with a notification, and refreshes an open inspector.
"""

from __future__ import annotations

from foya_tui.ui.messages import CompactionEnded, CompactionProposed, CompactionStaged, CompactionUndone
from foya_tui.ui.screens.conversation_host import ConversationHost
from foya_tui.ui.screens.conversation_state import Activity
from foya_tui.ui.widgets.budget_meter import compaction_ended, compaction_running
from foya_tui.ui.widgets.outcome_notes import compaction_note, compaction_notice
from foya_tui.ui.widgets.prompt import Prompt


class CompactionFlow(ConversationHost):
    """ConversationScreen's part that runs a manual compaction (a mixin: `self` is the screen;
    its handlers are named `on_*`, which Textual finds in every class of the screen's MRO)."""

    def action_compact(self) -> None:
        """Compact the idle session now: the candidate is shown before anything is committed."""
        self._start_compaction(use_model=True)

    def action_compact_without_model(self) -> None:
        """Compact the idle session now with the deterministic fallback (no model is asked, SPEC
        K-10): the candidate is shown before anything is committed, as for `action_compact`."""
        self._start_compaction(use_model=False)

    def _start_compaction(self, *, use_model: bool) -> None:
        if self._history_refused("compact"):
            return
        self._set_activity(Activity.COMPACTING)
        self.compaction_status = compaction_running("manual", "planning")
        self.bridge.compact(use_model=use_model)

    def action_cancel_compaction(self) -> None:
        self.bridge.cancel_compaction()

    def on_compaction_staged(self, message: CompactionStaged) -> None:
        self.compaction_status = compaction_running("manual", message.stage, message.detail)
        detail = f" {message.detail}" if message.detail else ""
        cancel = " · esc cancel" if self._state.proposing else ""
        self.query_one(Prompt).set_busy(f"compacting: {message.stage}{detail}{cancel}")

    def on_compaction_proposed(self, message: CompactionProposed) -> None:
        # Imported on first use: the dialog is not needed for the first frame.
        from foya_tui.ui.screens.compaction import CompactionScreen

        self._set_activity(Activity.DECIDING)
        proposal = message.proposal

        def answered(accept: bool | None) -> None:
            if accept:
                self.bridge.commit_compaction(proposal)
            else:
                self.compaction_status = compaction_running("manual", "declining")
                self.bridge.decline_compaction(proposal)

        self.app.push_screen(CompactionScreen(proposal.checkpoint, message.model_failure), answered)

    async def on_compaction_ended(self, message: CompactionEnded) -> None:
        self.compaction_status = compaction_ended(message.result, declined=message.declined)
        notice, severity = compaction_notice(message.result, declined=message.declined)
        self.notify(notice, severity=severity, markup=False)
        # A line in the conversation as well, as a resumed session shows it: between two turns,
        # notes share one dim block, as message_list.history_items groups the stored diagnostics.
        outcome = compaction_note(message.result)
        if outcome is not None:
            from foya_tui.ui.widgets.message_block import MessageBlock

            blocks = self.messages.blocks
            last = blocks[-1] if blocks else None
            if last is not None and last.role == "assistant" and not last.text.strip() and not last.tools:
                await last.add_note(outcome)
            else:
                await self.messages.add_block(MessageBlock("assistant", parts=(outcome,)))
        self._set_activity(None)
        self._refresh_inspector()

    def action_undo_compaction(self) -> None:
        """Ask, then make the previous checkpoint (or none) current again by a new event."""
        from foya_tui.ui.screens.confirm import ConfirmScreen
        from foya_tui.ui.widgets.checkpoint_tree import short_id

        if self._history_refused("undo a checkpoint"):
            return
        report = self._inspector.report if self._inspector is not None else None
        current = report.current_id if report is not None else None
        if report is not None and current is None:
            self.notify("No checkpoint is current: there is nothing to undo.", timeout=3)
            return
        record = next((r for r in report.records if r.id == current), None) if report else None
        previous = record.checkpoint.previous_id if record and record.checkpoint else None
        what = f"checkpoint {short_id(current)}" if current else "the current checkpoint"
        then = (
            f"The earlier checkpoint {short_id(previous)} becomes current again."
            if previous
            else "The previous checkpoint (or none, so that the model sees the full history) becomes current."
        )
        body = f"{then} Nothing is deleted: a new event records the undo, and it can be compacted again."

        def answered(yes: bool | None) -> None:
            if yes and not self._history_refused("undo a checkpoint"):
                self._set_activity(Activity.UNDOING)
                self.bridge.undo_compaction()

        self.app.push_screen(ConfirmScreen(f"Undo {what}?", body, "Undo"), answered)

    def on_compaction_undone(self, message: CompactionUndone) -> None:
        from foya_tui.ui.widgets.checkpoint_tree import short_id

        restored = (
            f"{short_id(message.restored_id)} is current again"
            if message.restored_id
            else "no checkpoint is current: the model sees the full history"
        )
        self.notify(f"Checkpoint {short_id(message.undone_id)} undone; {restored}.", markup=False)
        self._set_activity(None)
        self._refresh_inspector()
