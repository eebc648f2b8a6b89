"""Provides the peewee table definitions and the schema migrations that create them.

Models are defined per database by `define_tables`, so several databases can be open in one
process (tests, imports) without a global binding that worker threads would race on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import peewee

from foya_tui.runtime.schema import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported: the store's version
from foya_tui.runtime.store.chain import fill_chains
from foya_tui.runtime.store.search import ProgressCallback, create_index, index_existing


@dataclass(frozen=True)
class Tables:
    session: type[peewee.Model]
    event: type[peewee.Model]
    schema_version: type[peewee.Model]

    def all(self) -> list[type[peewee.Model]]:
        return [self.schema_version, self.session, self.event]


def define_tables(database: peewee.Database) -> Tables:
    class BaseModel(peewee.Model):
        class Meta:
            pass

    BaseModel._meta.set_database(database)

    class SchemaVersion(BaseModel):
        version = peewee.IntegerField()

        class Meta:
            table_name = "schema_version"

    class SessionRow(BaseModel):
        id = peewee.TextField(primary_key=True)
        title = peewee.TextField(default="")
        workspace = peewee.TextField(default="")
        metadata = peewee.TextField(default="{}")
        created_at = peewee.TextField()
        updated_at = peewee.TextField()
        # The last assigned seq: appends read and bump it inside one IMMEDIATE transaction, which
        # keeps seq strictly increasing per session without scanning the event table.
        last_seq = peewee.IntegerField(default=0)

        class Meta:
            table_name = "session"

    class EventRow(BaseModel):
        id = peewee.AutoField()
        session = peewee.ForeignKeyField(SessionRow, column_name="session_id", on_delete="RESTRICT")
        seq = peewee.IntegerField()
        kind = peewee.TextField()
        payload = peewee.TextField()
        created_at = peewee.TextField()

        class Meta:
            table_name = "event"
            indexes = ((("session", "seq"), True),)

    return Tables(session=SessionRow, event=EventRow, schema_version=SchemaVersion)


# SPEC H-2: context management never edits or deletes an event. The database enforces it, so no
# future code path can quietly rewrite canonical history. `foya verify` checks they exist and
# `--repair` recreates a missing one (store/integrity.py).
IMMUTABILITY_TRIGGERS = {
    "event_no_update": (
        "CREATE TRIGGER IF NOT EXISTS event_no_update BEFORE UPDATE ON event "
        "BEGIN SELECT RAISE(ABORT, 'canonical history is immutable: events cannot be updated'); END"
    ),
    "event_no_delete": (
        "CREATE TRIGGER IF NOT EXISTS event_no_delete BEFORE DELETE ON event "
        "BEGIN SELECT RAISE(ABORT, 'canonical history is immutable: events cannot be deleted'); END"
    ),
}


def create_triggers(database: peewee.Database) -> list[str]:
    """Create the immutability triggers that are missing; returns their names."""
    present = {
        row[0] for row in database.execute_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    }
    missing = [name for name in IMMUTABILITY_TRIGGERS if name not in present]
    for name in missing:
        database.execute_sql(IMMUTABILITY_TRIGGERS[name])
    return missing


def migrate_to_1(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 1: sessions, the append-only event log, and triggers that make events immutable."""
    database.create_tables([tables.session, tables.event], safe=True)
    create_triggers(database)


def migrate_to_2(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 2: the per-session artifact store (SPEC H-3: events hold references, never bytes)."""
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS artifact ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " sha256 TEXT NOT NULL,"
        " mime TEXT NOT NULL,"
        " size INTEGER NOT NULL,"
        " data BLOB NOT NULL,"
        " created_at TEXT NOT NULL,"
        " PRIMARY KEY (session_id, sha256)"
        ") WITHOUT ROWID"
    )


def migrate_to_3(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 3: compaction state beside the log (SPEC P-1..P-5).

    - `checkpoint`: the fast projection of checkpoints; each row is a copy of what its
      `compaction_completed` event holds, so a damaged row is rebuilt from the event (P-3) and may
      be deleted (it is not canonical history).
    - `accepted_boundary`: per (session, route) the last request the provider accepted (C-13).
    - `compaction_fingerprint`: deterministic compaction failures, at most 16 per session (C-14).
    - an index of events by kind.
    """
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS checkpoint ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " id TEXT NOT NULL,"
        " event_seq INTEGER NOT NULL,"
        " body TEXT NOT NULL,"
        " PRIMARY KEY (session_id, id)"
        ") WITHOUT ROWID"
    )
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS accepted_boundary ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " route_id TEXT NOT NULL,"
        " through_seq INTEGER NOT NULL,"
        " input_tokens INTEGER,"
        " output_tokens INTEGER,"
        " payload_bytes INTEGER NOT NULL,"
        " recorded_at TEXT NOT NULL,"
        " PRIMARY KEY (session_id, route_id)"
        ") WITHOUT ROWID"
    )
    # Compaction reads events by kind (completions, undos, rewinds, diagnostics) on every check;
    # without this index each read scans the whole session.
    database.execute_sql("CREATE INDEX IF NOT EXISTS event_by_kind ON event (session_id, kind, seq)")
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS compaction_fingerprint ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " fingerprint TEXT NOT NULL,"
        " reason TEXT NOT NULL,"
        " recorded_at TEXT NOT NULL,"
        " PRIMARY KEY (session_id, fingerprint)"
        ") WITHOUT ROWID"
    )


