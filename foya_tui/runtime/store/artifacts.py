"""Provides the per-session artifact store: image bytes kept beside the log, addressed by SHA-256.

Events never hold bytes (SPEC H-3); they hold `AttachmentRef`s, and bytes are read only when a
request is materialised (SPEC I-1). Artifacts are written in the same transaction as the events
that reference them.
"""

from __future__ import annotations

from collections.abc import Iterable

import peewee

from foya_tui.runtime.model import NewArtifact


def insert_artifacts(
    sql: peewee.SqliteDatabase, session_id: str, artifacts: Iterable[NewArtifact], now: str
) -> None:
    """Store artifacts (inside the caller's transaction); identical bytes are stored once."""
    rows = [(session_id, a.ref.sha256, a.mime, len(a.data), a.data, now) for a in artifacts]
    if rows:
        sql.cursor().executemany(
            "INSERT OR IGNORE INTO artifact (session_id, sha256, mime, size, data, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )


def read_artifact(sql: peewee.SqliteDatabase, session_id: str, sha256: str) -> bytes | None:
    row = sql.execute_sql(
        "SELECT data FROM artifact WHERE session_id = ? AND sha256 = ?", (session_id, sha256)
    ).fetchone()
    return bytes(row[0]) if row is not None else None
