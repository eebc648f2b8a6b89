"""Provides opening a Foya database: pragmas, IMMEDIATE transactions and forward migrations."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import peewee

from foya_tui.runtime.store.tables import MIGRATIONS, SCHEMA_VERSION, Tables, define_tables

PRAGMAS = {
    "journal_mode": "wal",  # readers (the UI) never wait for the writer (a worker)
    "foreign_keys": 1,
    "busy_timeout": 5000,  # ms another process may hold the write lock before we give up
    "synchronous": "normal",  # with WAL: durable across application crashes, fast appends
}


class StoreError(RuntimeError):
    """The database cannot be used (unreadable file, newer schema, corrupt state)."""


@dataclass(frozen=True)
class Database:
    """An open database and the table models bound to it."""

    path: Path
    connection: peewee.SqliteDatabase
    tables: Tables

    def close(self) -> None:
        if not self.connection.is_closed():
            self.connection.close()


def _current_version(connection: peewee.SqliteDatabase, tables: Tables) -> int:
    connection.create_tables([tables.schema_version], safe=True)
    row = tables.schema_version.select(peewee.fn.MAX(tables.schema_version.version)).scalar()
    return int(row or 0)


def open_database(path: Path | str) -> Database:
    """Open (creating if needed) a database file and bring its schema up to date."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # lock_type IMMEDIATE: every transaction takes the write lock at BEGIN, so two writers never
    # deadlock upgrading a read lock; busy_timeout makes the second one wait instead.
    connection = peewee.SqliteDatabase(
        str(path), pragmas=PRAGMAS, lock_type="IMMEDIATE", check_same_thread=False
    )
    tables = define_tables(connection)
    try:
        connection.connect(reuse_if_open=True)
        with connection.atomic():
            version = _current_version(connection, tables)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} uses schema {version}, newer than this Foya understands ({SCHEMA_VERSION})"
                )
            for target, migrate in MIGRATIONS:
                if target > version:
                    migrate(connection, tables)
                    tables.schema_version.delete().execute()
                    tables.schema_version.create(version=target)
    except (peewee.DatabaseError, sqlite3.DatabaseError) as exc:
        connection.close()
        raise StoreError(f"cannot open database {path}: {exc}") from None
    return Database(path=path, connection=connection, tables=tables)
