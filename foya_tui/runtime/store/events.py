"""Provides the append-only event store: sessions and their canonical history (SPEC H-1..H-5).

Appends use raw SQL inside peewee transactions: the hot path runs once per event, and the ORM's
query building would cost more than SQLite's own work (see `tests/bench/bench_store.py`).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import peewee

from foya_tui.runtime.model import Event, EventKind, NewArtifact, NewEvent, SessionInfo
from foya_tui.runtime.schema import UnknownSessionError as UnknownSessionError  # re-exported
from foya_tui.runtime.schema import find_session_id
from foya_tui.runtime.store.artifacts import insert_artifacts, read_artifact
from foya_tui.runtime.store.chain import append_chains
from foya_tui.runtime.store.db import BUSY_TIMEOUT_MS, Database
from foya_tui.runtime.store.search import BATCH_PAUSE_SECONDS, SearchHit, index_events_guarded, search
from foya_tui.runtime.store.sessions import SessionStats, delete_session_rows, session_stats

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _timestamp(clock: Clock) -> str:
    return clock().astimezone(UTC).isoformat(timespec="microseconds")


def _encode_payload(payload: Mapping[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (e.g. bytes decoded with surrogateescape) cannot be stored as UTF-8;
        # ASCII-escaped JSON keeps every code point, so nothing is lost.
        text = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    return text


_KINDS: dict[str, EventKind] = {kind.value: kind for kind in EventKind}
_decode_json = json.JSONDecoder().decode


def decode_event(session_id: str, seq: int, kind: str, payload: str, created_at: str) -> Event:
    """Turn a stored row into an Event; a corrupt row becomes an Event with `problem` set.

    The raw kind and payload text are kept in the payload, so exporting a corrupt row loses nothing.
    This runs once per event read (10,000 for a long session), hence the plain dict lookups.
    """
    event_kind = _KINDS.get(kind)
    problem: str | None
    try:
        decoded = _decode_json(payload)
    except ValueError as exc:
        decoded, problem = None, f"payload is not valid JSON ({exc})"
    else:
        problem = None if isinstance(decoded, dict) else "payload is not a JSON object"
    if event_kind is None:
        problem = problem or f"unknown event kind {kind!r}"
    if problem is not None or event_kind is None:  # (the second is implied; it narrows event_kind)
        return Event(
            session_id=session_id,
            seq=seq,
            kind=event_kind or EventKind.USER_MESSAGE,
            payload={"raw_kind": kind, "raw_payload": payload},
            created_at=created_at,
            problem=f"unreadable event row ({problem})",
        )
    return Event(session_id, seq, event_kind, decoded, created_at)  # positional: cheaper, per row


IMPORT_BATCH_EVENTS = 1_000
"""Events per transaction of a large import: a concurrent writer waits at most one batch."""


_SESSION_COLUMNS = (
    "s.id, s.title, s.created_at, s.updated_at, s.workspace, s.metadata, "
    "(SELECT COUNT(*) FROM event e WHERE e.session_id = s.id)"
)


class EventStore:
    """Sessions and their immutable event logs in one SQLite database."""

    def __init__(self, database: Database, clock: Clock = utc_now, *, search_index: bool = True) -> None:
        """`search_index=False` skips the full-text index on append (benchmarks only: searches then
        miss what was appended)."""
        self._db = database
        self._sql = database.connection
        self._clock = clock
        self._search_index = search_index
        self.events_decoded = 0
        """Event rows this store has decoded so far: what tests count to prove a read path leaves
        history it does not need unread (never a timing)."""

    def _decoded(self, session_id: str, rows: Iterable[Sequence[Any]]) -> list[Event]:
        events = [decode_event(session_id, seq, kind, payload, at) for seq, kind, payload, at in rows]
        self.events_decoded += len(events)
        return events

    @property
    def path(self) -> str:
        return str(self._db.path)

    # -- sessions -------------------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str = "",
        workspace: str = "",
        metadata: Mapping[str, Any] | None = None,
        events: Sequence[NewEvent] = (),
        artifacts: Sequence[NewArtifact] = (),
    ) -> SessionInfo:
        """Create a session, optionally with its first events and their artifacts, in one transaction."""
        session_id = uuid.uuid4().hex
        now = _timestamp(self._clock)
        with self._sql.atomic():
            self._insert_session(session_id, title, workspace, metadata, now, complete=True)
            insert_artifacts(self._sql, session_id, artifacts, now)
            if events:
                self.append_locked(session_id, events, now)
        return self.get_session(session_id)

    def _insert_session(
        self,
        session_id: str,
        title: str,
        workspace: str,
        metadata: Mapping[str, Any] | None,
        now: str,
        *,
        complete: bool,
    ) -> None:
        self._sql.execute_sql(
            "INSERT INTO session (id, title, workspace, metadata, created_at, updated_at, last_seq, "
            "complete) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
            (session_id, title, workspace, _encode_payload(metadata or {}), now, now, int(complete)),
        )

    def create_session_in_batches(
        self,
        *,
        title: str = "",
        workspace: str = "",
        metadata: Mapping[str, Any] | None = None,
        events: Iterable[NewEvent] = (),
        total: int | None = None,
        artifacts: Sequence[NewArtifact] = (),
        batch_events: int = IMPORT_BATCH_EVENTS,
        progress: Callable[[int, int], None] | None = None,
        index_progress: Callable[[int, int], None] | None = None,
    ) -> SessionInfo:
        """Create a session whose events commit in bounded transactions (a large import), so a
        concurrent writer never waits for the whole import, only for one batch, and memory holds
        one batch at a time (`events` may be an iterator; `total` is then its length, for progress).

        The session is created incomplete (`complete = 0`): invisible to `sessions`, lookups and
        resumes until its last transaction marks it complete. The rows commit first; the full-text
        index is then written from them in batches of its own (indexing is most of an import's
        work, and done apart it never lengthens a row batch); the last index batch marks the
        session complete. A crash mid-import thus leaves no half-imported session in view (its
        rows stay, unreachable: history is never deleted). `progress` hears (events written, events
        in all) after each row batch, `index_progress` (events indexed, events in all) after each
        index batch."""
        source = iter(events)
        first = list(itertools.islice(source, batch_events + 1))
        if len(first) <= batch_events:
            return self.create_session(
                title=title, workspace=workspace, metadata=metadata, events=first, artifacts=artifacts
            )
        count = total if total is not None else len(events) if isinstance(events, Sequence) else 0
        session_id = uuid.uuid4().hex
        now = _timestamp(self._clock)
        with self._sql.atomic():
            self._insert_session(session_id, title, workspace, metadata, now, complete=False)
            insert_artifacts(self._sql, session_id, artifacts, now)
        written = 0
        batches: list[tuple[int, int, int]] = []
        """(after seq, through seq, first event id) of each batch: what the index pass re-reads."""
        source = itertools.chain(first, source)
        pending = list(itertools.islice(source, batch_events))
        while pending:
            with self._sql.atomic():
                appended = self.append_locked(session_id, pending, now, index=False)
                last_id = self._sql.execute_sql("SELECT last_insert_rowid()").fetchone()[0]
            batches.append((appended[0].seq - 1, appended[-1].seq, last_id - len(appended) + 1))
            written += len(appended)
            count = max(count, written)
            if progress is not None:
                progress(written, count)
            pending = list(itertools.islice(source, batch_events))
            time.sleep(BATCH_PAUSE_SECONDS)
        indexed = 0
        for position, (after, through, first_id) in enumerate(batches):
            with self._sql.atomic():
                if self._search_index:
                    # Read back from the rows just written: one batch in memory, never the import.
                    rows = self.events(session_id, after, through)
                    index_events_guarded(self._sql, session_id, rows, first_id)
                if position == len(batches) - 1:
                    self._sql.execute_sql("UPDATE session SET complete = 1 WHERE id = ?", (session_id,))
            indexed += through - after
            if index_progress is not None and self._search_index:
                index_progress(indexed, written)
            if position < len(batches) - 1:
                time.sleep(BATCH_PAUSE_SECONDS)
        return self.get_session(session_id)

    def _session_from_row(self, row: Sequence[Any]) -> SessionInfo:
        try:
            metadata = json.loads(row[5]) if row[5] else {}
        except ValueError:
            metadata = {}
        return SessionInfo(
            id=row[0],
            title=row[1],
            created_at=row[2],
            updated_at=row[3],
            workspace=row[4],
            metadata=metadata if isinstance(metadata, dict) else {},
            event_count=int(row[6]),
        )

    def get_session(self, session_id: str) -> SessionInfo:
        row = self._sql.execute_sql(
            f"SELECT {_SESSION_COLUMNS} FROM session s WHERE s.id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        return self._session_from_row(row)

    def find_session(self, id_or_prefix: str) -> SessionInfo:
        """Find a session by full id or unique prefix (what `foya` prints is 6 characters)."""
        return self.get_session(find_session_id(self._sql.connection(), id_or_prefix))

    def list_sessions(self, limit: int | None = None) -> list[SessionInfo]:
        sql = (
            f"SELECT {_SESSION_COLUMNS} FROM session s WHERE s.complete = 1 ORDER BY s.updated_at DESC, s.id"
        )
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        return [self._session_from_row(row) for row in self._sql.execute_sql(sql, params).fetchall()]

    def set_title(self, session_id: str, title: str) -> None:
        with self._sql.atomic():
            cursor = self._sql.execute_sql("UPDATE session SET title = ? WHERE id = ?", (title, session_id))
            if cursor.rowcount == 0:
                raise UnknownSessionError(f"no session {session_id!r}")

    def session_stats(self) -> dict[str, SessionStats]:
        """Every session's counts, size, last model and last failed turn, by id (the browser's)."""
        return session_stats(self._sql)

    def delete_session(self, session_id: str) -> int:
        """Delete a session whole in one transaction: its events, checkpoints, artifacts, search
        index rows and every other row kept for it (raises UnknownSessionError); returns how many
        events went. The caller holds the session's lease."""
        self.get_session(session_id)
        return delete_session_rows(self._sql, session_id)

    # -- events ---------------------------------------------------------------------------

    def append(
        self, session_id: str, events: Iterable[NewEvent], artifacts: Sequence[NewArtifact] = ()
    ) -> list[Event]:
        """Append events (and the artifacts they reference) atomically (SPEC H-5): all get
        consecutive seqs, or nothing is written."""
        batch = list(events)
        if not batch:
            return []
        now = _timestamp(self._clock)
        with self._sql.atomic():
            insert_artifacts(self._sql, session_id, artifacts, now)
            return self.append_locked(session_id, batch, now)

    def artifact(self, session_id: str, sha256: str) -> bytes | None:
        """An artifact's bytes, or None when it is missing."""
        return read_artifact(self._sql, session_id, sha256)

    def timestamp(self) -> str:
        """Now, as the store writes times (ISO 8601, UTC, from the store's clock)."""
        return _timestamp(self._clock)

    def now(self) -> datetime:
        """Now, from the store's clock (tests fix it; micro-compaction's cache clock reads it)."""
        return self._clock()

    def append_locked(
        self, session_id: str, batch: Sequence[NewEvent], now: str | None = None, *, index: bool = True
    ) -> list[Event]:
        """Append inside a transaction the caller holds (the compaction store's commit: SPEC P-1).
        `index=False` leaves the full-text index to the caller (a batched import writes it after)."""
        now = now or _timestamp(self._clock)
        row = self._sql.execute_sql("SELECT last_seq FROM session WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        seq = int(row[0])
        rows = []
        appended = []
        for new in batch:
            seq += 1
            payload = _encode_payload(new.payload)
            rows.append((session_id, seq, str(new.kind), payload, now))
            appended.append(
                Event(session_id=session_id, seq=seq, kind=new.kind, payload=new.payload, created_at=now)
            )
        cursor = self._sql.cursor()
        cursor.executemany(
            "INSERT INTO event (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)", rows
        )
        # The running digests commit with their events (SPEC H-5): a prefix's source digest is then
        # one lookup, never a pass over history (store/chain.py).
        append_chains(self._sql, session_id, [(seq, kind, payload) for _, seq, kind, payload, _ in rows])
        if self._search_index and index:
            # One executemany inside our write transaction: the ids are consecutive, ending here.
            last_id = self._sql.execute_sql("SELECT last_insert_rowid()").fetchone()[0]
            index_events_guarded(self._sql, session_id, appended, last_id - len(appended) + 1)
        self._sql.execute_sql(
            "UPDATE session SET last_seq = ?, updated_at = ? WHERE id = ?", (seq, now, session_id)
        )
        return appended

    def events(self, session_id: str, after_seq: int = 0, through_seq: int | None = None) -> list[Event]:
        """The session's canonical history in seq order (from `after_seq`, exclusive, up to
        `through_seq`, inclusive)."""
        sql = "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND seq > ?"
        params: list[Any] = [session_id, after_seq]
        if through_seq is not None:
            sql += " AND seq <= ?"
            params.append(through_seq)
        return self._decoded(session_id, self._sql.execute_sql(sql + " ORDER BY seq", params))

    def iter_events(
        self, session_id: str, after_seq: int = 0, *, batch: int = IMPORT_BATCH_EVENTS
    ) -> Iterator[Event]:
        """The session's history from `after_seq` (exclusive) as it stands when this is called, read
        in batches of `batch` events: memory holds one batch, never the log (export, verify). Events
        appended meanwhile are left out, so the result is one moment's history, like `events`."""
        # The newest stored event, not the session's `last_seq`: `foya verify` reads every row,
        # also those a damaged `last_seq` is behind.
        row = self._sql.execute_sql(
            "SELECT COALESCE(MAX(seq), 0) FROM event WHERE session_id = ?", (session_id,)
        ).fetchone()
        through = int(row[0])
        cursor = after_seq
        while cursor < through:
            upto = min(cursor + batch, through)
            yield from self.events(session_id, cursor, upto)
            cursor = upto

    def events_before(self, session_id: str, before_seq: int | None, limit: int) -> list[Event]:
        """The newest `limit` events before `before_seq` (None: the end), in seq order: one indexed
        range read backwards, not the log before it."""
        sql = "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ?"
        params: list[Any] = [session_id]
        if before_seq is not None:
            sql += " AND seq < ?"
            params.append(before_seq)
        rows = self._sql.execute_sql(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit]).fetchall()
        return self._decoded(session_id, reversed(rows))

    def events_after(self, session_id: str, after_seq: int, limit: int) -> list[Event]:
        """The first `limit` events after `after_seq`, in seq order (one indexed range read)."""
        rows = self._sql.execute_sql(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (session_id, after_seq, limit),
        ).fetchall()
        return self._decoded(session_id, rows)

    def events_of_kind(self, session_id: str, kind: EventKind) -> list[Event]:
        """Every event of one kind, in seq order (read on the kind index, not the whole log)."""
        rows = self._sql.execute_sql(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND kind = ? ORDER BY seq",
            (session_id, str(kind)),
        ).fetchall()
        return self._decoded(session_id, rows)

    def events_of_kinds(
        self, session_id: str, kinds: Iterable[EventKind], through_seq: int | None = None
    ) -> list[Event]:
        """Every event of some kinds up to `through_seq` (inclusive), in seq order: read on the kind
        index, so the messages between them are never decoded."""
        names = sorted(str(kind) for kind in kinds)
        if not names:
            return []
        sql = (
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? "
            f"AND kind IN ({', '.join('?' * len(names))})"
        )
        params: list[Any] = [session_id, *names]
        if through_seq is not None:
            sql += " AND seq <= ?"
            params.append(through_seq)
        return self._decoded(session_id, self._sql.execute_sql(sql + " ORDER BY seq", params).fetchall())

    def events_at(self, session_id: str, seqs: Iterable[int]) -> list[Event]:
        """The events at these seqs (those that exist), in seq order: one indexed row each."""
        wanted = sorted(set(seqs))
        events: list[Event] = []
        for start in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            chunk = wanted[start : start + 500]
            rows = self._sql.execute_sql(
                "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? "
                f"AND seq IN ({', '.join('?' * len(chunk))}) ORDER BY seq",
                [session_id, *chunk],
            ).fetchall()
            events += self._decoded(session_id, rows)
        return events

    def event(self, session_id: str, seq: int) -> Event | None:
        """One event by seq (one indexed row, not the log after it)."""
        row = self._sql.execute_sql(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND seq = ?",
            (session_id, seq),
        ).fetchone()
        return self._decoded(session_id, [row])[0] if row is not None else None

    def rewinds_after(self, session_id: str, seq: int) -> list[Event]:
        """The rewind events after a seq: all that can have invalidated it (SPEC H-4)."""
        rows = self._sql.execute_sql(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND seq > ? AND kind = ? "
            "ORDER BY seq",
            (session_id, seq, str(EventKind.REWIND)),
        ).fetchall()
        return self._decoded(session_id, rows)

    def last_event(self, session_id: str, kind: EventKind) -> Event | None:
        """The newest event of a kind (walks the log backwards on its index, not the whole log)."""
        row = self._sql.execute_sql(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND kind = ? "
            "ORDER BY seq DESC LIMIT 1",
            (session_id, str(kind)),
        ).fetchone()
        return self._decoded(session_id, [row])[0] if row is not None else None

    def search(
        self,
        session_id: str,
        query: str,
        *,
        from_seq: int | None = None,
        through_seq: int | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Valid events of a session matching `query` (raises SearchError), newest first."""
        return search(self._sql, session_id, query, from_seq=from_seq, through_seq=through_seq, limit=limit)

    # -- persisted token counts (schema 7) -------------------------------------------------

    def token_counts(self, session_id: str, counter: str, after_seq: int = 0) -> dict[int, int]:
        """The persisted token counts of a session's message events under one tokenizer key
        (`tokens.stored_count_key`), by seq, after `after_seq` (one range of the primary key)."""
        cursor = self._sql.execute_sql(
            "SELECT seq, tokens FROM event_tokens WHERE session_id = ? AND counter = ? AND seq > ?",
            (session_id, counter, after_seq),
        )
        return {int(seq): int(tokens) for seq, tokens in cursor}

    def put_token_counts(self, session_id: str, counter: str, counts: Sequence[tuple[int, int]]) -> bool:
        """Persist (seq, tokens) counts made for the first time; False when they could not be written
        now (a read-only database, or another process holding the write lock: a count is derived
        data, so this never waits for the lock and never fails the caller)."""
        if not counts or self._db.read_only:
            return False
        raw = self._sql.connection()
        raw.execute("PRAGMA busy_timeout = 0")
        try:
            with self._sql.atomic():
                self._sql.cursor().executemany(
                    "INSERT OR IGNORE INTO event_tokens (session_id, counter, seq, tokens) "
                    "VALUES (?, ?, ?, ?)",
                    [(session_id, counter, seq, tokens) for seq, tokens in counts],
                )
        except (peewee.DatabaseError, sqlite3.DatabaseError):
            return False
        finally:
            raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return True

    def token_count_keys(self, session_id: str) -> list[str]:
        """The tokenizer keys a session has persisted counts under."""
        cursor = self._sql.execute_sql(
            "SELECT DISTINCT counter FROM event_tokens WHERE session_id = ? ORDER BY counter", (session_id,)
        )
        return [str(row[0]) for row in cursor]

    def drop_token_counts(self, session_id: str, counter: str, seqs: Sequence[int]) -> None:
        """Delete persisted counts (found wrong by `foya verify`): the next compile counts them again."""
        with self._sql.atomic():
            self._sql.cursor().executemany(
                "DELETE FROM event_tokens WHERE session_id = ? AND counter = ? AND seq = ?",
                [(session_id, counter, seq) for seq in seqs],
            )

    def last_seq(self, session_id: str) -> int:
        row = self._sql.execute_sql("SELECT last_seq FROM session WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        return int(row[0])
