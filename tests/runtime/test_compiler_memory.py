"""Tests that the compiler keeps per-session indexes for a few recently used sessions only, never
drops one in use, and compiles a dropped session exactly as before (real SQLite store)."""

from __future__ import annotations

from pathlib import Path

from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
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
