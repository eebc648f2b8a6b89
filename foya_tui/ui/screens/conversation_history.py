"""Provides the conversation screen's history actions: rewind to a message, fork a new session.

A rewind goes to a focused message after a confirmation (to just before a user message, whose
text returns to the prompt, or to just after a reply and its tool results); the conversation is
then reloaded as on resume. A fork ends with the focused message, or takes the whole session,
and the new session then opens in place of this one, which stays as it is. Both run in Bridge
workers and refresh an open inspector.
"""

from __future__ import annotations

from foya_tui.ui.messages import SessionForked, SessionRewound
from foya_tui.ui.screens.conversation_host import ConversationHost
from foya_tui.ui.screens.conversation_state import Activity
from foya_tui.ui.widgets.message_block import MessageBlock
from foya_tui.ui.widgets.prompt import Prompt

SELECT_MESSAGE = "Select a message first: ↑ from an empty prompt (alt+↑ while typing) or a click."


class HistoryFlow(ConversationHost):
    """ConversationScreen's part that rewinds and forks (a mixin: `self` is the screen; its
    handlers are named `on_*`, which Textual finds in every class of the screen's MRO)."""

    def action_rewind_here(self) -> None:
        """Rewind to the focused message (the palette's "session: rewind to here")."""
        block = self._focused_block()
        if block is None:
            self.notify(SELECT_MESSAGE, timeout=4)
            return
        self._ask_rewind(block)

    def on_message_block_rewind_requested(self, message: MessageBlock.RewindRequested) -> None:
        message.stop()
        self._ask_rewind(message.block)

    def _ask_rewind(self, block: MessageBlock) -> None:
        """Confirm, then rewind: to just before a user message (its text back in the prompt), or to
        just after a reply and its tool results."""
        from foya_tui.ui.screens.confirm import ConfirmScreen

        if self._history_refused("rewind"):
            return
        if block.role == "user":
            if block.seq is None:
                self.notify("This message is not in the session's log yet.", timeout=3)
                return
            to_seq, refill = block.seq - 1, block.text
            title = "Rewind to before this message?"
            body = (
                "This message and everything after it leave the conversation and the model's view; "
                "the log keeps them. Its text goes back into the prompt for editing."
            )
        else:
            if block.last_seq is None:
                self.notify("This message is not in the session's log yet.", timeout=3)
                return
            to_seq, refill = block.last_seq, None
            title = "Rewind to after this reply?"
            body = (
                "Everything after this reply (and its tool results) leaves the conversation and the "
                "model's view; the log keeps it. Checkpoints made until now are no longer used."
            )

        def answered(yes: bool | None) -> None:
            if yes and not self._history_refused("rewind"):
                self._set_activity(Activity.REWINDING)
                self.bridge.rewind(to_seq, refill)

        self.app.push_screen(ConfirmScreen(title, body, "Rewind"), answered)

    async def on_session_rewound(self, message: SessionRewound) -> None:
        await self.messages.show_history(message.items, has_older=message.has_older)
        self._mark_shortened()
        prompt = self.query_one(Prompt)
        if message.refill:
            typed = prompt.text.strip()
            # What was already typed is kept below the returned message rather than lost.
            prompt.load_text(message.refill + (f"\n\n{typed}" if typed else ""))
            prompt.move_cursor(prompt.document.end)
        prompt.focus()
        self.notify(
            f"Rewound to seq {message.to_seq}; the log keeps everything after it.", timeout=4, markup=False
        )
        self._set_activity(None)
        self._refresh_inspector()

    def action_fork_here(self) -> None:
        """Fork a new session that ends with the focused message (the palette's "session: fork here")."""
        block = self._focused_block()
        if block is None:
            self.notify(SELECT_MESSAGE, timeout=4)
            return
        self._fork_at(block)

    def action_fork_session(self) -> None:
        """Fork a new session with the whole conversation (the palette's "session: fork")."""
        if self._history_refused("fork"):
            return
        self._set_activity(Activity.FORKING)
        self.bridge.fork(None)

    def on_message_block_fork_requested(self, message: MessageBlock.ForkRequested) -> None:
        message.stop()
        self._fork_at(message.block)

    def _fork_at(self, block: MessageBlock) -> None:
        """Fork through the block's last event: a user message, or a reply with its tool results.
        Nothing to confirm: the session stays as it is, and the fork is a new one."""
        if self._history_refused("fork"):
            return
        if block.last_seq is None:
            self.notify("This message is not in the session's log yet.", timeout=3)
            return
        self._set_activity(Activity.FORKING)
        self.bridge.fork(block.last_seq)

    def on_session_forked(self, message: SessionForked) -> None:
        # The fork replaces this session on screen; an open inspector would show the old one.
        if self._inspector is not None and self._inspector.is_current:
            self._inspector.dismiss(None)
        self._route = message.session.route
        self._shortened = frozenset()
        self.compaction_status = None
        # The focused message belongs to the source and is about to go: typing goes on in the fork.
        self.query_one(Prompt).focus()
        source, fork = message.source_label, message.session.info.short_id
        self.notify(
            f"Forked session {source} through seq {message.at_seq} into session {fork}; "
            f"{source} is unchanged (foya --session {source}).",
            timeout=6,
            markup=False,
        )

    def _focused_block(self) -> MessageBlock | None:
        focused = self.focused
        chain = (focused, *focused.ancestors) if focused is not None else ()
        return next((node for node in chain if isinstance(node, MessageBlock)), None)
