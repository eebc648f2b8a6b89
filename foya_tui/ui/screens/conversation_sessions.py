"""Provides the conversation screen's part that reaches other sessions: the sessions browser
(ctrl+o, `/sessions`), opening a stored session in place of this one, going back to the session
this one was forked from, and writing the open session's Markdown transcript (`/export md`).

Every read and write runs in a Bridge worker; the browser only shows what the Bridge listed.
Opening another session is refused while something runs here, as a new conversation is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foya_tui.ui.messages import (
    SessionDeleted,
    SessionRenamed,
    SessionsListed,
    SessionSwitched,
    TranscriptExported,
)
from foya_tui.ui.screens.conversation_host import ConversationHost
from foya_tui.ui.screens.conversation_state import Activity
from foya_tui.ui.widgets.prompt import Prompt

if TYPE_CHECKING:
    from foya_tui.ui.screens.sessions import Opened, SessionsScreen


class SessionsFlow(ConversationHost):
    """ConversationScreen's part that browses, opens and exports sessions (a mixin: `self` is the
    screen; its handlers are named `on_*`, which Textual finds in every class of the MRO)."""

    _browser: SessionsScreen | None = None

    def action_browse_sessions(self) -> None:
        """Open the sessions browser (the Bridge lists the sessions first)."""
        if self._browser is not None and self._browser.is_current:
            return
        if self._refused(self._state.refuse_new_conversation()):  # not before the runtime is open
            return
        self.bridge.list_sessions()

    def on_sessions_listed(self, message: SessionsListed) -> None:
        from foya_tui.ui.screens.sessions import SessionsScreen

        if self._browser is not None and self._browser.is_attached:
            self._browser.show(message.overviews, message.open_id)
            return
        self._browser = SessionsScreen(
            message.overviews,
            message.open_id,
            rename=self.bridge.rename_session,
            delete=self.bridge.delete_session,
        )
        self.app.push_screen(self._browser, self._session_chosen)

    def _session_chosen(self, chosen: Opened | None) -> None:
        self._browser = None
        if chosen is None:
            return
        # Asked again: a message may have been sent while the browser was open.
        if self._refused(self._state.refuse_new_conversation()):
            return
        self._set_activity(Activity.OPENING)
        self.bridge.open_stored(chosen.session_id)

    def action_open_origin(self) -> None:
        """Open the session this one was forked from (the palette's "session: back to the origin")."""
        if self._history_refused("open the origin of this fork"):
            return
        self._set_activity(Activity.OPENING)
        self.bridge.open_origin()

    def on_session_switched(self, message: SessionSwitched) -> None:
        # The other session replaces this one on screen: what belonged to this one goes.
        if self._inspector is not None and self._inspector.is_current:
            self._inspector.dismiss(None)
        self._route = message.session.route
        self._shortened = frozenset()
        self.compaction_status = None
        self.query_one(Prompt).focus()
        info = message.session.info
        title = f" ({info.title})" if info.title else ""
        self.notify(f"Opened session {info.short_id}{title}.", timeout=4, markup=False)
        if message.busy:
            self.notify(message.busy, severity="warning", markup=False)

    def on_session_renamed(self, message: SessionRenamed) -> None:
        if self._browser is not None and self._browser.is_attached:
            self._browser.say(f"renamed {message.info.short_id}: {message.info.title}")

    def on_session_deleted(self, message: SessionDeleted) -> None:
        text = f"Deleted session {message.info.short_id} ({message.events:,} events)."
        if self._browser is not None and self._browser.is_attached:
            self._browser.say(text)
        self.notify(text, timeout=4, markup=False)

    def action_export_markdown(self) -> None:
        """Write the open session's transcript as Markdown to a new file in the working directory."""
        if self.bridge.session is None:
            self.notify("Nothing to export yet: send a message first.", timeout=3)
            return
        self.bridge.export_markdown()

    async def on_transcript_exported(self, message: TranscriptExported) -> None:
        self.notify(f"Transcript written to {message.path}", timeout=6, markup=False)
        await self.messages.add_marker(f"transcript written to {message.path}")
        self.messages.scroll_end(animate=False)
