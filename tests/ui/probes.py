"""Provides probes for UI tests: the notifications on screen and the messages the Bridge posts."""

from __future__ import annotations

from textual.message import Message

from foya_tui.ui.app import FoyaApp


def notifications(app: FoyaApp) -> list[tuple[str, str]]:
    # Textual has no public accessor for the notifications on screen; the app keeps them here.
    return [(note.message, note.severity) for note in app._notifications]


def record(app: FoyaApp) -> list[Message]:
    """Every message the Bridge posts from now on, in order (its workers post from their threads)."""
    bridge = app.conversation.bridge
    posted: list[Message] = []
    original = bridge.post_message

    def post(message: Message) -> bool:
        posted.append(message)
        return original(message)

    bridge.post_message = post  # type: ignore[method-assign]
    return posted
