"""Tests the Runtime's reads of canonical history and its fork, which the UI and CLI use instead
of the store: a fork by prefix says where it was cut, a segment's sources leave out rewound,
unreadable and non-message events, and a message's text is refused for anything not a message."""

from __future__ import annotations

import pytest

from foya_tui.runtime.compaction.report import CoveredBy
from foya_tui.runtime.fork import ForkError
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import UnknownSessionError
from foya_tui.runtime.store.search import message_body
from foya_tui.runtime.view.history import valid_events
from tests.runtime import test_fork
from tests.runtime.test_fork import Source, messages_of

# The fork tests' session with a rewound reply, an unreadable row, tool calls and non-message
# events, and their runtime: the reads below are checked against the same history.
runtime = test_fork.runtime
source = test_fork.source


def test_fork_by_prefix_names_its_source_and_where_it_was_cut(runtime: Runtime, source: Source) -> None:
    whole = runtime.fork(source.id[:8])
    assert whole.source_id == source.id
    assert whole.at_seq == max(e.seq for e in valid_events(runtime.events(source.id)))
    assert whole.info == runtime.find_session(whole.info.id)
    assert messages_of(runtime, whole.info.id) == messages_of(runtime, source.id)

    part = runtime.fork(source.id, source.first_turn_end)
    assert part.at_seq == source.first_turn_end
    assert messages_of(runtime, part.info.id) == messages_of(runtime, source.id, source.first_turn_end)
    with pytest.raises(ForkError):
        runtime.fork(source.id, source.call_seq)
    with pytest.raises(UnknownSessionError):
        runtime.find_session("f" * 32)


def test_events_event_and_last_seq_read_the_whole_log(runtime: Runtime, source: Source) -> None:
    events = runtime.events(source.id)
    last = runtime.last_seq(source.id)
    assert [e.seq for e in events] == list(range(1, last + 1))  # rewound and unreadable ones too
    assert runtime.events(source.id, after_seq=3, through_seq=5) == events[3:5]
    assert runtime.event(source.id, source.unreadable_seq) == events[source.unreadable_seq - 1]
    assert runtime.event(source.id, last + 1) is None


def test_segment_sources_are_the_valid_messages_of_the_range(runtime: Runtime, source: Source) -> None:
    last = runtime.last_seq(source.id)
    segment = CoveredBy("c" * 32, 1, 1, last)
    expected = [
        e.seq for e in valid_events(runtime.events(source.id)) if message_body(str(e.kind), e.payload)
    ]
    # The range holds a rewound reply and an unreadable row: neither is listed.
    assert source.rewound_seq not in expected and source.unreadable_seq not in expected
    sources = runtime.segment_sources(source.id, segment, limit=1_000)
    assert [hit.seq for hit in sources.events] == expected and sources.total == len(expected)
    assert all(hit.covered_by == segment for hit in sources.events)

    first_two = runtime.segment_sources(source.id, segment, limit=2)
    assert first_two.events == sources.events[:2] and first_two.total == len(expected)


def test_message_text_is_the_full_text_of_a_message_only(runtime: Runtime, source: Source) -> None:
    result = runtime.message_text(source.id, source.result_seq)
    event = runtime.event(source.id, source.result_seq)
    assert event is not None and result.kind is EventKind.TOOL_RESULT
    assert (result.role, result.text) == message_body(str(event.kind), event.payload)
    usage = next(e for e in runtime.events(source.id) if e.kind is EventKind.PROVIDER_USAGE)
    for seq in (usage.seq, source.unreadable_seq, runtime.last_seq(source.id) + 1):
        with pytest.raises(LookupError, match=f"Seq {seq} is not a readable message"):
            runtime.message_text(source.id, seq)
