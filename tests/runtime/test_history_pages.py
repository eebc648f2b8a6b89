"""Tests paged reads of valid history (view/pages.py), which the conversation view loads a page at
a time: walked backwards from the end or forwards from the start, the pages put together are
exactly valid history (SPEC H-4), each begins at a user message so no turn is split, and the items
the view builds from them page by page are the ones it would build from the whole log."""

from __future__ import annotations

import json

import pytest

from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.view.history import message_role, valid_events
from foya_tui.ui.widgets.message_list import history_items
from tests.runtime import test_fork
from tests.runtime.test_fork import Source

runtime = test_fork.runtime
source = test_fork.source


def long_transcript(turns: int) -> bytes:
    """Turns of a user message, an assistant step calling two tools, both results, and a reply."""
    messages: list[dict[str, object]] = []
    for n in range(turns):
        calls = [
            {"id": f"c{n}-{k}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            for k in range(2)
        ]
        messages += [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{n}-0", "content": f"result {n}a"},
            {"role": "tool", "tool_call_id": f"c{n}-1", "content": f"result {n}b"},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    return json.dumps(messages).encode()


def walk_back(runtime: Runtime, session_id: str, events: int) -> list[tuple[Event, ...]]:
    pages = []
    before: int | None = None
    while True:
        page = runtime.history_before(session_id, before, events=events)
        if page.events:
            pages.append(page.events)
            before = page.events[0].seq
        if not page.more:
            return pages[::-1]
        assert page.events, "an empty page says nothing is older"


def walk_forward(runtime: Runtime, session_id: str, events: int) -> list[tuple[Event, ...]]:
    pages = []
    after = 0
    while True:
        page = runtime.history_after(session_id, after, events=events)
        if page.events:
            pages.append(page.events)
            after = page.events[-1].seq
        if not page.more:
            return pages
        assert page.events


def starts_at_user(page: tuple[Event, ...]) -> bool:
    return message_role(page[0]) is Role.USER


@pytest.mark.parametrize("events", [1, 3, 7, 400])
def test_pages_put_together_are_valid_history_and_never_split_a_turn(runtime: Runtime, events: int) -> None:
    session_id = runtime.import_transcript(long_transcript(30), "long.json").id
    whole = valid_events(runtime.events(session_id))
    for pages in (walk_back(runtime, session_id, events), walk_forward(runtime, session_id, events)):
        assert [e for page in pages for e in page] == whole
        assert all(starts_at_user(page) for page in pages)
        assert [item for page in pages for item in history_items(page)] == history_items(whole)


@pytest.mark.parametrize("events", [1, 2, 5])
def test_pages_leave_out_rewound_and_unreadable_events(runtime: Runtime, source: Source, events: int) -> None:
    whole = valid_events(runtime.events(source.id))
    assert source.rewound_seq not in {e.seq for e in whole}  # the fixture has both kinds
    for pages in (walk_back(runtime, source.id, events), walk_forward(runtime, source.id, events)):
        assert [e for page in pages for e in page] == whole
        assert [item for page in pages for item in history_items(page)] == history_items(whole)


def test_the_newest_page_reads_a_page_not_the_log(runtime: Runtime) -> None:
    session_id = runtime.import_transcript(long_transcript(200), "long.json").id
    page = runtime.history_before(session_id, events=20)
    assert page.more
    # At least 20 events, back to the user message of the oldest turn: at most one turn more.
    assert 20 <= len(page.events) < 20 + 5 and starts_at_user(page.events)
    assert page.events[-1].seq == runtime.last_seq(session_id)
    assert not runtime.history_after(session_id, page.events[-1].seq).more


def test_an_empty_session_has_no_pages(runtime: Runtime) -> None:
    session = runtime.new_session()
    assert runtime.history_before(session.id).events == () and not runtime.history_before(session.id).more
    assert runtime.history_after(session.id, 0).events == ()


def test_events_of_kind_reads_only_that_kind(runtime: Runtime, source: Source) -> None:
    usage = runtime.events_of_kind(source.id, EventKind.PROVIDER_USAGE)
    assert usage and all(e.kind is EventKind.PROVIDER_USAGE for e in usage)
    assert usage == [e for e in runtime.events(source.id) if e.kind is EventKind.PROVIDER_USAGE]
