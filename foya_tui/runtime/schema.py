"""Provides the database schema version and a check for whether a file needs migrating.

Kept apart from `store/` (which imports peewee) so the TUI can ask before its first frame whether
opening the database will migrate it, without paying for the store's imports.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
