"""Tests valid history, rewinds (SPEC H-4) and atomic tool groups in the projection (SPEC V, C-4)."""

from __future__ import annotations

from typing import Any

from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.view.history import (
    MISSING_TOOL_RESULT,
    anchor_seq,
    history_messages,
    rewound,
    valid_events,
)


def ev(seq: int, kind: EventKind, **payload: Any) -> Event:
    return Event(session_id="s", seq=seq, kind=kind, payload=payload, created_at="t")


def call(call_id: str, name: str = "read_file") -> dict[str, str]:
    return {"id": call_id, "name": name, "arguments": "{}"}


def test_rewind_invalidates_later_events_only() -> None:
    events = [
        ev(1, EventKind.USER_MESSAGE, text="a"),
        ev(2, EventKind.ASSISTANT_MESSAGE, text="b"),
        ev(3, EventKind.USER_MESSAGE, text="c"),
        ev(4, EventKind.ASSISTANT_MESSAGE, text="d"),
        ev(5, EventKind.REWIND, to_seq=2),
        ev(6, EventKind.USER_MESSAGE, text="e"),
    ]
    assert [e.seq for e in valid_events(events)] == [1, 2, 5, 6]
    assert [m.content for m in history_messages(events)] == ["a", "b", "e"]
    assert anchor_seq(valid_events(events)) == 6


def test_a_later_rewind_cuts_into_history_after_an_earlier_one() -> None:
    events = [
        ev(1, EventKind.USER_MESSAGE, text="a"),
        ev(2, EventKind.USER_MESSAGE, text="b"),
        ev(3, EventKind.REWIND, to_seq=1),
        ev(4, EventKind.USER_MESSAGE, text="c"),
        ev(5, EventKind.REWIND, to_seq=3),
    ]
    assert [m.content for m in history_messages(events)] == ["a"]


def test_reasoning_is_not_resent() -> None:
    events = [ev(1, EventKind.ASSISTANT_MESSAGE, text="answer", reasoning="secret thoughts")]
    (message,) = history_messages(events)
    assert message.content == "answer"
    assert "secret" not in str(message.to_openai())


def test_interrupted_tool_calls_get_an_explicit_placeholder() -> None:
    events = [
        ev(1, EventKind.USER_MESSAGE, text="go"),
        ev(2, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call("c1"), call("c2")]),
        ev(3, EventKind.TOOL_RESULT, tool_call_id="c1", content="one"),
        ev(4, EventKind.USER_MESSAGE, text="next"),
    ]
    roles = [(m.role, m.tool_call_id, m.content) for m in history_messages(events)]
    assert roles == [
        (Role.USER, None, "go"),
        (Role.ASSISTANT, None, None),
        (Role.TOOL, "c1", "one"),
        (Role.TOOL, "c2", MISSING_TOOL_RESULT),
        (Role.USER, None, "next"),
    ]


def test_repeated_tool_call_ids_pair_within_their_own_group() -> None:
    imported = EventKind.IMPORTED_MESSAGE
    events = [
        ev(1, imported, role="user", content="first"),
        ev(2, imported, role="assistant", content=None, tool_calls=[call("call_0")]),
        ev(3, imported, role="tool", content="r1", tool_call_id="call_0"),
        ev(4, imported, role="user", content="second"),
        ev(5, imported, role="assistant", content=None, tool_calls=[call("call_0")]),
        ev(6, imported, role="tool", content="r2", tool_call_id="call_0"),
    ]
    contents = [m.content for m in history_messages(events)]
    assert contents == ["first", None, "r1", "second", None, "r2"]


def test_orphan_tool_results_are_not_sent() -> None:
    events = [
        ev(1, EventKind.USER_MESSAGE, text="hi"),
        ev(2, EventKind.TOOL_RESULT, tool_call_id="nobody", content="stray"),
    ]
    assert [m.content for m in history_messages(events)] == ["hi"]


def test_non_message_events_are_not_model_visible() -> None:
    events = [
        ev(1, EventKind.USER_MESSAGE, text="hi"),
        ev(2, EventKind.PROVIDER_USAGE, route_id="r", usage=None),
        ev(3, EventKind.IMPORTED_MESSAGE, role="narrator", content="?"),
    ]
    assert [m.content for m in history_messages(events)] == ["hi"]


def test_rewound_agrees_with_valid_events_for_every_event() -> None:
    """SPEC H-4: checking one event against the rewinds after it gives valid_events' answer."""
    events = [ev(seq, EventKind.USER_MESSAGE, text=str(seq)) for seq in range(1, 13)]
    events[5] = ev(6, EventKind.REWIND, to_seq=2)
    events[8] = ev(9, EventKind.REWIND, to_seq=7)
    events[10] = ev(11, EventKind.REWIND, to_seq=1)
    valid = {event.seq for event in valid_events(events)}
    for event in events:
        later = [e for e in events if e.seq > event.seq]
        assert rewound(event.seq, later) == (event.seq not in valid), event.seq
