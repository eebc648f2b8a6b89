"""Provides MessageList: the scrolling conversation, built from stored events or live turns.

A resumed session mounts at most its last MAX_BLOCKS messages, so a session with thousands of
messages opens as fast as a short one; a one-line note says how many are not shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from foya_tui.runtime.history import event_message, valid_events
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.ui.widgets.message_block import MessageBlock

MAX_BLOCKS = 200
_FINISH_MARKERS = {
    "cancelled": "cancelled",
    "error": "✗ interrupted by a provider error",
    "length": "⚠ cut at the output limit",
}


@dataclass(frozen=True)
class HistoryItem:
    """One message of stored history as the conversation shows it."""

    role: str
    text: str
    notes: tuple[str, ...] = ()
    marker: str | None = None
    """A dim line after the message, e.g. when the reply was cancelled."""


def history_items(events: Iterable[Event]) -> list[HistoryItem]:
    """The displayable messages of a session: valid history only, system messages left out."""
    items: list[HistoryItem] = []
    for event in valid_events(events):
        message = event_message(event)
        if message is None or message.role is Role.SYSTEM:
            continue
        content = message.content or ""
        if message.role is Role.TOOL:
            name = message.name or "tool"
            items.append(HistoryItem("tool", f"{name} returned {len(content):,} characters"))
            continue
        notes = tuple(f"▸ {call.name}" for call in message.tool_calls)
        marker = None
        if event.kind is EventKind.ASSISTANT_MESSAGE:
            marker = _FINISH_MARKERS.get(str(event.payload.get("finish_reason", "")))
        items.append(HistoryItem(str(message.role), content, notes, marker))
    return items


def marker_line(text: str) -> Static:
    return Static(Text(text), classes="marker")


class MessageList(VerticalScroll):
    """The conversation's messages, newest at the bottom; follows the end unless scrolled up."""

    def __init__(self) -> None:
        super().__init__(id="messages")
        self._hint = Static("", classes="hint")

    def compose(self) -> Iterable[Widget]:
        yield self._hint

    def watch_virtual_size(self, size: Size) -> None:
        # Anchored, new content keeps the view at the end until the user scrolls up. Anchoring
        # only once the messages overflow keeps a short conversation at the top (Textual aligns an
        # anchored view's content to the bottom). Compared with the widget's own height because
        # container_size is still stale here (zero at first).
        if not self.is_anchored and self.size.height and size.height > self.size.height:
            self.anchor()

    @property
    def blocks(self) -> list[MessageBlock]:
        return list(self.query_children(MessageBlock))

    def set_hint(self, text: str) -> None:
        """The text shown while the conversation is empty."""
        self._hint.update(Text(text))

    async def show_history(self, items: Sequence[HistoryItem]) -> None:
        """Replace the conversation with stored history (the last MAX_BLOCKS messages of it)."""
        await self.clear()
        hidden = max(0, len(items) - MAX_BLOCKS)
        widgets: list[Widget] = []
        if hidden:
            noun = "message" if hidden == 1 else "messages"
            widgets.append(Static(Text(f"{hidden:,} earlier {noun} not shown"), classes="earlier"))
        for item in items[hidden:]:
            widgets.append(MessageBlock(item.role, item.text, notes=item.notes))
            if item.marker:
                widgets.append(marker_line(item.marker))
        self._hint.display = not widgets
        await self.mount_all(widgets)
        self.scroll_end(animate=False)

    async def clear(self) -> None:
        """Remove every message; the empty-conversation hint shows again."""
        await self.remove_children([child for child in self.children if child is not self._hint])
        self._hint.display = True
        self.anchor(False)

    async def add_block(self, block: MessageBlock) -> MessageBlock:
        self._hint.display = False
        await self.mount(block)
        return block

    async def add_marker(self, text: str) -> None:
        await self.mount(marker_line(text))
