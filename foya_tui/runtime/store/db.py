"""Provides opening a Foya database (pragmas, IMMEDIATE transactions, forward migrations; read-only
for commands that only read) and the one translation of SQLite faults into one-line errors."""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import peewee

from foya_tui.errors import EXIT_FAILED, EXIT_USAGE, FoyaError
from foya_tui.runtime.schema import needs_migration
from foya_tui.runtime.store.search import ProgressCallback
from foya_tui.runtime.store.tables import MIGRATIONS, SCHEMA_VERSION, Tables, define_tables

BUSY_TIMEOUT_MS = 5000
"""How long another process may hold the write lock before a write gives up."""
PRAGMAS: dict[str, str | int] = {
    "journal_mode": "wal",  # readers (the UI) never wait for the writer (a worker)
    "foreign_keys": 1,
    "busy_timeout": BUSY_TIMEOUT_MS,
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


class DatabaseFault(FoyaError, RuntimeError):
    """SQLite failed under a command that was valid: exit 1, one line saying what to do."""

    exit_code: ClassVar[int] = EXIT_FAILED


class DatabaseDamaged(DatabaseFault):
    """The file's pages or its bookkeeping are damaged (corrupt pages, a counter out of step)."""


class DiskFull(DatabaseFault):
    """The disk (or the database's size limit) is full: nothing of the failed write was kept."""


class DatabaseBusy(DatabaseFault):
    """Another process held the write lock for longer than the busy timeout."""


class DatabaseReadOnly(DatabaseFault):
    """The file, its directory or the mount cannot be written."""


_REPAIR = "`foya verify SESSION --repair` may fix it"


def database_fault(exc: BaseException) -> DatabaseFault | None:
    """The one-line error for an SQLite failure (peewee's or sqlite3's), or None for anything else.

    peewee re-raises a failed ROLLBACK ("no transaction is active": SQLite had already abandoned
    the transaction, e.g. on a full disk) over the real cause; the cause is what is reported."""
    if not isinstance(exc, peewee.DatabaseError | sqlite3.Error):
        return None
    text = str(exc)
    if "no transaction is active" in text and exc.__context__ is not None:
        return database_fault(exc.__context__) or DatabaseFault(f"database error: {exc.__context__}")
    lowered = text.lower()
    if "unique constraint failed: event.session_id, event.seq" in lowered:
        return DatabaseDamaged(
            f"the database is out of step: a session's last_seq is behind its events ({text}); {_REPAIR}"
        )
    if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        return DatabaseDamaged(
            f"the database file is damaged ({text}); restore it from a backup, or copy out what is "
            "readable with `foya export`"
        )
    if "disk is full" in lowered or "database or disk is full" in lowered or "no space" in lowered:
        return DiskFull(f"the disk is full ({text}); nothing of this write was kept: free space and retry")
    if "database is locked" in lowered or "database is busy" in lowered:
        return DatabaseBusy(
            f"the database is locked by another Foya for more than {BUSY_TIMEOUT_MS // 1000} s "
            f"({text}); retry when it has finished"
        )
    if "readonly" in lowered or "read-only" in lowered:
        return DatabaseReadOnly(f"the database cannot be written ({text})")
    if "unable to open" in lowered:
        return DatabaseFault(f"the database cannot be opened ({text})")
    return DatabaseFault(f"database error: {text}")


@dataclass(frozen=True)
class Database:
    """An open database and the table models bound to it."""

    path: Path
    connection: _TrackedSqliteDatabase
    tables: Tables
    read_only: bool = False

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


def _open_failure(path: Path, exc: BaseException) -> FoyaError:
    """Why a database could not be opened: a file that is no database at all is the wrong `--db`
    (StoreError, exit 2); damaged pages, a full disk or a held lock are faults (exit 1)."""
    fault = database_fault(exc)
    if isinstance(fault, DatabaseDamaged) and "not a database" not in str(exc):
        return DatabaseDamaged(f"cannot open database {path}: {fault.message}")
    if isinstance(fault, DiskFull | DatabaseBusy):
        return fault
    return StoreError(f"cannot open database {path}: {exc}")


def _read_only_connection(path: Path, immutable: bool) -> _TrackedSqliteDatabase:
    query = "mode=ro&immutable=1" if immutable else "mode=ro"
    return _TrackedSqliteDatabase(
        f"{path.resolve().as_uri()}?{query}",
        uri=True,
        pragmas={"foreign_keys": 1, "busy_timeout": BUSY_TIMEOUT_MS},
        check_same_thread=False,
    )


def _open_read_only(path: Path) -> Database:
    # `mode=ro`: no write lock is ever taken, so a long import never blocks a read-only command.
    # A WAL database needs its -shm file, which a reader creates when the directory is writable;
    # on a read-only directory or mount it cannot, and nothing else can write there either, so
    # the file is opened as immutable (SQLite then reads it without any locking).
    immutable = not os.access(path.parent, os.W_OK)
    connection = _read_only_connection(path, immutable)
    tables = define_tables(connection)
    try:
        connection.connect(reuse_if_open=True)
        version = int(connection.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0)
    except (peewee.DatabaseError, sqlite3.DatabaseError) as exc:
        connection.close()
        raise _open_failure(path, exc) from None
    if version > SCHEMA_VERSION:
        connection.close()
        raise StoreError(f"{path} uses schema {version}, newer than this Foya understands ({SCHEMA_VERSION})")
    return Database(path=path, connection=connection, tables=tables, read_only=True)


def _stored_version(connection: peewee.SqliteDatabase) -> int | None:
    """The schema version read without a transaction; None when there is no version table yet."""
    try:
        row = connection.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
    except peewee.OperationalError:
        return None
    return int(row[0] or 0)


def open_database(
    path: Path | str, progress: ProgressCallback | None = None, *, read_only: bool = False
) -> Database:
    """Open (creating if needed) a database file and bring its schema up to date; `progress`
    hears how far a migration that indexes existing events has come. `read_only` opens an
    existing, current database without ever taking the write lock (a new or older file is
    created or migrated first, which needs writing once)."""
    path = Path(path)
    if read_only and path.is_file() and not needs_migration(path):
        return _open_read_only(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # lock_type IMMEDIATE: every transaction takes the write lock at BEGIN, so two writers never
    # deadlock upgrading a read lock; busy_timeout makes the second one wait instead.
    connection = _TrackedSqliteDatabase(
        str(path), pragmas=PRAGMAS, lock_type="IMMEDIATE", check_same_thread=False
    )
    tables = define_tables(connection)
    try:
        connection.connect(reuse_if_open=True)
        # A current schema is seen without a transaction: opening never takes the write lock
        # then, so a command waits for another process's write only when it writes itself.
        if _stored_version(connection) == SCHEMA_VERSION:
            return Database(path=path, connection=connection, tables=tables)
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
        raise _open_failure(path, exc) from None
    return Database(path=path, connection=connection, tables=tables)
