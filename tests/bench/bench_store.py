"""Provides a benchmark of the event store against raw sqlite3 doing the same work, side by side.

Run: `python tests/bench/bench_store.py [--appends N] [--events N] [--rounds R]`.
Both sides use the same pragmas (WAL, synchronous=NORMAL, busy timeout) and the same schema;
the raw side does exactly what `EventStore.append` does per event (IMMEDIATE transaction, read
last_seq, insert, index the text for search, bump last_seq) and what `EventStore.events` does to
read (select, json.loads).
Rounds alternate between the two so machine noise hits both alike; the ratio is what matters.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.store import EventStore, open_database

PAYLOAD = {"text": "a typical user message of modest length, with some words " * 3}


def foya_appends(path: Path, count: int) -> float:
    database = open_database(path)
    store = EventStore(database)
    session = store.create_session()
    event = NewEvent(EventKind.USER_MESSAGE, PAYLOAD)
    start = time.perf_counter()
    for _ in range(count):
        store.append(session.id, [event])
    elapsed = time.perf_counter() - start
    database.close()
    return elapsed


def raw_connect(path: Path) -> sqlite3.Connection:
    # Schema from Foya itself, so both sides write the same table and indexes.
    open_database(path).close()
    connection = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=wal", "foreign_keys=1", "busy_timeout=5000", "synchronous=normal"):
        connection.execute(f"PRAGMA {pragma}")
    return connection


def raw_appends(path: Path, count: int) -> float:
    connection = raw_connect(path)
    session_id = uuid.uuid4().hex
    connection.execute(
        "INSERT INTO session (id, title, workspace, metadata, created_at, updated_at, last_seq) "
        "VALUES (?, '', '', '{}', 'now', 'now', 0)",
        (session_id,),
    )
    start = time.perf_counter()
    for _ in range(count):
        connection.execute("BEGIN IMMEDIATE")
        seq = connection.execute("SELECT last_seq FROM session WHERE id = ?", (session_id,)).fetchone()[0] + 1
        now = "2026-11-29T12:00:00.000000+00:00"
        inserted = connection.execute(
            "INSERT INTO event (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)",
            (
                session_id,
                seq,
                "user_message",
                json.dumps(PAYLOAD, ensure_ascii=False, separators=(",", ":")),
                now,
            ),
        )
        connection.execute(
            "INSERT INTO event_fts (rowid, body, session_id, seq, kind, role) VALUES (?, ?, ?, ?, ?, ?)",
            (inserted.lastrowid, PAYLOAD["text"], session_id, seq, "user_message", "user"),
        )
        connection.execute(
            "UPDATE session SET last_seq = ?, updated_at = ? WHERE id = ?", (seq, now, session_id)
        )
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def fill(path: Path, count: int) -> str:
    database = open_database(path)
    store = EventStore(database)
    session = store.create_session()
    batch = [NewEvent(EventKind.USER_MESSAGE, PAYLOAD)] * 500
    for _ in range(count // 500):
        store.append(session.id, batch)
    database.close()
    return session.id


def foya_read(path: Path, session_id: str) -> float:
    database = open_database(path)
    store = EventStore(database)
    start = time.perf_counter()
    events = store.events(session_id)
    elapsed = time.perf_counter() - start
    assert events
    database.close()
    return elapsed


def raw_read(path: Path, session_id: str) -> float:
    connection = raw_connect(path)
    start = time.perf_counter()
    rows = [
        (seq, kind, json.loads(payload), at)
        for seq, kind, payload, at in connection.execute(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
    ]
    elapsed = time.perf_counter() - start
    assert rows
    connection.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        foya_append, raw_append, foya_reads, raw_reads = [], [], [], []
        read_db = folder / "read.sqlite3"
        session_id = fill(read_db, args.events)
        for round_ in range(args.rounds):
            foya_append.append(foya_appends(folder / f"f{round_}.sqlite3", args.appends))
            raw_append.append(raw_appends(folder / f"r{round_}.sqlite3", args.appends))
            foya_reads.append(foya_read(read_db, session_id))
            raw_reads.append(raw_read(read_db, session_id))
    f_rate = args.appends / statistics.median(foya_append)
    r_rate = args.appends / statistics.median(raw_append)
    f_read, r_read = statistics.median(foya_reads), statistics.median(raw_reads)
    print(f"appends ({args.appends} single-event transactions, median of {args.rounds} rounds)")
    print(f"  foya EventStore : {f_rate:10,.0f} appends/s")
    print(f"  raw sqlite3     : {r_rate:10,.0f} appends/s")
    print(f"  foya / raw      : {f_rate / r_rate:10.2f}x speed   (target >= 0.50)")
    print(f"read a {args.events:,}-event session (median of {args.rounds} rounds)")
    print(f"  foya EventStore : {f_read * 1000:10.1f} ms")
    print(f"  raw sqlite3     : {r_read * 1000:10.1f} ms")
    print(f"  foya / raw      : {r_read / f_read:10.2f}x speed   (target >= 0.50)")


if __name__ == "__main__":
    main()
