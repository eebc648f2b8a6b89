"""Provides the database schema version, a check for whether a file needs migrating, and which
session an id or id prefix names.

Kept apart from `store/` (which imports peewee) so the TUI can ask both before its first frame,
without paying for the store's imports or opening the database: the runtime is opened after it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from foya_tui.errors import InputError

SCHEMA_VERSION = 7
"""The schema this Foya writes; `store/tables.py` has one migration per version up to it."""


def needs_migration(path: Path | str) -> bool:
    """Whether opening this existing database will migrate it (read-only look, nothing written)."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT MAX(version) FROM schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return False  # not a Foya database yet (or unreadable): opening it says why
    return int(row[0] or 0) < SCHEMA_VERSION


class UnknownSessionError(InputError, LookupError):
    """No session matches the given id or id prefix."""


def find_session_id(connection: sqlite3.Connection, id_or_prefix: str) -> str:
    """The id of the session named by its full id or a unique prefix (what `foya` prints is 6
    characters); sessions still being imported do not count. Raises UnknownSessionError."""
    needle = id_or_prefix.strip().lower()
    if not needle or any(ch not in "0123456789abcdef" for ch in needle):
        raise UnknownSessionError(f"no session {id_or_prefix!r}")
    rows = connection.execute(
        "SELECT id FROM session WHERE id >= ? AND id < ? AND complete = 1 ORDER BY id LIMIT 2",
        (needle, needle + "g"),
    ).fetchall()
    if not rows:
        raise UnknownSessionError(f"no session {id_or_prefix!r}")
    if len(rows) > 1:
        raise UnknownSessionError(f"session prefix {id_or_prefix!r} is ambiguous; give more characters")
    return str(rows[0][0])


def session_id_in(path: Path | str, id_or_prefix: str) -> str | None:
    """`find_session_id` in the database at `path`, read-only, without opening the store (nothing is
    written or migrated). None when this cannot tell: a file that is not a current Foya database,
    or one SQLite cannot read now; opening the store then says what is wrong. Raises
    UnknownSessionError when there is no database or no such session in it."""
    path = Path(path)
    if not path.is_file():
        raise UnknownSessionError(f"no session {id_or_prefix!r}")
    if needs_migration(path):
        return None
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return find_session_id(connection, id_or_prefix)
        finally:
            connection.close()
    except sqlite3.Error:
        return None
