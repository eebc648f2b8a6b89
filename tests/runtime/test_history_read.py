"""Tests `history_read_tool_result` on a real SQLite event store (SPEC T-2, T-3).

T-2: inspect, read (by character offset) and search (case-insensitive, matching lines).
T-3: a reference is refused unless it names a still-valid tool result of this session with the
same tool call id and, when given, the same SHA-256.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.tools import HISTORY_READ_TOOL, ToolContext, ToolResult, default_registry
from foya_tui.runtime.tools.history_read import READ_MAX_CHARS

CONTENT = "".join(f"line {i}: {'ERROR disk full' if i % 100 == 0 else 'ok'}\n" for i in range(1, 1001))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    database = open_database(tmp_path / "foya.sqlite3")
    yield EventStore(database)
    database.close()


def append_tool_turn(store: EventStore, session_id: str, call_id: str, content: str) -> int:
    """A user message, an assistant call and its result; returns the result's seq."""
    events = store.append(
        session_id,
        [
            NewEvent(EventKind.USER_MESSAGE, {"text": "run it"}),
            NewEvent(
                EventKind.ASSISTANT_MESSAGE,
                {"text": "", "tool_calls": [{"id": call_id, "name": "shell", "arguments": "{}"}]},
            ),
            NewEvent(
                EventKind.TOOL_RESULT,
                {
                    "tool_call_id": call_id,
                    "name": "shell",
                    "content": content,
                    "is_error": False,
                    "metadata": {},
                },
            ),
        ],
    )
    return events[-1].seq


@pytest.fixture
def session(store: EventStore) -> tuple[str, int]:
    session_id = store.create_session(title="t").id
    return session_id, append_tool_turn(store, session_id, "call_1", CONTENT)


def read_tool(store: EventStore, session_id: str, **arguments: Any) -> ToolResult:
    context = ToolContext(workdir=Path("."), session_id=session_id, store=store)
    return default_registry().call(HISTORY_READ_TOOL, json.dumps(arguments), context)


