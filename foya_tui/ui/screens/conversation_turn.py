"""Provides the conversation screen's turn flow: send, stream, tool calls and their approval, cancel.

A submission is sent when the screen's state allows it; the running turn's updates from the Bridge
are drawn into its blocks as they arrive: the reply streaming, tool calls starting and finishing,
dim notes on what Foya did to the model's view (a handoff reminder, old results cleared), and a
compaction inside the turn on the meter (the turn's esc cancels it too). A call that needs
approval opens the approval dialog while the turn's thread waits for the answer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from foya_tui.runtime.text import clean_user_text
from foya_tui.ui.actions import SendText, read_submission
from foya_tui.ui.messages import (
    ApprovalRequested,
    RuntimeUpdated,
    ToolResultRecorded,
    TurnRecorded,
    TurnRefused,
)
from foya_tui.ui.screens.conversation_host import ConversationHost
from foya_tui.ui.screens.conversation_state import Activity
from foya_tui.ui.widgets.budget_meter import compaction_ended, compaction_running
from foya_tui.ui.widgets.message_block import MessageBlock, handoff_note, snip_note
from foya_tui.ui.widgets.outcome_notes import compaction_note, compaction_notice, turn_outcome_line
from foya_tui.ui.widgets.prompt import Prompt

if TYPE_CHECKING:
    from textual.timer import Timer

    from foya_tui.ui.screens.approval import ApprovalScreen
    from foya_tui.ui.widgets.tool_block import ToolBlock


class TurnFlow(ConversationHost):
    """ConversationScreen's part that runs a turn on screen (a mixin: `self` is the screen).

    Its handlers are named `on_*`: Textual dispatches those from every class of the screen's MRO,
    while `@on` registers only in MessagePump classes, which a mixin is not at run time.
    """

    _reply: MessageBlock | None
    """The running turn's assistant block, once something of the reply arrived."""
    _running_tools: dict[str, ToolBlock]
    """This turn's tool calls without a result yet, by call id."""
    _approval: ApprovalScreen | None
    _sent: MessageBlock | None
    """The user block of the running turn (it learns its seq when the turn ends)."""
    _ended: tuple[MessageBlock | None, MessageBlock | None]
    """The user and reply blocks of the turn that ended last, until TurnRecorded names their seqs."""
    _waiting: Timer | None
    """Ticks each second while the sent message waits for the reply's first output."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reply = None
        self._running_tools = {}
        self._approval = None
        self._sent = None
        self._ended = (None, None)
        self._waiting = None

    async def on_prompt_submitted(self, message: Prompt.Submitted) -> None:
        submission = read_submission(message.text)
        if not isinstance(submission, SendText):
            await self._run_submission(submission, message.prompt)  # a slash command (CommandFlow)
            return
        text = clean_user_text(submission.text)
        if not text:
            return
        if self._refused(self._state.refuse_send()):
            return
        self._set_activity(Activity.REPLYING)
        self._wait_for_reply()
        message.prompt.clear()
        self._sent = await self.messages.add_block(MessageBlock("user", text))
        self.messages.scroll_end(animate=False)  # sending re-attaches the view to the end
        self.bridge.send(submission.text)

    async def on_turn_refused(self, message: TurnRefused) -> None:
        """Nothing was sent: the message leaves the conversation and goes back into the prompt."""
        sent, self._sent = self._sent, None
        if sent is not None and sent.is_mounted:
            await sent.remove()
        self._reply_arrived()  # no reply is coming: the "connecting…" clock stops
        self._set_activity(None)
        prompt = self.query_one(Prompt)
        typed = prompt.text.strip()
        # What was typed meanwhile is kept below the returned message rather than lost.
        prompt.load_text(message.text + (f"\n\n{typed}" if typed else ""))
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
        self.notify(message.reason, severity="warning", markup=False)

    def action_cancel_turn(self) -> None:
        self.bridge.cancel_turn()

    async def on_runtime_updated(self, message: RuntimeUpdated) -> None:
        # Imported on the first update, not at start-up (tests/bench/bench_startup.py).
        from foya_tui.runtime.updates import (
            CompactionFinished,
            CompactionProgressed,
            ContextSnipped,
            ContextUpdated,
            HandoffRecorded,
            ReplyDelta,
            RetryScheduled,
            StepStarted,
            ToolCallStarted,
            TurnFailed,
            TurnFinished,
            TurnStarted,
        )

        update = message.update
        if isinstance(update, ReplyDelta | ToolCallStarted | TurnFinished | TurnFailed):
            self._reply_arrived()
        if isinstance(update, StepStarted):
            self._state = self._state.at_step(update.number, update.max_steps)
            self.query_one(Prompt).set_busy(self._state.busy_line)
        elif isinstance(update, ContextUpdated):
            self.context_report = update.report
            self._follow_shortened(update.report)
        elif isinstance(update, CompactionProgressed):
            # Triggered inside the turn (budget or provider overflow): its stage replaces "last";
            # "done" is followed at once by CompactionFinished, which says how it ended.
            if update.stage != "done":
                self.compaction_status = compaction_running(update.trigger, update.stage, update.detail)
                detail = f" {update.detail}" if update.detail else ""
                # The turn's esc stops it: the compaction shares the turn's cancel token.
                self.query_one(Prompt).set_busy(f"compacting: {update.stage}{detail} · esc cancels the reply")
        elif isinstance(update, CompactionFinished):
            self.compaction_status = compaction_ended(update.result)
            self.query_one(Prompt).set_busy(self._state.busy_line)
            notice, severity = compaction_notice(update.result)
            if severity != "information":  # a success shows on the meter; a failure is said once
                self.notify(notice, severity=severity, markup=False)
            # In the turn too, where a resumed session shows it (message_list.context_note).
            outcome = compaction_note(update.result)
            if outcome is not None:
                if self._reply is None:
                    self._reply = await self.messages.add_block(MessageBlock("assistant"))
                await self._reply.add_note(outcome)
            self._refresh_inspector()
        elif isinstance(update, ContextSnipped | HandoffRecorded):
            # Where it happened in the turn: before its first step, or between two steps.
            if isinstance(update, HandoffRecorded):
                note = handoff_note()
            else:
                note = snip_note(update.mode, update.results, update.tokens_saved)
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            await self._reply.add_note(note)
        elif isinstance(update, ToolCallStarted):
            from foya_tui.ui.widgets.tool_block import ToolBlock

            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            block = ToolBlock(update.call_id, update.name, update.arguments)
            self._running_tools[update.call_id] = block
            await self._reply.add_tool(block)
        elif isinstance(update, TurnStarted):
            if self._sent is not None:
                # Stored now: scrolling up from it reads the page before it (message_list.py).
                self._sent.seq = self._sent.last_seq = update.user_seq
            self._reply = await self.messages.add_block(MessageBlock("assistant"))
            self._reply.start_stream()
        elif isinstance(update, ReplyDelta):
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            await self._reply.write(update.text)
        elif isinstance(update, RetryScheduled):
            self.notify(
                f"{update.reason}; retrying in {update.delay_seconds:.1f} s (attempt {update.attempt})",
                severity="information",
                markup=False,  # provider text: brackets in it are not markup
            )
        elif isinstance(update, TurnFinished):
            if update.notice:
                self.notify(update.notice, severity="warning", markup=False)
            await self._end_turn(f"⚠ {update.notice}" if update.notice else None)
        elif isinstance(update, TurnFailed):
            # The line a resumed session shows too, read from the stored turn outcome.
            line = turn_outcome_line(update.kind, update.reason)
            if update.kind == "cancelled":
                self.notify("Reply cancelled.", timeout=3)
            else:
                self.notify(update.reason, severity="error", markup=False)
            await self._end_turn(line)

    async def on_tool_result_recorded(self, message: ToolResultRecorded) -> None:
        from foya_tui.ui.widgets.tool_block import ToolBlock

        update = message.update
        block = self._running_tools.pop(update.call_id, None)
        if block is None:
            # A call the runtime closed without starting it (the turn was cancelled first): it is
            # still shown, so that every call of the turn visibly has its result.
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            block = await self._reply.add_tool(ToolBlock(update.call_id, update.name, ""))
        block.finish(message.outcome)
        block.shortened = message.outcome.seq in self._shortened

    def on_approval_requested(self, message: ApprovalRequested) -> None:
        # Imported on first use: the dialog and the tool modules are not needed for the first frame.
        from foya_tui.runtime.tools.approval import Decision
        from foya_tui.ui.screens.approval import ApprovalScreen

        if message.answer.given:  # the turn was cancelled before the question arrived
            return
        answer = message.answer

        def answered(decision: Decision | None) -> None:
            self._approval = None
            if decision is None:
                # Escape: stop the turn, then deny, so the runtime closes every open call as cancelled.
                self.bridge.cancel_turn()
                answer.give(Decision.DENY)
            else:
                answer.give(decision)

        self._approval = ApprovalScreen(message.request, self.bridge.approval_mode or "ask")
        self.app.push_screen(self._approval, answered)

    def _wait_for_reply(self) -> None:
        """Until the reply's first output, the prompt says how long it has waited (after a second):
        the first request of a process may wait for the provider library to load."""
        started = time.monotonic()

        def tick() -> None:
            waited = int(time.monotonic() - started)
            why = "" if self.provider_ready else " (loading the provider library)"
            self.query_one(Prompt).set_busy(f"connecting…{why} {waited} s · esc cancels")

        self._reply_arrived()
        self._waiting = self.set_interval(1.0, tick)

    def _reply_arrived(self) -> None:
        """The reply's first output (or its end) came: the prompt shows the turn's state again."""
        if self._waiting is not None:
            self._waiting.stop()
            self._waiting = None
            self.query_one(Prompt).set_busy(self._state.busy_line)

    async def _end_turn(self, marker: str | None) -> None:
        self._reply_arrived()
        reply, self._reply = self._reply, None
        self._ended, self._sent = (self._sent, reply), None
        if self._approval is not None and self._approval.is_current:
            self._approval.dismiss(None)  # the turn ended while asking (its answer no longer matters)
        self._approval = None
        for block in self._running_tools.values():
            block.stop()
        self._running_tools.clear()
        if reply is not None:
            await reply.finish()
            if not reply.text.strip() and not reply.tools and not reply.notes:
                await reply.remove()  # a failure before any output leaves no empty block behind
        if marker:
            await self.messages.add_marker(marker)
        self._set_activity(None)

    def on_turn_recorded(self, message: TurnRecorded) -> None:
        user, reply = self._ended
        self._ended = (None, None)
        if user is not None:
            user.seq = user.last_seq = message.user_seq
        if reply is not None and message.first_seq is not None:
            reply.seq, reply.last_seq = message.first_seq, message.last_seq
