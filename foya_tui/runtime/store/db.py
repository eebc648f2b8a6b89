"""Provides opening a Foya database: pragmas, IMMEDIATE transactions and forward migrations."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import peewee

from foya_tui.errors import EXIT_USAGE, FoyaError
from foya_tui.runtime.store.search import ProgressCallback
from foya_tui.runtime.store.tables import MIGRATIONS, SCHEMA_VERSION, Tables, define_tables

PRAGMAS = {
    "journal_mode": "wal",  # readers (the UI) never wait for the writer (a worker)
    "foreign_keys": 1,
    "busy_timeout": 5000,  # ms another process may hold the write lock before we give up
    "synchronous": "normal",  # with WAL: durable across application crashes, fast appends
}


class _TrackedSqliteDatabase(peewee.SqliteDatabase):
    """peewee keeps one connection per thread; this remembers them all so `close_all` can close
    the ones that worker threads opened (a worker thread never closes its own)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        # peewee's stubs omit the private `_connect` hook this class exists to wrap.
        connection: sqlite3.Connection = super()._connect()  # type: ignore[misc]
        with self._opened_lock:
            self._opened = [c for c in self._opened if _is_open(c)]
            self._opened.append(connection)
        return connection

    def close_all(self) -> None:
        if not self.is_closed():
            self.close()
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()


def _is_open(connection: sqlite3.Connection) -> bool:
    try:
        connection.total_changes  # noqa: B018 - raises ProgrammingError once closed
    except sqlite3.ProgrammingError:
        return False
    return True


class StoreError(FoyaError, RuntimeError):
    """The database cannot be used (unreadable file, newer schema, corrupt state). Exit 2, as for a
    bad `--db`: the command wrote nothing, and the fix is the user's (another file, a newer Foya)."""

    exit_code: ClassVar[int] = EXIT_USAGE


@dataclass(frozen=True)
class Database:
    """An open database and the table models bound to it."""

    path: Path
    connection: _TrackedSqliteDatabase
    tables: Tables

    def close(self) -> None:
        """Close every connection, including those opened by worker threads."""
        self.connection.close_all()


def _current_version(connection: peewee.SqliteDatabase, tables: Tables) -> int:
    connection.create_tables([tables.schema_version], safe=True)
    # `version` is a field of the model `define_tables` builds per database; `Tables` can only say
    # `type[peewee.Model]`.
    version_field = tables.schema_version.version  # type: ignore[attr-defined]
    row = tables.schema_version.select(peewee.fn.MAX(version_field)).scalar()
    return int(row or 0)


def open_database(path: Path | str, progress: ProgressCallback | None = None) -> Database:
    """Open (creating if needed) a database file and bring its schema up to date; `progress`
    hears how far a migration that indexes existing events has come."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # lock_type IMMEDIATE: every transaction takes the write lock at BEGIN, so two writers never
    # deadlock upgrading a read lock; busy_timeout makes the second one wait instead.
    connection = _TrackedSqliteDatabase(
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
                    migrate(connection, tables, progress)
                    tables.schema_version.delete().execute()
                    tables.schema_version.create(version=target)
    except (peewee.DatabaseError, sqlite3.DatabaseError) as exc:
        connection.close()
        raise StoreError(f"cannot open database {path}: {exc}") from None
    return Database(path=path, connection=connection, tables=tables)
