"""Provides paged reads of valid history: a stretch of whole message groups before or after a seq.

The conversation view shows a long session a page at a time, so opening it (or scrolling) reads
only what the screen needs rather than the whole log. A page is a run of valid events (SPEC H-4:
rewound and unreadable events left out) that starts at a user message, so that no turn is split
between two pages: a user message closes every tool group and every turn before it (the rule by
which `MessageLog` pairs tool results), so the items built from a page are the same as the ones
built from the whole history would be. A page read backwards reaches back to the user message
that starts its oldest turn; a page read forwards stops just before the next user message.

Only a stretch with no user message at all in MAX_GROUP_EVENTS events (an import of tool output, a
very long autonomous turn) is cut without one; its turn then shows in two parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from foya_tui.runtime.model import Event, Role
from foya_tui.runtime.view.history import message_role, rewound

if TYPE_CHECKING:
    from foya_tui.runtime.store.events import EventStore

PAGE_EVENTS = 400
"""Events a page reads at least (then up to the next group boundary): a screenful of turns and more."""
EXTEND_EVENTS = 200
"""Events read at a time while looking for the user message that ends a page."""
MAX_GROUP_EVENTS = 5_000
"""Events a page reads at most while looking for that boundary."""


@dataclass(frozen=True)
class HistoryPage:
    """A stretch of a session's valid history, in seq order, starting at a group boundary."""

    events: tuple[Event, ...]
    more: bool
    """Whether stored history goes on beyond this page in the direction it was read (older
    events before it for `page_before`, newer after it for `page_after`)."""


def _is_user(event: Event) -> bool:
    return message_role(event) is Role.USER


def _valid(events: Sequence[Event], rewinds: Sequence[Event]) -> list[Event]:
    # Every rewind of the session is passed: `rewound` looks only at the ones after each event.
    return [event for event in events if event.problem is None and not rewound(event.seq, rewinds)]


def page_before(
    store: EventStore, session_id: str, before_seq: int | None, *, events: int = PAGE_EVENTS
) -> HistoryPage:
    """The newest page of valid history before `before_seq` (None: the end of the log): at least
    `events` stored events (fewer at the start), back to the user message that starts its oldest
    group. A stretch that is all rewound is skipped, so an empty page means nothing is older."""
    rewinds = store.rewinds_after(session_id, 0)
    cursor = before_seq
    page: list[Event] = []
    read = 0
    while True:
        limit = events if not page else EXTEND_EVENTS
        raw = store.events_before(session_id, cursor, limit)
        if not raw:
            return HistoryPage(tuple(page), more=False)
        cursor = raw[0].seq
        read += len(raw)
        older = _valid(raw, rewinds)
        if not page:
            # The first events found: whole at the newer end (`before_seq` starts a group).
            page = older
            starts = [0] if page and _is_user(page[0]) else []
        else:
            starts = [index for index, event in enumerate(older) if _is_user(event)]
            page = (older[starts[-1] :] if starts else older) + page
        if (starts and page) or len(raw) < limit or read >= MAX_GROUP_EVENTS:
            break
    first = page[0].seq if page else cursor
    return HistoryPage(tuple(page), more=bool(store.events_before(session_id, first, 1)))


def page_after(
    store: EventStore, session_id: str, after_seq: int, *, events: int = PAGE_EVENTS
) -> HistoryPage:
    """The oldest page of valid history after `after_seq` (which ends a group): at least `events`
    stored events (fewer at the end), up to just before the next user message."""
    rewinds = store.rewinds_after(session_id, after_seq)
    cursor = after_seq
    page: list[Event] = []
    read = 0
    while True:
        limit = events if not page else EXTEND_EVENTS
        raw = store.events_after(session_id, cursor, limit)
        if not raw:
            return HistoryPage(tuple(page), more=False)
        cursor = raw[-1].seq
        newer = _valid(raw, rewinds)
        if not page:
            page = newer  # the first events found: `after_seq` ends a group
        else:
            starts = [index for index, event in enumerate(newer) if _is_user(event)]
            if starts:
                page += newer[: starts[0]]
                return HistoryPage(tuple(page), more=True)
            page += newer
        read += len(raw)
        if len(raw) < limit or read >= MAX_GROUP_EVENTS:
            break
    last = page[-1].seq if page else cursor
    return HistoryPage(tuple(page), more=bool(store.events_after(session_id, last, 1)))