def test_inspect_summarises_the_result(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(store, session_id, op="inspect", seq=seq, tool_call_id="call_1")
    assert not result.is_error
    assert result.metadata["characters"] == len(CONTENT)
    assert result.metadata["lines"] == 1000
    assert result.metadata["sha256"] == sha256_hex(CONTENT)
    assert 0 < result.metadata["tokens"] < len(CONTENT)
    assert f"sha256: {sha256_hex(CONTENT)}" in result.content
    assert "  1: line 1: ok" in result.content and "  1000: line 1000: ERROR disk full" in result.content
    assert "  996: line 996: ok" in result.content


def test_read_pages_by_character_offset(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    first = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1", length=20)
    header, body = first.content.split("\n", 1)
    assert (
        header == f"characters 0–20 of {len(CONTENT):,} (seq {seq}); to continue, call with op=read offset=20"
    )
    assert body == CONTENT[:20]
    last = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1", offset=len(CONTENT) - 5)
    assert last.content.endswith("; this is the end\n" + CONTENT[-5:])
    assert last.metadata["truncated"] is False


def test_read_counts_characters_not_bytes(store: EventStore) -> None:
    session_id = store.create_session().id
    seq = append_tool_turn(store, session_id, "call_u", "héllo wörld ✓ done")
    result = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_u", offset=12, length=1)
    assert result.content.split("\n", 1)[1] == "✓"


def test_read_length_is_capped_and_offset_checked(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    big = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1", length=10**9)
    assert big.metadata["end"] == min(READ_MAX_CHARS, len(CONTENT))
    past = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1", offset=len(CONTENT) + 1)
    assert past.is_error and "past the end" in past.content
    negative = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1", offset=-1)
    assert negative.is_error


def test_search_is_case_insensitive_and_returns_lines(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(store, session_id, op="search", seq=seq, tool_call_id="call_1", query="error DISK")
    lines = result.content.splitlines()
    assert lines[0] == f"10 matching line(s) for 'error DISK' in the result at seq {seq}:"
    offset_of_100 = CONTENT.index("line 100:")
    assert lines[1] == f"100: (char {offset_of_100:,}) line 100: ERROR disk full"
    assert lines[-1].startswith("1000: ")
    assert result.metadata["matches"] == 10


def test_search_is_bounded_by_max_matches(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(
        store, session_id, op="search", seq=seq, tool_call_id="call_1", query="ok", max_matches=3
    )
    lines = result.content.splitlines()
    assert lines[0].startswith("990 matching line(s)")
    assert [line.split(":")[0] for line in lines[1:4]] == ["1", "2", "3"]
    assert lines[4] == "… 987 more matches; refine the query or raise max_matches"


def test_search_cuts_long_lines_and_handles_length_changing_case(store: EventStore) -> None:
    session_id = store.create_session().id
    # "İ" lowers to two characters, so positions in the lowered text shift: the fallback path.
    content = "İstanbul\nplain\n" + "x" * 2000 + "NEEDLE\nİ needle\n"
    seq = append_tool_turn(store, session_id, "call_i", content)
    result = read_tool(store, session_id, op="search", seq=seq, tool_call_id="call_i", query="needle")
    lines = result.content.splitlines()
    assert lines[0].startswith("2 matching line(s)")
    assert lines[1].startswith("3: (char 15) xxxx") and lines[1].endswith("[line cut: 2,006 characters]")
    assert lines[2] == "4: (char 2,022) İ needle"


def test_search_without_matches(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(store, session_id, op="search", seq=seq, tool_call_id="call_1", query="segfault")
    assert not result.is_error and result.content.startswith("no lines match 'segfault'")


def test_sha256_match_is_accepted(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(
        store, session_id, op="inspect", seq=seq, tool_call_id="call_1", sha256=sha256_hex(CONTENT).upper()
    )
    assert not result.is_error


def test_rewound_event_is_refused(store: EventStore, session: tuple[str, int]) -> None:
    """T-3 / H-4: a result after a rewind point is no longer part of the session."""
    session_id, seq = session
    store.append(session_id, [NewEvent(EventKind.REWIND, {"to_seq": seq - 1})])
    result = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_1")
    assert result.is_error
    assert result.content == f"event {seq} was rewound and is no longer part of this session"


def test_rewind_before_the_result_does_not_invalidate_it(store: EventStore) -> None:
    session_id = store.create_session().id
    store.append(session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": "a"})])
    store.append(session_id, [NewEvent(EventKind.REWIND, {"to_seq": 0})])
    seq = append_tool_turn(store, session_id, "call_1", "after the rewind")
    store.append(session_id, [NewEvent(EventKind.REWIND, {"to_seq": seq})])  # cuts only later events
    assert not read_tool(store, session_id, op="inspect", seq=seq, tool_call_id="call_1").is_error


def test_wrong_tool_call_id_is_refused(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(store, session_id, op="read", seq=seq, tool_call_id="call_2")
    assert result.is_error
    assert result.content == f"tool_call_id mismatch: the result at seq {seq} answers 'call_1', not 'call_2'"


def test_wrong_sha256_is_refused(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(
        store, session_id, op="read", seq=seq, tool_call_id="call_1", sha256=sha256_hex("other")
    )
    assert result.is_error
    assert result.content == f"sha256 mismatch: the result at seq {seq} is not the one referenced"


def test_wrong_session_is_refused(store: EventStore, session: tuple[str, int]) -> None:
    _, seq = session
    other = store.create_session().id
    result = read_tool(store, other, op="read", seq=seq, tool_call_id="call_1")
    assert result.is_error and result.content == f"there is no event {seq} in this session"


def test_event_that_is_not_a_tool_result_is_refused(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    result = read_tool(store, session_id, op="read", seq=seq - 1, tool_call_id="call_1")
    assert (
        result.is_error
        and result.content == f"event {seq - 1} is not a tool result (its kind is assistant_message)"
    )


def test_imported_tool_message_can_be_read(store: EventStore) -> None:
    """`foya import` stores tool messages as imported events; the compiler shortens those too."""
    session_id = store.create_session().id
    imported = {"role": "tool", "tool_call_id": "imp_1", "content": "imported output\nline two"}
    seq = store.append(session_id, [NewEvent(EventKind.IMPORTED_MESSAGE, imported)])[0].seq
    result = read_tool(store, session_id, op="search", seq=seq, tool_call_id="imp_1", query="TWO")
    assert result.content.splitlines()[1] == "2: (char 16) line two"
    user = store.append(session_id, [NewEvent(EventKind.IMPORTED_MESSAGE, {"role": "user", "content": "x"})])
    refused = read_tool(store, session_id, op="read", seq=user[0].seq, tool_call_id="imp_1")
    assert refused.is_error and "is not a tool result" in refused.content


def test_bad_requests_are_clear_errors(store: EventStore, session: tuple[str, int]) -> None:
    session_id, seq = session
    assert (
        "op must be one of inspect, read, search"
        in read_tool(store, session_id, op="grep", seq=seq, tool_call_id="call_1").content
    )
    assert (
        "needs a non-empty query"
        in read_tool(store, session_id, op="search", seq=seq, tool_call_id="call_1").content
    )
    assert (
        "missing required argument 'seq'" in read_tool(store, session_id, op="read", tool_call_id="x").content
    )
    context = ToolContext(workdir=Path("."), session_id=session_id, store=None)
    no_store = default_registry().call(
        HISTORY_READ_TOOL, json.dumps({"op": "read", "seq": seq, "tool_call_id": "call_1"}), context
    )
    assert no_store.is_error and no_store.content == "no event store is available to read from"