def migrate_to_4(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 4: the full-text index of canonical history (store/search.py), filled from the
    events already stored (`progress` reports how far, for large databases)."""
    create_index(database)
    index_existing(database, progress)


def migrate_to_5(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 5: hardening.

    - `store_state`: facts about derived data, such as "the search index is stale" (a write that
      could not index its events records it here, and still commits: store/search.py).
    - `session.complete`: 0 while an import is still committing its batches. Incomplete sessions
      are invisible, so a crash mid-import never leaves a half-imported session in the list.
    """
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS store_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
    )
    columns = {row[1] for row in database.execute_sql("PRAGMA table_info(session)")}
    if "complete" not in columns:
        database.execute_sql("ALTER TABLE session ADD COLUMN complete INTEGER NOT NULL DEFAULT 1")


def migrate_to_6(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 6: the running digest of every event (store/chain.py), filled from the events already
    stored, session by session (`progress` hears events done, events in all).

    A side table keyed by (session, seq), not a column of `event`: events stay immutable (SPEC H-2),
    and a damaged digest row is derived data that `foya verify --repair` rewrites from the bytes."""
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS event_digest ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " seq INTEGER NOT NULL,"
        " chain TEXT NOT NULL,"
        " PRIMARY KEY (session_id, seq)"
        ") WITHOUT ROWID"
    )
    total = int(database.execute_sql("SELECT COUNT(*) FROM event").fetchone()[0])
    done = 0
    for (session_id,) in database.execute_sql("SELECT id FROM session ORDER BY id").fetchall():

        def report(written: int, before: int = done) -> None:
            if progress is not None:
                progress(min(before + written, total), total)

        done += fill_chains(database, session_id, report)
    if progress is not None:
        progress(total, total)


def migrate_to_7(database: peewee.Database, tables: Tables, progress: ProgressCallback | None) -> None:
    """Schema 7: persisted token counts, per message event and tokenizer (`event_tokens`), so a
    compile in a new process never tokenizes history again (context/index.py writes a count the
    first time it makes one). A side table, so events stay immutable (SPEC H-2); keyed by
    (session, tokenizer, seq), so a compile reads one tokenizer's counts after a seq as one range.
    Existing databases fill it as their sessions are next compiled by a process that can write."""
    database.execute_sql(
        "CREATE TABLE IF NOT EXISTS event_tokens ("
        " session_id TEXT NOT NULL REFERENCES session (id) ON DELETE RESTRICT,"
        " counter TEXT NOT NULL,"
        " seq INTEGER NOT NULL,"
        " tokens INTEGER NOT NULL,"
        " PRIMARY KEY (session_id, counter, seq)"
        ") WITHOUT ROWID"
    )


# Forward-only migrations, in order. Each runs inside the transaction that bumps the version.
Migration = Callable[[peewee.Database, Tables, ProgressCallback | None], None]
"""A schema step; `progress` is for the ones that walk existing events (the search index)."""
MIGRATIONS: tuple[tuple[int, Migration], ...] = (
    (1, migrate_to_1),
    (2, migrate_to_2),
    (3, migrate_to_3),
    (4, migrate_to_4),
    (5, migrate_to_5),
    (6, migrate_to_6),
    (7, migrate_to_7),
)
assert MIGRATIONS[-1][0] == SCHEMA_VERSION, "a migration per schema version, up to SCHEMA_VERSION"
