"""Provides probes for UI tests: the notifications on screen, the messages the Bridge posts, and
how far the meter's stage bar is."""

from __future__ import annotations

from textual.message import Message

from foya_tui.ui.app import FoyaApp


def notifications(app: FoyaApp) -> list[tuple[str, str]]:
    """(message, severity) of every notification shown so far, expired toasts included (kept by
    the `notifications_kept` fixture in tests/ui/conftest.py)."""
    return list(app.__dict__.get("notified", []))


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


def stage_bar_share(text: str) -> float | None:
    """How much of the meter's stage bar (`━━╸───`) is done, from its visible text; None without one."""
    for line in text.splitlines():
        cells = line.strip()
        if (cells and set(cells) <= {"━", "╸", "─"} and "─" in cells) or (cells and set(cells) <= {"━"}):
            done = cells.count("━") + 0.5 * cells.count("╸")
            return done / len(cells)
    return None
