"""Provides the compaction reports read from the store: `foya inspect` (checkpoints, segments,
diagnostics, fingerprints, accepted boundaries, rewound ranges) and `foya verify` (everything
re-validated). The TUI's inspector shows the same report: nothing is computed twice on screen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from foya_tui.runtime.compaction.failures import BreakerState
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.store import AcceptedBoundary, CompactionStore, EventStore, Fingerprint
from foya_tui.runtime.view.checkpoint import Checkpoint
from foya_tui.runtime.view.recovery import CheckpointReader, CheckpointRecord


@dataclass(frozen=True)
class DiagnosticRecord:
    seq: int
    created_at: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class RewoundRange:
    """Events a rewind invalidated: after `to_seq`, before the rewind event itself (SPEC H-4)."""

    rewind_seq: int
    to_seq: int

    @property
    def first_seq(self) -> int:
        return self.to_seq + 1

    @property
    def last_seq(self) -> int:
        return self.rewind_seq - 1


@dataclass(frozen=True)
class InspectReport:
    session_id: str
    records: tuple[CheckpointRecord, ...]
    current_id: str | None
    diagnostics: tuple[DiagnosticRecord, ...]
    fingerprints: tuple[Fingerprint, ...]
    boundaries: tuple[AcceptedBoundary, ...]
    rewound: tuple[RewoundRange, ...]
    notices: tuple[str, ...]

    lineage: tuple[str, ...] = ()
    """Ids of the usable checkpoints after the last rewind, oldest first."""
    breaker: BreakerState | None = None
    """The circuit breaker of this (workspace, session) (SPEC K-11)."""
    native_state_bytes: Mapping[str, int] = field(default_factory=dict)
    """Each native checkpoint's state size by checkpoint id, measured when the report is read (a
    native state may be megabytes: the faces never serialise it again)."""

    def status(self, record: CheckpointRecord) -> str:
        """`current`, `earlier` (superseded, can be made current by undo), `undone` (newer than the
        current one, made non-current by an undo), `voided` (before a rewind: P-6) or `invalid`."""
        if record.id == self.current_id:
            return "current"
        if not record.usable and record.problem is not None and "voided" in record.problem:
            return "voided"
        if record.checkpoint is None:
            return "invalid"
        if record.id in self.lineage and (
            self.current_id is None
            or self.current_id not in self.lineage
            or self.lineage.index(record.id) > self.lineage.index(self.current_id)
        ):
            return "undone"
        return "earlier"

    def native_state_size(self, record: CheckpointRecord) -> int | None:
        """The serialised size of a provider-native checkpoint's state, in bytes (None otherwise)."""
        return self.native_state_bytes.get(record.id)


def inspect_session(
    session_id: str,
    events: EventStore,
    compaction: CompactionStore,
    reader: CheckpointReader,
    breaker: BreakerState | None = None,
) -> InspectReport:
    """Everything compaction knows about a session, re-validated, without changing the store."""
    state = reader.state(session_id, repair=False)
    rewinds = [
        RewoundRange(event.seq, to_seq)
        for event in compaction.control_events(session_id)
        if event.kind is EventKind.REWIND
        and event.problem is None
        and isinstance(to_seq := event.payload.get("to_seq"), int)
        and to_seq < event.seq - 1
    ]
    records = tuple(reader.all_records(session_id))
    return InspectReport(
        session_id=session_id,
        records=records,
        current_id=state.current.id if state.current is not None else None,
        diagnostics=tuple(
            DiagnosticRecord(event.seq, event.created_at, event.payload)
            for event in compaction.diagnostics(session_id)
            if event.problem is None
        ),
        fingerprints=tuple(compaction.fingerprints(session_id)),
        boundaries=tuple(compaction.boundaries(session_id)),
        rewound=tuple(rewinds),
        notices=state.notices,
        lineage=state.lineage,
        breaker=breaker,
        native_state_bytes={
            record.id: native_state_bytes(record.checkpoint.native_state)
            for record in records
            if record.checkpoint is not None and record.checkpoint.native_state is not None
        },
    )


def native_state_bytes(state: object) -> int:
    """The size of a native state as stored: compact JSON, UTF-8."""
    return len(json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


@dataclass(frozen=True)
class VerifyReport:
    session_id: str
    events_checked: int
    checkpoints_checked: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        head = (
            f"session {self.session_id[:12]}: {self.events_checked:,} events, "
            f"{self.checkpoints_checked} checkpoint(s) checked"
        )
        if self.ok:
            return [f"{head}: no problems"]
        return [f"{head}: {len(self.problems)} problem(s)", *(f"- {problem}" for problem in self.problems)]


def verify_session(
    session_id: str,
    events: EventStore,
    compaction: CompactionStore,
    reader: CheckpointReader,
    max_fingerprints: int,
) -> VerifyReport:
    """Re-validate a session's store and checkpoints (SPEC P-2); every problem is listed."""
    problems: list[str] = []
    checked = 0
    last_rewind = 0
    # Streamed in batches: memory holds one batch, never the session's history.
    for event in events.iter_events(session_id):
        checked += 1
        if event.problem is not None:
            problems.append(f"event {event.seq}: {event.problem}")
        elif event.kind is EventKind.REWIND:
            last_rewind = event.seq
    records = reader.all_records(session_id)
    for record in records:
        if record.problem is not None and record.event_seq > last_rewind:
            problems.append(f"checkpoint {record.id[:12]} (event {record.event_seq}): {record.problem}")
    completion_ids = {record.id for record in records}
    for row in compaction.rows(session_id):
        if row.id not in completion_ids:
            problems.append(f"checkpoint row {row.id[:12]} has no completion event")
    fingerprints: Sequence[Fingerprint] = compaction.fingerprints(session_id)
    if len(fingerprints) > max_fingerprints:
        problems.append(f"{len(fingerprints)} failure fingerprints, more than {max_fingerprints}")  # C-14
    return VerifyReport(session_id, checked, len(records), tuple(problems))


@dataclass(frozen=True)
class CoveredBy:
    """The checkpoint segment that summarises an event for the model."""

    checkpoint_id: str
    segment: int
    from_seq: int
    through_seq: int


@dataclass(frozen=True)
class RecallHit:
    """A search hit in canonical history, and whether the model sees it only through a summary."""

    seq: int
    kind: str
    role: str
    snippet: str
    covered_by: CoveredBy | None


def covering_segment(checkpoint: Checkpoint | None, seq: int) -> CoveredBy | None:
    if checkpoint is None:
        return None
    for segment in checkpoint.segments:
        if segment.from_seq <= seq <= segment.through_seq:
            return CoveredBy(checkpoint.id, segment.index, segment.from_seq, segment.through_seq)
    return None


def search_session(
    session_id: str, query: str, events: EventStore, reader: CheckpointReader, *, limit: int = 50
) -> list[RecallHit]:
    """`foya search`: the whole valid history, newest first (raises SearchError on a bad query)."""
    hits = events.search(session_id, query, limit=limit)
    current = reader.state(session_id, repair=False).current if hits else None
    return [
        RecallHit(hit.seq, hit.kind, hit.role, hit.snippet, covering_segment(current, hit.seq))
        for hit in hits
    ]
