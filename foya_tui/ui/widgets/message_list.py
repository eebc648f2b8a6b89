"""Provides MessageList: the scrolling conversation, built from stored events or live turns.

A resumed session opens on its newest page of stored history; older and newer pages load as the
user scrolls (read by the Bridge, in workers), and only a bounded window of messages is mounted,
so a session with thousands of messages opens and scrolls as fast as a short one, and every
message of it is reachable.

Stored handoff reminders (SPEC K-1) are never shown as user messages: they and the records of tool
results cleared from the model's view (K-3, K-4) become dim context notes inside the turn they
happened in, as they appeared live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from foya_tui.ui.widgets.message_block import ContextNote, MessageBlock, handoff_note, snip_note

if TYPE_CHECKING:
    from foya_tui.runtime.model import Event
    from foya_tui.ui.widgets.tool_block import ToolItem, ToolOutcome

MAX_MOUNTED = 60
"""Messages mounted at most: the window of a long session (widgets cost layout on every scroll)."""
PAGE_EVENTS = 20
"""Stored events a page of the conversation reads (then up to the next user message)."""
OLDER_HINT = "↑ earlier messages load as you scroll up · Home jumps to the first"
LOADING_OLDER = "loading earlier messages…"
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
    from foya_tui.ui.widgets.outcome_notes import turn_outcome_line
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
        if event.kind is EventKind.TURN_OUTCOME:
            # A failed or cancelled turn: its line goes under what the turn left (its reply, or
            # the user's message when nothing came), as the live turn put it there.
            line = turn_outcome_line(str(event.payload.get("kind", "")), str(event.payload.get("reason", "")))
            if turn is not None:
                turn.marker, turn.last_seq = line, event.seq
            else:
                close_turn()
                if items:
                    items[-1] = replace(items[-1], marker=line)
            continue
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


class Direction(Enum):
    """Which way a page of stored history is read from a seq."""

    OLDER = "older"
    NEWER = "newer"


@dataclass(frozen=True)
class PageRequest:
    """A page of stored history the list wants: the one before `seq` (OLDER; None: the newest
    page) or after it (NEWER; 0: the first page)."""

    direction: Direction
    seq: int | None

    @property
    def replaces(self) -> bool:
        """Whether the page replaces what is shown (a jump to the end or to the start)."""
        return self.seq is None or (self.direction is Direction.NEWER and self.seq == 0)


NEWEST_PAGE = PageRequest(Direction.OLDER, None)
FIRST_PAGE = PageRequest(Direction.NEWER, 0)


class MessageList(VerticalScroll):
    """The conversation's messages, newest at the bottom; follows the end unless scrolled up.

    Only a window of the session is mounted, at most MAX_MOUNTED messages: the list asks for the
    next page of stored history (`PageWanted`, read by the Bridge in a worker) when the view
    comes within a screen of the top or the bottom of what is mounted, and unmounts messages at
    the other end once over the bound, so every message is reachable and a long session costs what
    the window costs. Home and End jump to the first and the last message. The messages of the
    running turn are never unmounted (they learn their seqs, which pages start from, at its end).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "home",
            "first_message",
            "first message",
            id="messages.first",
            tooltip="Jump to the session's first message",
            show=False,
        ),
        Binding(
            "end",
            "last_message",
            "last message",
            id="messages.last",
            tooltip="Jump to the newest message",
            show=False,
        ),
    ]

    class PageWanted(Message):
        """The list needs a page of stored history to show (the screen has the Bridge read it)."""

        def __init__(self, request: PageRequest) -> None:
            super().__init__()
            self.request = request

    class PromptWanted(Message):
        """The message cursor went past the newest message: typing goes on in the prompt."""

    def __init__(self) -> None:
        super().__init__(id="messages")
        self._hint = Static("", classes="hint")
        self._older = Static(Text(OLDER_HINT), classes="earlier")
        self._older.display = False
        self.has_older = False
        """Whether stored history goes on above the first mounted message."""
        self.has_newer = False
        """Whether stored history goes on below the last mounted message (the window was cut there)."""
        self.pending: PageRequest | None = None
        """The page asked for and not shown yet (one at a time)."""
        self._settling = False
        """A page was just mounted and the view is not back in place yet."""

    def compose(self) -> Iterable[Widget]:
        yield self._hint
        yield self._older

    def watch_virtual_size(self, size: Size) -> None:
        # Anchored, new content keeps the view at the end until the user scrolls up. Anchoring
        # only once the messages overflow keeps a short conversation at the top (Textual aligns an
        # anchored view's content to the bottom). Compared with the widget's own height because
        # container_size is still stale here (zero at first).
        # A window cut above the end has nothing to follow.
        overflows = bool(self.size.height) and size.height > self.size.height
        if not self.is_anchored and not self.has_newer and overflows:
            self.anchor()

    def watch_has_focus(self, _has_focus: bool) -> None:
        # Textual restyles a widget and everything in it when its focus changes. No rule styles a
        # message by the list's focus, so the list alone is restyled: one node, not every widget
        # of the mounted window (on a long session that was a frame's worth of work per focus).
        self.app.stylesheet.update_nodes([self], animate=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.want_more()

    @property
    def blocks(self) -> list[MessageBlock]:
        return list(self.query_children(MessageBlock))

    def set_hint(self, text: str) -> None:
        """The text shown while the conversation is empty."""
        self._hint.update(Text(text))

    # -- pages of stored history --------------------------------------------------------------

    def want_more(self) -> None:
        """Ask for the next page when the view is within a screen of either end of the window
        (called as it scrolls, and by PageUp/PageDown, which do not scroll a short window)."""
        if self.pending is not None or self._settling or not self.is_mounted:
            return
        margin = max(self.size.height, 1)
        blocks = self.blocks
        if not blocks:
            return
        first, last = blocks[0].seq, blocks[-1].last_seq
        if self.has_older and self.scroll_y <= margin and first is not None:
            self._ask(PageRequest(Direction.OLDER, first))
        elif self.has_newer and self.scroll_y >= self.max_scroll_y - margin and last is not None:
            self._ask(PageRequest(Direction.NEWER, last))

    def _ask(self, request: PageRequest) -> None:
        self.pending = request
        if request.direction is Direction.OLDER and not request.replaces:
            self._older.update(Text(LOADING_OLDER))
        self.post_message(self.PageWanted(request))

    def action_first_message(self) -> None:
        """Home: the session's first message (its first page replaces the window when not mounted)."""
        if self.has_older:
            self._ask(FIRST_PAGE)
        else:
            self.scroll_home(animate=False)

    def action_last_message(self) -> None:
        """End: the newest message (the newest page replaces the window when not mounted)."""
        if self.has_newer:
            self._ask(NEWEST_PAGE)
        else:
            self.scroll_end(animate=False)

    async def show_history(self, items: Sequence[HistoryItem], *, has_older: bool = False) -> None:
        """Replace the conversation with the newest page of stored history; `has_older` says that
        more lies before it (loaded when the user scrolls up)."""
        await self.show_page(NEWEST_PAGE, items, more=has_older)

    async def show_page(self, request: PageRequest, items: Sequence[HistoryItem], *, more: bool) -> None:
        """Show a page read for `request`; `more` says whether history goes on beyond it. A page
        the list no longer waits for (a newer request replaced it) is dropped."""
        if request.replaces:
            if self.pending is not None and self.pending != request:
                return  # another jump was asked for since
            self.pending = None
            await self._replace(request, items, more)
        elif request != self.pending:
            return
        else:
            self.pending = None
            blocks = self.blocks
            edge = (blocks[0].seq if blocks else None) if request.direction is Direction.OLDER else None
            if request.direction is Direction.NEWER and blocks:
                edge = blocks[-1].last_seq
            if edge != request.seq:
                # The window moved since it was asked for (its other end was cut): not adjacent now.
                self.call_after_refresh(self.want_more)
                return
            if request.direction is Direction.OLDER:
                await self._prepend(items, more)
            else:
                await self._append(items, more)
        self._older.update(Text(OLDER_HINT))
        self._older.display = self.has_older
        self._hint.display = not self.blocks
        # The page may leave the view near an end still (a short page): ask again after layout.
        self.call_after_refresh(self.want_more)

    async def _replace(self, request: PageRequest, items: Sequence[HistoryItem], more: bool) -> None:
        # No page is asked for until the new one is laid out: measured before that, any page looks
        # shorter than a screen (scrolling to its end or start asked for a second one at once).
        self._settling = True
        await self._remove_entries(self._entries())
        at_start = request.direction is Direction.NEWER
        self.has_older, self.has_newer = (False, more) if at_start else (more, False)
        self.anchor(False)
        await self.mount_all(_widgets(items))
        if at_start:
            self.scroll_home(animate=False, immediate=True)
        else:
            self.scroll_end(animate=False, immediate=True)

        def laid_out() -> None:
            self._settling = False
            self.want_more()

        self.call_after_refresh(laid_out)

    async def _prepend(self, items: Sequence[HistoryItem], more: bool) -> None:
        self.has_older = more
        widgets = _widgets(items)
        blocks = self.blocks
        if not widgets or not blocks:
            return
        # The message that was at the top stays where it was on screen while the page mounts above
        # it; but a view that follows the end (a newest page shorter than two screens) goes on
        # following it: the page goes above, and the anchor keeps the newest message in view.
        kept = blocks[0]
        offset = kept.virtual_region.y - self.scroll_y
        # Anchored and not released by a scroll (Textual keeps no public name for the second;
        # textual is pinned): the scroll position may still be the one before the last layout.
        following = self.is_anchored and not self._anchor_released
        await self.mount_all(widgets, before=kept)
        if await self._trim(from_top=False):
            self.has_newer = True
            self.anchor(False)
            following = False
        if not following:
            self._keep_in_place(kept, offset)

    async def _append(self, items: Sequence[HistoryItem], more: bool) -> None:
        self.has_newer = more
        widgets = _widgets(items)
        if not widgets:
            return
        kept = self.blocks[-1]
        offset = kept.virtual_region.y - self.scroll_y
        await self.mount_all(widgets)
        if await self._trim(from_top=True):
            self.has_older = True
        self._keep_in_place(kept, offset)

    def _keep_in_place(self, kept: Widget, offset: float) -> None:
        """Scroll, once laid out, so that `kept` is `offset` rows below the top again; no page is
        asked for until then (the view is briefly where the old layout left it)."""
        self._settling = True

        def restore() -> None:
            self._settling = False
            self.scroll_to(y=kept.virtual_region.y - offset, animate=False, immediate=True)
            self.want_more()

        self.call_after_refresh(restore)

    def _entries(self) -> list[Widget]:
        """The mounted messages and their marker lines (not the hints)."""
        return [child for child in self.children if child is not self._hint and child is not self._older]

    async def _trim(self, *, from_top: bool) -> bool:
        """Unmount messages (with their markers) at one end while over MAX_MOUNTED; never the
        focused one or one without stored seqs (the running turn's). Whether any went."""
        blocks = self.blocks
        excess = len(blocks) - MAX_MOUNTED
        if excess <= 0:
            return False
        entries = self._entries()
        if not from_top:
            entries.reverse()
        doomed: list[Widget] = []
        removed = 0
        focused = self.screen.focused if self.is_attached else None
        pending_markers: list[Widget] = []
        for entry in entries:
            if not isinstance(entry, MessageBlock):
                # A marker belongs to the message above it.
                pending_markers.append(entry)
                if from_top:
                    doomed.append(entry)
                continue
            if removed >= excess or entry.seq is None or entry.last_seq is None:
                break
            if focused is not None and (focused is entry or entry in focused.ancestors):
                break
            doomed.append(entry)
            if not from_top:
                doomed += pending_markers
            pending_markers = []
            removed += 1
        if not doomed:
            return False
        await self.remove_children(doomed)
        return True

    async def _remove_entries(self, entries: Sequence[Widget]) -> None:
        if entries:
            await self.remove_children(entries)

    async def clear(self) -> None:
        """Remove every message; the empty-conversation hint shows again."""
        await self._remove_entries(self._entries())
        self.has_older = self.has_newer = False
        self.pending = None
        self._older.display = False
        self._hint.display = True
        self.anchor(False)

    async def add_block(self, block: MessageBlock) -> MessageBlock:
        """Mount a live message at the end; a window cut above the end first gives way to the
        newest messages, which the live one follows (what is older stays a scroll away)."""
        if self.has_newer:
            await self._remove_entries(self._entries())
            self.has_older, self.has_newer = True, False
            self._older.display = True
            self.pending = None
        self._hint.display = False
        await self.mount(block)
        return block

    async def add_marker(self, text: str) -> None:
        await self.mount(marker_line(text))

    # -- the message cursor ---------------------------------------------------------------------

    def move_cursor(self, block: MessageBlock, step: int) -> None:
        """Select the message `step` away from `block` (−1 the one above); past the newest, the
        prompt. At the top of the window the view scrolls up, which loads the page above."""
        blocks = self.blocks
        try:
            index = blocks.index(block)
        except ValueError:
            return
        target = index + step
        if 0 <= target < len(blocks):
            blocks[target].focus()
            blocks[target].scroll_visible(animate=False)
        elif target >= len(blocks) and not self.has_newer:
            self.post_message(self.PromptWanted())
        else:
            self.scroll_to(y=0 if step < 0 else self.max_scroll_y, animate=False)

    def select_last(self) -> None:
        """Select the newest message (from the prompt)."""
        blocks = self.blocks
        if blocks:
            blocks[-1].focus()
            blocks[-1].scroll_visible(animate=False)


def _widgets(items: Sequence[HistoryItem]) -> list[Widget]:
    widgets: list[Widget] = []
    for item in items:
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
    return widgets
