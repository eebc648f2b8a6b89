"""Tests the SQLite event store (SPEC H-1..H-5) on real database files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.store import EventStore, StoreError, UnknownSessionError, open_database
from foya_tui.runtime.store.tables import SCHEMA_VERSION
from foya_tui.runtime.view.history import valid_events

INSERT_EVENT = "INSERT INTO event (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, 'x')"


def user(text: str) -> NewEvent:
    return NewEvent(EventKind.USER_MESSAGE, {"text": text})


@pytest.fixture
def store(tmp_path: Path):
    database = open_database(tmp_path / "store.sqlite3")
    yield EventStore(database)
    database.close()


def test_seq_is_strictly_increasing_per_session(store: EventStore) -> None:
    a = store.create_session(title="a")
    b = store.create_session(title="b")
    store.append(a.id, [user("1"), user("2")])
    store.append(b.id, [user("x")])
    store.append(a.id, [user("3")])
    assert [e.seq for e in store.events(a.id)] == [1, 2, 3]
    assert [e.seq for e in store.events(b.id)] == [1]
    assert store.get_session(a.id).event_count == 3


def test_pragmas_and_schema_version(tmp_path: Path) -> None:
    database = open_database(tmp_path / "p.sqlite3")
    sql = database.connection
    assert sql.execute_sql("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sql.execute_sql("PRAGMA foreign_keys").fetchone()[0] == 1
    assert sql.execute_sql("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert sql.execute_sql("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    database.close()
    # Re-opening runs no migration twice.
    database = open_database(tmp_path / "p.sqlite3")
    assert database.connection.execute_sql("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1
    database.close()


def test_newer_schema_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    open_database(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = 999")
    with pytest.raises(StoreError, match="newer than this Foya understands"):
        open_database(path)


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open database"):
        open_database(path)


def test_events_are_immutable_in_the_database(store: EventStore) -> None:
    """SPEC H-2: not even raw SQL can edit or delete canonical history."""
    info = store.create_session()
    store.append(info.id, [user("keep me")])
    with sqlite3.connect(store.path) as raw:
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            raw.execute("UPDATE event SET payload = '{}'")
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            raw.execute("DELETE FROM event")
    assert store.events(info.id)[0].payload == {"text": "keep me"}


def test_a_failing_batch_writes_nothing(store: EventStore) -> None:
    """SPEC H-5: a batch is one transaction; an unencodable payload aborts all of it."""
    info = store.create_session()
    store.append(info.id, [user("before")])
    with pytest.raises(TypeError):
        store.append(info.id, [user("ok"), NewEvent(EventKind.USER_MESSAGE, {"bad": {1, 2}})])
    assert [e.payload["text"] for e in store.events(info.id)] == ["before"]
    assert store.last_seq(info.id) == 1


def test_a_crash_inside_a_transaction_leaves_the_old_state(tmp_path: Path) -> None:
    """SPEC H-5: a process killed mid-transaction leaves either the old or the new state."""
    path = tmp_path / "crash.sqlite3"
    database = open_database(path)
    store = EventStore(database)
    info = store.create_session()
    store.append(info.id, [user("committed")])
    database.close()
    script = f"""
import os
from foya_tui.runtime.store import open_database
db = open_database({str(path)!r})
sql = db.connection
with sql.atomic():
    sql.execute_sql({INSERT_EVENT!r}, ({info.id!r}, 2, "user_message", "{{}}"))
    os._exit(9)  # die with the transaction open
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 9, result.stderr
    database = open_database(path)
    assert [e.seq for e in EventStore(database).events(info.id)] == [1]
    database.close()


def test_concurrent_appends_from_threads_keep_seq_unique(store: EventStore) -> None:
    info = store.create_session()

    def writer(tag: str) -> None:
        for i in range(50):
            store.append(info.id, [user(f"{tag}{i}")])

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seqs = [e.seq for e in store.events(info.id)]
    assert seqs == list(range(1, 151))


def test_corrupt_rows_are_reported_and_skipped_never_lost(store: EventStore) -> None:
    info = store.create_session()
    store.append(info.id, [user("fine")])
    with sqlite3.connect(store.path) as raw:
        raw.execute(INSERT_EVENT, (info.id, 2, "user_message", "{not json"))
        raw.execute(INSERT_EVENT, (info.id, 3, "mystery", "{}"))
    events = store.events(info.id)
    assert [e.problem is None for e in events] == [True, False, False]
    assert events[1].payload["raw_payload"] == "{not json"
    assert events[2].payload["raw_kind"] == "mystery"
    assert [e.seq for e in valid_events(events)] == [1]
    assert "problem" in events[1].to_export()


def test_invalid_unicode_is_stored_without_loss(store: EventStore) -> None:
    info = store.create_session()
    text = b"bad \xff bytes".decode("utf-8", errors="surrogateescape") + " 中文"
    store.append(info.id, [user(text)])
    assert store.events(info.id)[0].payload["text"] == text


def test_find_session_by_prefix(store: EventStore) -> None:
    info = store.create_session()
    assert store.find_session(info.id[:6]).id == info.id
    assert store.find_session(info.id.upper()).id == info.id
    with pytest.raises(UnknownSessionError):
        store.find_session("zz-not-hex")
    with pytest.raises(UnknownSessionError):
        store.find_session("")
    with pytest.raises(UnknownSessionError):
        store.append("0" * 32, [user("x")])


def test_ambiguous_prefix_is_refused(store: EventStore) -> None:
    ids = [store.create_session().id for _ in range(40)]
    first_chars = [i[0] for i in ids]
    shared = max(set(first_chars), key=first_chars.count)
    assert first_chars.count(shared) > 1  # 40 ids over 16 hex digits always collide
    with pytest.raises(UnknownSessionError, match="ambiguous"):
        store.find_session(shared)


def test_sessions_listed_newest_first(store: EventStore) -> None:
    old = store.create_session(title="old")
    new = store.create_session(title="new")
    store.append(old.id, [user("bump")])
    assert [s.title for s in store.list_sessions()] == ["old", "new"]
    assert store.list_sessions(limit=1)[0].id == old.id
    assert new.event_count == 0


def test_a_version_1_database_migrates_forward(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    database = open_database(path)
    info = EventStore(database).create_session()
    EventStore(database).append(info.id, [user("from v1")])
    database.close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE artifact")
        raw.execute("UPDATE schema_version SET version = 1")
    database = open_database(path)
    store = EventStore(database)
    version = database.connection.execute_sql("SELECT version FROM schema_version").fetchall()
    assert version == [(SCHEMA_VERSION,)]
    assert store.events(info.id)[0].payload == {"text": "from v1"}
    assert store.artifact(info.id, "0" * 64) is None
    database.close()


def test_close_closes_the_connections_worker_threads_opened(tmp_path: Path) -> None:
    database = open_database(tmp_path / "threads.sqlite3")
    store = EventStore(database)
    info = store.create_session()
    threads = [threading.Thread(target=store.append, args=(info.id, [user("x")])) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    opened = list(database.connection._opened)
    assert len(opened) >= 3
    database.close()
    for connection in opened:
        with pytest.raises(sqlite3.ProgrammingError):
            connection.execute("SELECT 1")
