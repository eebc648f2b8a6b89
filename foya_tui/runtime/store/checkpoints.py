"""Provides the compaction store: checkpoint rows (the fast projection), accepted boundaries and
failure fingerprints, and the one transaction that commits a checkpoint (SPEC P-1..P-5, C-13, C-14).

Checkpoint rows are copies of what `compaction_completed` events hold: a damaged row is rebuilt
from its event and an invalid one deleted (P-3); events themselves are never touched (H-2).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from foya_tui.runtime.model import Event, EventKind, NewEvent
from foya_tui.runtime.store import chain
from foya_tui.runtime.store.chain import MESSAGE_KINDS
from foya_tui.runtime.store.db import Database
from foya_tui.runtime.store.events import EventStore, decode_event

CONTROL_KINDS = (
    str(EventKind.COMPACTION_COMPLETED),
    str(EventKind.COMPACTION_UNDONE),
    str(EventKind.REWIND),
)


@dataclass(frozen=True)
class StoredCheckpoint:
    """A checkpoint row: its id, the seq of its completion event, and the serialised checkpoint."""

    id: str
    event_seq: int
    body: str


@dataclass(frozen=True)
class AcceptedBoundary:
    """The last request a route accepted in a session (SPEC C-13)."""

    route_id: str
    through_seq: int
    input_tokens: int | None
    output_tokens: int | None
    payload_bytes: int
    recorded_at: str


@dataclass(frozen=True)
class Fingerprint:
    """A deterministic compaction failure: equivalent attempts are suppressed (SPEC C-14)."""

    fingerprint: str
    reason: str
    recorded_at: str


class CompactionStore:
    """Compaction state of every session in one database."""

    def __init__(self, database: Database, events: EventStore) -> None:
        self._sql = database.connection
        self._events = events
        # Opened read-only (a read-only mount): a rebuilt or dropped fast projection is used for
        # this read only, and the next command that can write persists the repair (SPEC P-3).
        self._read_only = database.read_only

    def _now(self) -> str:
        return self._events.timestamp()

    # -- checkpoints ----------------------------------------------------------------------

    def commit(
        self,
        session_id: str,
        checkpoint_id: str,
        body: str,
        events: Sequence[NewEvent],
        check: Callable[[], None],
    ) -> list[Event]:
        """Append the completion event (first of `events`) and its diagnostic, store the checkpoint
        row and clear the session's fingerprints, all in one transaction (SPEC P-1, C-14).

        `check` runs inside the transaction, after the write lock is taken: it re-reads the state
        the candidate was accepted against and raises to abort (nothing is then written).
        """
        with self._sql.atomic():
            check()
            appended = self._events.append_locked(session_id, events)
            self._sql.execute_sql(
                "INSERT OR REPLACE INTO checkpoint (session_id, id, event_seq, body) VALUES (?, ?, ?, ?)",
                (session_id, checkpoint_id, appended[0].seq, body),
            )
            self._sql.execute_sql("DELETE FROM compaction_fingerprint WHERE session_id = ?", (session_id,))
        return appended

    def append_checked(
        self, session_id: str, events: Sequence[NewEvent], check: Callable[[], None]
    ) -> list[Event]:
        """Append events after `check` passes, both inside one transaction (undo of a compaction)."""
        with self._sql.atomic():
            check()
            return self._events.append_locked(session_id, events)

    def row(self, session_id: str, checkpoint_id: str) -> StoredCheckpoint | None:
        found = self._sql.execute_sql(
            "SELECT id, event_seq, body FROM checkpoint WHERE session_id = ? AND id = ?",
            (session_id, checkpoint_id),
        ).fetchone()
        return StoredCheckpoint(*found) if found is not None else None

    def row_for_event(self, session_id: str, event_seq: int) -> StoredCheckpoint | None:
        """The row copied from the completion event at `event_seq` (found even if its id was damaged)."""
        found = self._sql.execute_sql(
            "SELECT id, event_seq, body FROM checkpoint WHERE session_id = ? AND event_seq = ?",
            (session_id, event_seq),
        ).fetchone()
        return StoredCheckpoint(*found) if found is not None else None

    def rows(self, session_id: str) -> list[StoredCheckpoint]:
        cursor = self._sql.execute_sql(
            "SELECT id, event_seq, body FROM checkpoint WHERE session_id = ? ORDER BY event_seq",
            (session_id,),
        )
        return [StoredCheckpoint(*found) for found in cursor]

    def put_row(self, session_id: str, row: StoredCheckpoint) -> None:
        """Rebuild a checkpoint row from its completion event (SPEC P-3)."""
        if self._read_only:
            return
        with self._sql.atomic():
            self._sql.execute_sql(
                "INSERT OR REPLACE INTO checkpoint (session_id, id, event_seq, body) VALUES (?, ?, ?, ?)",
                (session_id, row.id, row.event_seq, row.body),
            )

    def delete_row(self, session_id: str, checkpoint_id: str) -> None:
        """Drop an invalid fast projection (SPEC P-3); canonical history keeps its event."""
        if self._read_only:
            return
        with self._sql.atomic():
            self._sql.execute_sql(
                "DELETE FROM checkpoint WHERE session_id = ? AND id = ?", (session_id, checkpoint_id)
            )

    def control_events(self, session_id: str) -> list[Event]:
        """The events that decide which checkpoint is current: completions, undos and rewinds."""
        return self._kind_events(session_id, CONTROL_KINDS)

    def last_control_seq(self, session_id: str) -> int:
        """The newest completion, undo or rewind seq (0 if none): what lineage checks compare."""
        # One indexed lookup per kind: with `kind IN (…)` SQLite walks the session's whole log.
        newest = 0
        for kind in CONTROL_KINDS:
            found = self._sql.execute_sql(
                "SELECT MAX(seq) FROM event WHERE session_id = ? AND kind = ?", (session_id, kind)
            ).fetchone()
            newest = max(newest, int(found[0] or 0))
        return newest

    def diagnostics(self, session_id: str) -> list[Event]:
        return self._kind_events(session_id, (str(EventKind.COMPACTION_DIAGNOSTIC),))

    def _kind_events(self, session_id: str, kinds: Sequence[str]) -> list[Event]:
        """The session's events of these kinds in seq order. One query per kind, each a range of the
        (session, kind, seq) index: with `kind IN (…) ORDER BY seq` SQLite chose the (session, seq)
        index and read every event of the session (0.5 s at 100,000 events, on every re-read)."""
        rows = []
        for kind in kinds:
            rows.append(
                self._sql.execute_sql(
                    "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? AND kind = ? "
                    "ORDER BY seq",
                    (session_id, kind),
                ).fetchall()
            )
        merged = heapq.merge(*rows, key=lambda found: int(found[0]))
        return [decode_event(session_id, *found) for found in merged]

    def source_digest(self, session_id: str, through_seq: int) -> str:
        """Digest of the valid message events 1..through_seq exactly as stored (SPEC C-5, P-2): the
        running digest stored with the newest valid event up to there (store/chain.py), so it costs
        one indexed lookup (plus the session's rewinds) at any length of history."""
        return chain.source_digest(self._sql, session_id, through_seq)

    def unchained_source_digest(self, session_id: str, through_seq: int) -> str:
        """The source digest as checkpoints made before schema 6 computed it: one SHA-256 over the
        valid message events' stored text (a pass over the prefix). Such a checkpoint's digest is
        compared with this when it does not match the running one (`view/recovery.py`).

        Stored rows are immutable, so hashing their text (not a re-encoding) is exact; events a
        rewind invalidated are left out, so a rewind changes the digest.
        """
        cut = [
            (to_seq, rewind.seq)
            for rewind in self._kind_events(session_id, (str(EventKind.REWIND),))
            if rewind.problem is None and isinstance(to_seq := rewind.payload.get("to_seq"), int)
        ]
        marks = ", ".join("?" for _ in MESSAGE_KINDS)
        cursor = self._sql.execute_sql(
            f"SELECT seq, kind, payload FROM event WHERE session_id = ? AND seq <= ? AND kind IN ({marks}) "
            "ORDER BY seq",
            (session_id, through_seq, *MESSAGE_KINDS),
        )
        digest = hashlib.sha256()
        for seq, kind, payload in cursor:
            if any(to_seq < seq < rewind_seq for to_seq, rewind_seq in cut):
                continue
            digest.update(f"{seq}\t{kind}\t".encode())
            digest.update(payload.encode("utf-8", "surrogatepass"))
            digest.update(b"\n")
        return digest.hexdigest()

    # -- accepted boundaries (C-13) -------------------------------------------------------

    def record_boundary(
        self,
        session_id: str,
        route_id: str,
        through_seq: int,
        input_tokens: int | None,
        output_tokens: int | None,
        payload_bytes: int,
    ) -> None:
        with self._sql.atomic():
            self._sql.execute_sql(
                "INSERT OR REPLACE INTO accepted_boundary (session_id, route_id, through_seq, input_tokens, "
                "output_tokens, payload_bytes, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, route_id, through_seq, input_tokens, output_tokens, payload_bytes, self._now()),
            )

    def boundary(self, session_id: str, route_id: str) -> AcceptedBoundary | None:
        found = self._sql.execute_sql(
            "SELECT route_id, through_seq, input_tokens, output_tokens, payload_bytes, recorded_at "
            "FROM accepted_boundary WHERE session_id = ? AND route_id = ?",
            (session_id, route_id),
        ).fetchone()
        return AcceptedBoundary(*found) if found is not None else None

    def boundaries(self, session_id: str) -> list[AcceptedBoundary]:
        cursor = self._sql.execute_sql(
            "SELECT route_id, through_seq, input_tokens, output_tokens, payload_bytes, recorded_at "
            "FROM accepted_boundary WHERE session_id = ? ORDER BY route_id",
            (session_id,),
        )
        return [AcceptedBoundary(*found) for found in cursor]

    # -- failure fingerprints (C-14) ------------------------------------------------------

    def fingerprints(self, session_id: str) -> list[Fingerprint]:
        cursor = self._sql.execute_sql(
            "SELECT fingerprint, reason, recorded_at FROM compaction_fingerprint WHERE session_id = ? "
            "ORDER BY recorded_at, fingerprint",
            (session_id,),
        )
        return [Fingerprint(*found) for found in cursor]

    def add_fingerprint(self, session_id: str, fingerprint: str, reason: str, limit: int) -> None:
        """Remember a deterministic failure, keeping the newest `limit` per session."""
        with self._sql.atomic():
            self._sql.execute_sql(
                "INSERT OR REPLACE INTO compaction_fingerprint "
                "(session_id, fingerprint, reason, recorded_at) VALUES (?, ?, ?, ?)",
                (session_id, fingerprint, reason, self._now()),
            )
            self._sql.execute_sql(
                "DELETE FROM compaction_fingerprint WHERE session_id = ? AND fingerprint NOT IN ("
                " SELECT fingerprint FROM compaction_fingerprint WHERE session_id = ?"
                " ORDER BY recorded_at DESC, fingerprint DESC LIMIT ?)",
                (session_id, session_id, limit),
            )
