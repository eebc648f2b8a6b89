"""Provides what the sessions browser reads of every session (its model, counts and size, in one
pass over the log) and the deletion of a whole session.

Deleting a session is the one path that removes events. SPEC H-2 forbids context management to
delete or edit an event, and the immutability triggers enforce it for every other path; a user who
deletes a session asks for all of it to go, so this transaction lifts the delete trigger, removes
the session and everything derived from it, and recreates the trigger before it commits. Nobody
else ever sees the database without the trigger: the DDL is part of the transaction (SQLite), and
a failure anywhere rolls all of it back, the trigger included (SPEC H-5).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import peewee

from foya_tui.runtime.model import EventKind
from foya_tui.runtime.store.search import index_stale_reason, mark_index_stale
from foya_tui.runtime.store.tables import IMMUTABILITY_TRIGGERS

SESSION_TABLES = (
    "event_digest",
    "event_tokens",
    "checkpoint",
    "accepted_boundary",
    "compaction_fingerprint",
    "artifact",
)
"""The tables keyed by session besides `event` and `session` itself: derived data and bookkeeping
that go with the session (deleted before its events, which they reference)."""
_DATABASE_ERRORS = (peewee.DatabaseError, sqlite3.DatabaseError)


@dataclass(frozen=True)
class SessionStats:
    """What the log says about one session beyond its row: counts, bytes, the model of its last
    reply, and how its last failed or cancelled turn ended."""

    events: int = 0
    replies: int = 0
    """Assistant messages (live or imported): 0 for a session whose first turn never got a reply."""
    checkpoints: int = 0
    """Completed compactions (each one committed a checkpoint)."""
    size_bytes: int = 0
    """Stored payload bytes of its events and artifacts."""
    model: str | None = None
    last_outcome: str | None = None
    """How its newest turn ended when that was without a reply: `cancelled`, or `failed (KIND)`
    with the failure's kind (`quota`, `connection`, `step limit`…); None otherwise."""


def session_stats(database: peewee.SqliteDatabase) -> dict[str, SessionStats]:
    """Stats of every session, by id: one grouped pass over the event table, then two indexed
    lookups per session (its last reply's model, its last turn outcome)."""
    sizes = {
        str(row[0]): int(row[1] or 0)
        for row in database.execute_sql("SELECT session_id, SUM(size) FROM artifact GROUP BY session_id")
    }
    found: dict[str, SessionStats] = {}
    rows = database.execute_sql(
        "SELECT session_id, COUNT(*), SUM(LENGTH(CAST(payload AS BLOB))), "
        "SUM(kind = ? OR (kind = ? AND json_valid(payload) "
        "AND json_extract(payload, '$.role') = 'assistant')), "
        "SUM(kind = ?) FROM event GROUP BY session_id",
        (
            str(EventKind.ASSISTANT_MESSAGE),
            str(EventKind.IMPORTED_MESSAGE),
            str(EventKind.COMPACTION_COMPLETED),
        ),
    ).fetchall()
    for session_id, events, size, replies, checkpoints in rows:
        found[str(session_id)] = SessionStats(
            events=int(events),
            replies=int(replies or 0),
            checkpoints=int(checkpoints or 0),
            size_bytes=int(size or 0) + sizes.get(str(session_id), 0),
            model=_last_model(database, str(session_id)),
            last_outcome=_last_outcome(database, str(session_id)),
        )
    return found


def _newest(
    database: peewee.SqliteDatabase, session_id: str, kind: EventKind
) -> tuple[int, dict[str, Any]] | None:
    row = database.execute_sql(
        "SELECT seq, payload FROM event WHERE session_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1",
        (session_id, str(kind)),
    ).fetchone()
    if row is None:
        return None
    try:
        payload = json.loads(row[1])
    except ValueError:
        return None
    return (int(row[0]), payload) if isinstance(payload, dict) else None


def _last_model(database: peewee.SqliteDatabase, session_id: str) -> str | None:
    newest = _newest(database, session_id, EventKind.ASSISTANT_MESSAGE)
    model = newest[1].get("model") if newest is not None else None
    return model if isinstance(model, str) and model else None


def _last_outcome(database: peewee.SqliteDatabase, session_id: str) -> str | None:
    outcome = _newest(database, session_id, EventKind.TURN_OUTCOME)
    if outcome is None:
        return None
    reply = _newest(database, session_id, EventKind.ASSISTANT_MESSAGE)
    if reply is not None and reply[0] > outcome[0]:
        return None  # a later turn got its reply
    if outcome[1].get("outcome") == "cancelled":
        return "cancelled"
    kind = str(outcome[1].get("kind") or "other").replace("_", " ")
    return f"failed ({kind})"


def delete_session_rows(database: peewee.SqliteDatabase, session_id: str) -> int:
    """Delete a session and everything stored for it, in one transaction; returns the number of
    events deleted. The search index rows go too (by rowid, the events' ids); an index that cannot
    take the delete is marked stale (derived data never fails a write), so `foya verify --repair`
    rebuilds it."""
    with database.atomic():
        events = int(
            database.execute_sql("SELECT COUNT(*) FROM event WHERE session_id = ?", (session_id,)).fetchone()[
                0
            ]
        )
        if index_stale_reason(database) is None:
            database.execute_sql("SAVEPOINT foya_unindex")
            try:
                database.execute_sql(
                    "DELETE FROM event_fts WHERE rowid IN (SELECT id FROM event WHERE session_id = ?)",
                    (session_id,),
                )
                database.execute_sql("SAVEPOINT foya_unindex_flush")
                database.execute_sql("RELEASE foya_unindex_flush")
            except (*_DATABASE_ERRORS, MemoryError) as exc:
                if not database.connection().in_transaction:
                    raise
                database.execute_sql("ROLLBACK TO foya_unindex")
                mark_index_stale(database, f"deleting a session's rows failed ({exc})")
            database.execute_sql("RELEASE foya_unindex")
        for table in SESSION_TABLES:
            database.execute_sql(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        # The delete trigger is lifted for this transaction only (see the module's docstring).
        database.execute_sql("DROP TRIGGER IF EXISTS event_no_delete")
        database.execute_sql("DELETE FROM event WHERE session_id = ?", (session_id,))
        database.execute_sql(IMMUTABILITY_TRIGGERS["event_no_delete"])
        database.execute_sql("DELETE FROM session WHERE id = ?", (session_id,))
    return events


__all__ = ["SESSION_TABLES", "SessionStats", "delete_session_rows", "session_stats"]
