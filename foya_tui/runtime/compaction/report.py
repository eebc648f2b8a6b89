"""Provides the compaction reports read from the store: `foya inspect` (checkpoints, segments,
diagnostics, fingerprints, accepted boundaries, rewound ranges) and `foya verify` (everything
re-validated). The TUI's inspector shows the same report: nothing is computed twice on screen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "created_at": self.created_at, **self.payload}


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

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "current_checkpoint_id": self.current_id,
            "checkpoints": [
                {**_record_json(record, record.id == self.current_id), "status": self.status(record)}
                for record in self.records
            ],
            "diagnostics": [diagnostic.to_json() for diagnostic in self.diagnostics],
            "fingerprints": [
                {"fingerprint": f.fingerprint, "reason": f.reason, "recorded_at": f.recorded_at}
                for f in self.fingerprints
            ],
            "accepted_boundaries": [
                {
                    "route": b.route_id,
                    "through_seq": b.through_seq,
                    "input_tokens": b.input_tokens,
                    "output_tokens": b.output_tokens,
                    "payload_bytes": b.payload_bytes,
                    "recorded_at": b.recorded_at,
                }
                for b in self.boundaries
            ],
            "rewound": [
                {"rewind_seq": r.rewind_seq, "from_seq": r.first_seq, "through_seq": r.last_seq}
                for r in self.rewound
            ],
            "notices": list(self.notices),
            "breaker": self.breaker.to_json() if self.breaker is not None else None,
        }


def _record_json(record: CheckpointRecord, current: bool) -> dict[str, Any]:
    checkpoint: Checkpoint | None = record.checkpoint
    base: dict[str, Any] = {
        "id": record.id,
        "event_seq": record.event_seq,
        "valid": checkpoint is not None and record.problem is None,
        "usable": record.usable,
        "current": current,
        "problem": record.problem,
    }
    if checkpoint is None:
        return base
    return {
        **base,
        "previous_id": checkpoint.previous_id,
        "through_seq": checkpoint.through_seq,
        "source_digest": checkpoint.source_digest,
        "head_anchor_seq": checkpoint.head_anchor_seq,
        "phase": str(checkpoint.phase),
        "projection_kind": str(checkpoint.projection_kind),
        "level": checkpoint.level,
        "route": checkpoint.route_id,
        "model": checkpoint.model,
        "created_at": checkpoint.created_at,
        "tokens_before": checkpoint.tokens_before,
        "tokens_after": checkpoint.tokens_after,
        "covered_messages": checkpoint.covered_messages,
        "producer": checkpoint.producer,
        "kept_messages": len(checkpoint.kept_messages),
        "native_state_bytes": len(
            json.dumps(checkpoint.native_state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        )
        if checkpoint.native_state is not None
        else None,
        "ledger": {
            "counts": checkpoint.ledger.counts,
            "dropped": checkpoint.ledger.dropped,
            "budget_chars": checkpoint.ledger.budget_chars,
            "kinds": [dataclasses.asdict(kind) for kind in checkpoint.ledger.kinds],
            "text": checkpoint.ledger.render(),
        },
        "segments": [
            {
                "index": s.index,
                "from_seq": s.from_seq,
                "through_seq": s.through_seq,
                "level": s.level,
                "tokens": s.tokens,
                "text": s.text,
            }
            for s in checkpoint.segments
        ],
    }


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
    return InspectReport(
        session_id=session_id,
        records=tuple(reader.all_records(session_id)),
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
    )


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
    history = events.events(session_id)
    for event in history:
        if event.problem is not None:
            problems.append(f"event {event.seq}: {event.problem}")
    records = reader.all_records(session_id)
    last_rewind = max(
        (event.seq for event in history if event.kind is EventKind.REWIND and event.problem is None),
        default=0,
    )
    for record in records:
        if record.problem is not None and record.event_seq > last_rewind:
            problems.append(f"checkpoint {record.id[:12]} (event {record.event_seq}): {record.problem}")
    completion_ids = {record.id for record in records}
    for row in compaction.rows(session_id):
        if row.id not in completion_ids:
            problems.append(f"checkpoint row {row.id[:12]} has no completion event")
    fingerprints: Sequence[Fingerprint] = compaction.fingerprints(session_id)
    if len(fingerprints) > max_fingerprints:
        problems.append(f"{len(fingerprints)} failure fingerprints, more than {max_fingerprints} (C-14)")
    return VerifyReport(session_id, len(history), len(records), tuple(problems))


@dataclass(frozen=True)
class CoveredBy:
    """The checkpoint segment that summarises an event for the model."""

    checkpoint_id: str
    segment: int
    from_seq: int
    through_seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "segment": self.segment,
            "from_seq": self.from_seq,
            "through_seq": self.through_seq,
        }


@dataclass(frozen=True)
class RecallHit:
    """A search hit in canonical history, and whether the model sees it only through a summary."""

    seq: int
    kind: str
    role: str
    snippet: str
    covered_by: CoveredBy | None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "role": self.role,
            "snippet": self.snippet,
            "covered_by": self.covered_by.to_json() if self.covered_by is not None else None,
        }


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
