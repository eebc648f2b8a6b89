"""Provides MessageList: the scrolling conversation, built from stored events or live turns.

A resumed session mounts at most its last MAX_BLOCKS messages, so a session with thousands of
messages opens as fast as a short one; a one-line note says how many are not shown.

Stored handoff reminders (SPEC K-1) are never shown as user messages: they and the records of tool
results cleared from the model's view (K-3, K-4) become dim context notes inside the turn they
happened in, as they appeared live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from foya_tui.ui.widgets.message_block import ContextNote, MessageBlock, handoff_note, snip_note

if TYPE_CHECKING:
    from foya_tui.runtime.model import Event
    from foya_tui.ui.widgets.tool_block import ToolItem, ToolOutcome

MAX_BLOCKS = 200
_FINISH_MARKERS = {
    "cancelled": "cancelled",
    "error": "✗ interrupted by a provider error",
    "length": "⚠ cut at the output limit",
}


@dataclass(frozen=True)
class HistoryItem:
    """One message of stored history as the conversation shows it.

    An assistant item holds a whole turn's steps: its text segments and tool calls, in order, in
    `parts`; `text` is the text segments joined."""

    role: str
    text: str
    notes: tuple[str, ...] = ()
    marker: str | None = None
    """A dim line after the message, e.g. when the reply was cancelled."""
    parts: tuple[str | ToolItem | ContextNote, ...] = ()
    seq: int | None = None
    """The seq of the message's first event (for a rewind to just before it)."""
    last_seq: int | None = None
    """The seq of its last event: a turn's last reply or tool result (for a rewind to just after it)."""


@dataclass
class _Turn:
    """An assistant item being built from one step after another."""

    seq: int
    last_seq: int
    parts: list[str | ToolItem | ContextNote] = field(default_factory=list)
    marker: str | None = None

    def item(self) -> HistoryItem:
        texts = [part for part in self.parts if isinstance(part, str)]
        return HistoryItem(
            "assistant",
            "\n\n".join(texts),
            marker=self.marker,
            parts=tuple(self.parts),
            seq=self.seq,
            last_seq=self.last_seq,
        )


def _outcome(event: Event, content: str) -> ToolOutcome:
    from foya_tui.ui.widgets.tool_block import outcome_of

    payload = event.payload
    metadata = payload.get("metadata")
    return outcome_of(
        event.seq,
        content,
        bool(payload.get("is_error", False)),
        metadata if isinstance(metadata, Mapping) else None,
    )


def context_note(event: Event) -> ContextNote | None:
    """The note a handoff, snip or compaction-diagnostic event shows as (SPEC K-1, K-3, K-4, C-15),
    or None for other events and for a snip record the runtime would not read either."""
    from foya_tui.runtime.model import EventKind
    from foya_tui.runtime.view.snip import parse_snip
    from foya_tui.ui.widgets.outcome_notes import compaction_note

    if event.kind is EventKind.COMPACTION_DIAGNOSTIC:
        from foya_tui.runtime.compaction.attempt import CompactionResult

        return compaction_note(CompactionResult.from_diagnostic(event.payload))

    if event.kind is EventKind.HANDOFF:
        return handoff_note()
    if event.kind is EventKind.CONTEXT_SNIPPED:
        plan = parse_snip(event.payload)
        if plan is not None:
            return snip_note(str(plan.mode), len(plan.seqs), plan.tokens_saved)
    return None


def history_items(events: Iterable[Event]) -> list[HistoryItem]:
    """The displayable messages of a session: valid history only, system messages left out.

    Tool results are paired with the calls of the assistant message they follow, by id within that
    group (`PendingCalls`, the rule by which `MessageLog` pairs them for the model); a turn's steps
    share one assistant item, so a resumed session looks as it did live. A call never answered shows
    as interrupted, and a result that answers no call of its group (an imported transcript's) still
    shows, on its own. Handoff and snip events are context notes in the turn they happened in
    (before its first step, or between two steps); notes that no reply followed (a turn that failed
    first) are an assistant item of their own, as the live turn left them. Call this in a worker:
    each result is summarised (`outcome_of`).
    """
    # Imported here: history and tool blocks are not needed before the first frame (bench_startup.py).
    from foya_tui.runtime.model import EventKind, Role
    from foya_tui.runtime.view.history import PendingCalls, event_message, valid_events
    from foya_tui.ui.widgets.tool_block import ToolItem

    items: list[HistoryItem] = []
    turn: _Turn | None = None
    pending: PendingCalls[int] = PendingCalls()
    """Index in `turn.parts` of each call of the latest assistant message still unanswered."""
    notes: list[tuple[int, ContextNote]] = []
    """Notes (with their seqs) waiting for the step they came before."""

    def between_steps() -> bool:
        """Whether the open turn waits for its next step: its last step called tools."""
        steps = [part for part in turn.parts if not isinstance(part, ContextNote)] if turn else []
        return turn is not None and bool(steps) and isinstance(steps[-1], ToolItem) and not turn.marker

    def close_turn() -> None:
        nonlocal turn
        if turn is not None:
            items.append(turn.item())
            turn = None
        if notes:
            parts = tuple(note for _, note in notes)
            items.append(HistoryItem("assistant", "", parts=parts, seq=notes[0][0], last_seq=notes[-1][0]))
            notes.clear()

    for event in valid_events(events):
        note = context_note(event)
        if note is not None:
            # Between two steps of a turn (its last part a tool call) the note joins it; otherwise
            # it waits for the turn's first step.
            if turn is not None and between_steps():
                turn.parts.append(note)
            else:
                notes.append((event.seq, note))
            continue
        message = event_message(event)
        if message is None or message.role is Role.SYSTEM:
            continue
        content = message.content or ""
        if message.role is Role.TOOL:
            index = pending.answer(message.tool_call_id or "")
            if turn is not None and index is not None:
                part = turn.parts[index]
                assert isinstance(part, ToolItem)
                turn.parts[index] = replace(part, outcome=_outcome(event, content))
                turn.last_seq = event.seq
            else:
                close_turn()
                orphan = ToolItem(
                    message.tool_call_id or "", message.name or "tool", "", _outcome(event, content)
                )
                items.append(HistoryItem("tool", "", parts=(orphan,), seq=event.seq, last_seq=event.seq))
            continue
        pending.close()
        if message.role is not Role.ASSISTANT:
            close_turn()
            items.append(HistoryItem(str(message.role), content, seq=event.seq, last_seq=event.seq))
            continue
        # A step continues the turn when the previous one called tools (a note may have followed
        # them); otherwise it is a new message, which takes the notes that came before it.
        if turn is None or not between_steps():
            waiting: list[str | ToolItem | ContextNote] = [note for _, note in notes]
            notes.clear()
            close_turn()
            turn = _Turn(event.seq, event.seq, parts=waiting)
        turn.last_seq = event.seq
        if content:
            turn.parts.append(content)
        calls = []
        for call in message.tool_calls:
            calls.append((call.id, len(turn.parts)))
            turn.parts.append(ToolItem(call.id, call.name, call.arguments))
        pending.open(calls)
        if event.kind is EventKind.ASSISTANT_MESSAGE:
            turn.marker = _FINISH_MARKERS.get(str(event.payload.get("finish_reason", "")))
    close_turn()
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
            widgets.append(
                MessageBlock(
                    item.role,
                    item.text,
                    notes=item.notes,
                    parts=item.parts,
                    seq=item.seq,
                    last_seq=item.last_seq,
                )
            )
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
