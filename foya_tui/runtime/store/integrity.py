"""Provides the store's own checks for `foya verify` and their repair for `foya verify --repair`:
the search index (FTS5 integrity-check, its rows against history, the stale mark), the
immutability triggers (SPEC H-2), each session's `last_seq` against its events (SPEC H-5), and its
running digests recomputed from the stored bytes (store/chain.py).

Everything repaired here is derived or bookkeeping: the index is rebuilt from canonical history,
triggers are recreated, a `last_seq` behind its events is moved up to them, running digests are
rewritten from the events. No event is touched.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import peewee

from foya_tui.runtime.store.chain import check_chain, fill_chains
from foya_tui.runtime.store.db import Database
from foya_tui.runtime.store.search import (
    ProgressCallback,
    expected_rows,
    index_stale_reason,
    rebuild_index,
)
from foya_tui.runtime.store.tables import IMMUTABILITY_TRIGGERS, create_triggers

_DATABASE_ERRORS = (peewee.DatabaseError, sqlite3.DatabaseError)
DEEP_CHECK_MAX_BYTES = 512 * 1024 * 1024
"""A read-only verify runs FTS5's integrity-check on an in-memory copy of the database (the check
is an INSERT, refused on a read-only connection); above this size only the row checks run."""


@dataclass(frozen=True)
class StoreCheck:
    """What the store checks found; `index_damaged` says whether a rebuild would help."""

    problems: tuple[str, ...]
    index_damaged: bool
    chain_damaged: bool = False
    """Some running digest differs from the one recomputed from the events' bytes."""


def _integrity_check(connection: sqlite3.Connection) -> str | None:
    try:
        connection.execute("INSERT INTO event_fts (event_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.Error as exc:
        return str(exc)
    return None


def _deep_index_check(database: Database) -> str | None:
    """FTS5's own integrity-check: directly when writable, else on an in-memory snapshot."""
    raw = database.connection.connection()
    if not database.read_only:
        return _integrity_check(raw)
    pages = raw.execute("PRAGMA page_count").fetchone()[0] * raw.execute("PRAGMA page_size").fetchone()[0]
    if pages > DEEP_CHECK_MAX_BYTES:
        return None
    snapshot = sqlite3.connect(":memory:")
    try:
        raw.backup(snapshot)
        return _integrity_check(snapshot)
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        snapshot.close()


def check_store(database: Database, session_id: str) -> StoreCheck:
    """Every store-level problem of a session and of the shared index, one sentence each."""
    sql = database.connection
    problems: list[str] = []
    index_damaged = False
    stale = index_stale_reason(sql)
    if stale is not None:
        problems.append(f"search index: marked out of date ({stale})")
        index_damaged = True
    else:
        try:
            indexed = {
                int(row[0])
                for row in sql.execute_sql("SELECT rowid FROM event_fts WHERE session_id = ?", (session_id,))
            }
        except _DATABASE_ERRORS as exc:
            problems.append(f"search index: unreadable ({exc})")
            index_damaged = True
        else:
            expected = {int(row[0]) for row in expected_rows(sql, session_id)}
            if expected - indexed:
                problems.append(f"search index: {len(expected - indexed):,} event(s) of history missing")
                index_damaged = True
            if indexed - expected:
                problems.append(f"search index: {len(indexed - expected):,} row(s) not in valid history")
                index_damaged = True
            deep = _deep_index_check(database)
            if deep is not None:
                problems.append(f"search index: FTS5 integrity-check failed ({deep})")
                index_damaged = True
    present = {row[0] for row in sql.execute_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for name in IMMUTABILITY_TRIGGERS:
        if name not in present:
            problems.append(f"trigger {name} is missing: events are not protected from edits")  # H-2
    row = sql.execute_sql(
        "SELECT s.last_seq, (SELECT COALESCE(MAX(seq), 0) FROM event e WHERE e.session_id = s.id) "
        "FROM session s WHERE s.id = ?",
        (session_id,),
    ).fetchone()
    if row is not None and int(row[0]) != int(row[1]):
        problems.append(
            f"last_seq is {row[0]} but the newest event is seq {row[1]}: "
            + ("the next write would collide with a stored event" if row[0] < row[1] else "seqs would skip")
        )
    chain = check_chain(sql, session_id)
    if not chain.ok:
        parts = [
            f"{count:,} {what}"
            for count, what in (
                (chain.wrong, "differ from the events' bytes"),
                (chain.missing, "missing"),
                (chain.stray, "without an event"),
            )
            if count
        ]
        where = f" (first at seq {chain.first_bad_seq})" if chain.first_bad_seq is not None else ""
        problems.append(f"running digests: {', '.join(parts)}{where}; checkpoints are checked against them")
    return StoreCheck(tuple(problems), index_damaged, chain_damaged=not chain.ok)


def repair_store(
    database: Database,
    check: StoreCheck,
    progress: ProgressCallback | None = None,
    session_id: str | None = None,
) -> tuple[str, ...]:
    """Repair what `check` found (running digests of `session_id`, the session checked); returns
    one sentence per action taken."""
    sql = database.connection
    done: list[str] = []
    with sql.atomic():
        created = create_triggers(sql)
    done += [f"recreated trigger {name}" for name in created]
    with sql.atomic():
        moved = sql.execute_sql(
            "UPDATE session SET last_seq = (SELECT MAX(seq) FROM event e WHERE e.session_id = session.id) "
            "WHERE last_seq < (SELECT COALESCE(MAX(seq), 0) FROM event e WHERE e.session_id = session.id)"
        ).rowcount
    if moved:
        done.append(f"moved last_seq up to the newest event in {moved} session(s)")
    if check.chain_damaged and session_id is not None:
        with sql.atomic():
            rewritten = fill_chains(sql, session_id)
        done.append(f"rewrote the running digests from the events' bytes ({rewritten:,} events)")
    if check.index_damaged:
        rows = rebuild_index(sql, progress)
        done.append(f"rebuilt the search index from history ({rows:,} rows)")
    return tuple(done)


__all__ = ["StoreCheck", "check_store", "repair_store"]
