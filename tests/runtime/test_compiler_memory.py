"""Tests that the compiler keeps per-session indexes for a few recently used sessions only, never
drops one in use, compiles a dropped session exactly as before, and reads a session no checkpoint
covers a batch at a time (real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from foya_tui.runtime.context import index as index_module
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.model import Event, EventKind, NewEvent
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.view.history import history_messages
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW

ROUTE = make_route("foya-sim/large", "default")


def make_sessions(tmp_path: Path, count: int) -> tuple[EventStore, list[str]]:
    store = EventStore(open_database(tmp_path / "memory.sqlite3"))
    ids = []
    for index in range(count):
        session = store.create_session()
        store.append(
            session.id,
            [
                NewEvent(EventKind.USER_MESSAGE, {"text": f"question {index}"}),
                NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": f"answer {index}"}),
            ],
        )
        ids.append(session.id)
    return store, ids


def test_only_the_most_recently_used_sessions_keep_an_index(tmp_path: Path) -> None:
    store, ids = make_sessions(tmp_path, 5)
    compiler = ContextCompiler(store, Settings(), workdir=tmp_path, clock=lambda: FIXED_NOW, max_sessions=2)
    before = [compiler.compile(session_id, ROUTE).messages for session_id in ids]
    assert compiler.indexed_sessions == tuple(ids[-2:])
    compiler.compile(ids[3], ROUTE)  # used again: now the most recent
    assert compiler.indexed_sessions == (ids[4], ids[3])
    # A dropped session's index is rebuilt from the store: the same request as before.
    assert compiler.compile(ids[0], ROUTE).messages == before[0]
    assert compiler.indexed_sessions == (ids[3], ids[0])


def test_a_session_whose_lock_is_held_is_never_dropped(tmp_path: Path) -> None:
    store, ids = make_sessions(tmp_path, 3)
    compiler = ContextCompiler(store, Settings(), workdir=tmp_path, clock=lambda: FIXED_NOW, max_sessions=1)
    compiler.compile(ids[0], ROUTE)
    busy = compiler._state(ids[0])
    with busy.lock:  # as while another thread compiles it
        compiler.compile(ids[1], ROUTE)
        compiler.compile(ids[2], ROUTE)
        assert ids[0] in compiler.indexed_sessions
        assert compiler._state(ids[0]) is busy
    compiler.compile(ids[2], ROUTE)
    assert compiler.indexed_sessions == (ids[2],)


def test_a_first_compile_reads_history_in_batches_and_builds_the_same_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session no checkpoint covers is read a batch at a time (what decides validity and epochs
    first), so memory never holds all its events; the request is the one an incremental index
    builds, rewound messages and all."""
    store = EventStore(open_database(tmp_path / "batches.sqlite3"))
    session = store.create_session()
    turns = [
        event
        for index in range(30)
        for event in (
            NewEvent(EventKind.USER_MESSAGE, {"text": f"question {index}"}),
            NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": f"answer {index}"}),
        )
    ]
    store.append(session.id, turns[:40])
    store.append(session.id, [NewEvent(EventKind.REWIND, {"to_seq": 30})])  # voids seqs 31-40
    store.append(session.id, turns[40:])
    # Built as a running session does: one refresh after each event.
    grown = EventStore(open_database(tmp_path / "grown.sqlite3"))
    copy = grown.create_session()
    growing = ContextCompiler(grown, Settings(), workdir=tmp_path, clock=lambda: FIXED_NOW)
    for event in store.events(session.id):
        grown.append(copy.id, [NewEvent(event.kind, event.payload)])
        expected = growing.compile(copy.id, ROUTE)
    monkeypatch.setattr(index_module, "READ_BATCH_EVENTS", 7)
    largest: list[int] = []
    read = store.events

    def events(session_id: str, after_seq: int = 0, through_seq: int | None = None) -> list[Event]:
        got = read(session_id, after_seq, through_seq)
        largest.append(len(got))
        return got

    monkeypatch.setattr(store, "events", events)
    fresh = ContextCompiler(store, Settings(), workdir=tmp_path, clock=lambda: FIXED_NOW)
    request = fresh.compile(session.id, ROUTE)
    assert max(largest) <= 7 and sum(largest) == 61
    assert list(request.messages) == list(expected.messages)
    valid = [message.to_openai() for message in history_messages(read(session.id))]
    assert list(request.messages)[1:] == valid  # after the system prompt: valid history (H-4)
    assert "question 15" not in str(list(request.messages))  # rewound (seq 31)
