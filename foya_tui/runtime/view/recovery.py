"""Provides reading the current checkpoint back: which one is current, re-validated on every read,
rebuilt or dropped when damaged (SPEC P-2, P-3, P-6, H-4).

Which checkpoint is current follows from canonical history alone: the latest valid
`compaction_completed` event, unless a later `compaction_undone` made an earlier one (or none)
current again; a rewind makes every earlier checkpoint unusable (P-6). The `checkpoint` table is a
fast copy: a row that fails validation is rebuilt from its event; when the event fails too, the row
is deleted and the previous valid checkpoint (or canonical history) serves (P-3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from foya_tui.runtime.digests import canonical_json
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.store import CompactionStore, EventStore, StoredCheckpoint
from foya_tui.runtime.view.checkpoint import (
    Checkpoint,
    CheckpointError,
    HistoryFacts,
    ProjectionKind,
    check_against_history,
    parse_checkpoint,
)
from foya_tui.runtime.view.history import message_role, rewound

FIRST_EVENT_BATCH = 32
"""Events read at a time while looking for the first valid one (P-2's start check)."""


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint known to a session, as the inspector and `foya verify` list it."""

    id: str
    event_seq: int
    checkpoint: Checkpoint | None
    """None when neither its row nor its event holds a valid checkpoint."""
    problem: str | None
    usable: bool
    """False when a later rewind voided it (P-6) or it is invalid."""


@dataclass(frozen=True)
class CheckpointState:
    current: Checkpoint | None
    lineage: tuple[str, ...] = ()
    """Ids of the usable checkpoints after the last rewind, oldest first (undo walks back through it)."""
    notices: tuple[str, ...] = ()
    """What recovery did (a row rebuilt, a checkpoint dropped): shown, never silent."""
    control_seq: int = 0
    """The newest completion/undo/rewind event seq this state was derived from (a cache key)."""
    portable: Checkpoint | None = None
    """The newest valid text checkpoint of the lineage up to the current one: what another route
    uses when the current checkpoint is provider-native (SPEC R-2). Equals `current` when that is text."""

    def for_route(self, route_id: str) -> Checkpoint | None:
        """The checkpoint a request on `route_id` may apply: native state only on its own route
        (SPEC C-11, R-2); elsewhere the portable text checkpoint, or none (full history)."""
        current = self.current
        if current is None or current.projection_kind is ProjectionKind.TEXT or current.route_id == route_id:
            return current
        return self.portable


def _event_checkpoint_id(event: Event) -> str | None:
    raw = event.payload.get("checkpoint")
    if isinstance(raw, Mapping) and isinstance(checkpoint_id := raw.get("id"), str):
        return checkpoint_id
    return None


class CheckpointReader:
    """Reads and re-validates a session's checkpoints against its current history."""

    def __init__(self, events: EventStore, compaction: CompactionStore) -> None:
        self._events = events
        self._compaction = compaction

    def facts(self, session_id: str, checkpoint: Checkpoint) -> HistoryFacts:
        anchor_ok = False
        if checkpoint.head_anchor_seq is not None:
            anchor = self._events.event(session_id, checkpoint.head_anchor_seq)
            anchor_ok = (
                anchor is not None
                and anchor.problem is None
                and message_role(anchor) is Role.USER
                and not rewound(anchor.seq, self._events.rewinds_after(session_id, anchor.seq))
            )
        start = checkpoint.segments[0].from_seq if checkpoint.segments else 1
        first_seq = self._first_valid_seq(session_id, start)
        extends_through = None
        if first_seq is not None and start > first_seq and checkpoint.previous_id is not None:
            # Only a checkpoint that does not start at the beginning needs its parent read.
            parent = self._compaction.row(session_id, checkpoint.previous_id)
            try:
                extends_through = parse_checkpoint(parent.body).through_seq if parent is not None else None
            except CheckpointError:
                extends_through = None
        source_digest = self._compaction.source_digest(session_id, checkpoint.through_seq)
        if source_digest != checkpoint.source_digest:
            # A checkpoint made before running digests (schema 6) holds the digest of one pass over
            # the prefix: checked that way, it stays valid (a pass, paid only for such a checkpoint).
            unchained = self._compaction.unchained_source_digest(session_id, checkpoint.through_seq)
            source_digest = unchained if unchained == checkpoint.source_digest else source_digest
        return HistoryFacts(
            session_id=session_id,
            anchor_is_valid_user_message=anchor_ok,
            source_digest=source_digest,
            last_seq=self._events.last_seq(session_id),
            first_seq=first_seq,
            extends_through=extends_through,
        )

    def _first_valid_seq(self, session_id: str, through_seq: int) -> int | None:
        """The first valid (readable, not rewound) event at or before `through_seq`. Read forwards
        in small batches from the start: a checkpoint that starts where it should costs one short
        read here, never a pass over the history it covers."""
        rewinds = self._events.rewinds_after(session_id, 0)
        cursor = 0
        while cursor < through_seq:
            batch = self._events.events_after(session_id, cursor, FIRST_EVENT_BATCH)
            for event in batch:
                if event.seq > max(1, through_seq):
                    return None
                if event.problem is None and not rewound(event.seq, rewinds):
                    return event.seq
            if len(batch) < FIRST_EVENT_BATCH:
                return None
            cursor = batch[-1].seq
        return None

    def validate(self, session_id: str, raw: object) -> Checkpoint:
        """Parse and check a stored checkpoint against current history (P-2). Raises CheckpointError."""
        checkpoint = parse_checkpoint(raw)
        check_against_history(checkpoint, self.facts(session_id, checkpoint))
        return checkpoint

    def state(self, session_id: str, *, repair: bool = True) -> CheckpointState:
        """The current checkpoint, re-validated; with `repair`, damaged rows are rebuilt or deleted."""
        control = self._compaction.control_events(session_id)
        control_seq = control[-1].seq if control else 0
        completions: dict[str, Event] = {}
        order: list[str] = []
        current: str | None = None
        notices: list[str] = []
        for event in control:
            if event.problem is not None:
                if repair and event.kind is EventKind.COMPACTION_COMPLETED:
                    self._drop_unreadable(session_id, event, notices)
                continue
            if event.kind is EventKind.REWIND:
                # P-6: checkpoints made before a rewind are never used after it.
                completions.clear()
                order.clear()
                current = None
            elif event.kind is EventKind.COMPACTION_COMPLETED:
                checkpoint_id = _event_checkpoint_id(event)
                if checkpoint_id is not None:
                    completions[checkpoint_id] = event
                    order.append(checkpoint_id)
                    current = checkpoint_id
            elif event.kind is EventKind.COMPACTION_UNDONE:
                restored = event.payload.get("restored_id")
                if restored is None or restored in completions:
                    current = restored
        tried: set[str] = set()
        # The current one first; when it cannot be read, the latest earlier valid one (P-3).
        candidates = [] if current is None else [current]
        if current is not None:
            candidates += [cid for cid in reversed(order[: order.index(current)])]
        chosen: Checkpoint | None = None
        for checkpoint_id in candidates:
            checkpoint, _ = self._load(session_id, checkpoint_id, completions[checkpoint_id], notices, repair)
            tried.add(checkpoint_id)
            if checkpoint is not None:
                chosen = checkpoint
                break
        # A native checkpoint stands only on its own route: other routes use its text ancestor.
        portable = chosen
        while portable is not None and portable.projection_kind is not ProjectionKind.TEXT:
            parent = portable.previous_id
            if parent is None or parent not in completions or parent in tried:
                portable = None
                break
            portable, _ = self._load(session_id, parent, completions[parent], notices, repair)
            tried.add(parent)
        if repair:
            self._repair_rows(
                session_id, {cid: event for cid, event in completions.items() if cid not in tried}, notices
            )
            self._drop_stray_rows(session_id, control, notices)
        return CheckpointState(
            current=chosen,
            lineage=tuple(order),
            notices=tuple(notices),
            control_seq=control_seq,
            portable=portable,
        )

    def _load(
        self, session_id: str, checkpoint_id: str, event: Event, notices: list[str], repair: bool
    ) -> tuple[Checkpoint | None, str | None]:
        """A checkpoint from its fast row, else rebuilt from its completion event (P-3)."""
        # By id; failing that by its event's seq, so a row under a damaged id is still found and named.
        row = self._compaction.row(session_id, checkpoint_id) or self._compaction.row_for_event(
            session_id, event.seq
        )
        label = (
            checkpoint_id[:12]
            if row is None or row.id == checkpoint_id
            else f"{row.id[:12]}/{checkpoint_id[:12]}"
        )
        row_problem = "its row is missing" if row is None else None
        if row is not None:
            try:
                if row.event_seq != event.seq:
                    raise CheckpointError(f"its row names completion event {row.event_seq}, not {event.seq}")
                if row.id != checkpoint_id:
                    raise CheckpointError("its row is filed under another id than its event names")
                checkpoint = self.validate(session_id, row.body)
                if checkpoint.id != checkpoint_id:
                    raise CheckpointError("its row holds another checkpoint")
                # P-2: the row is a copy; the completion event is what was committed (P-1).
                if row.body != canonical_json(event.payload.get("checkpoint")):
                    raise CheckpointError("its row differs from the checkpoint in its completion event")
                return checkpoint, None
            except CheckpointError as exc:
                row_problem = str(exc)
        try:
            checkpoint = self.validate(session_id, event.payload.get("checkpoint"))
            if checkpoint.id != checkpoint_id:
                raise CheckpointError("its event holds another checkpoint")
        except CheckpointError as exc:
            problem = f"checkpoint {label} is invalid ({exc}); row: {row_problem}"
            if repair and row is not None:
                self._compaction.delete_row(session_id, row.id)
                notices.append(f"{problem}; its fast projection was deleted")
            else:
                notices.append(problem)
            return None, problem
        if repair:
            if row is not None and row.id != checkpoint_id:
                self._compaction.delete_row(session_id, row.id)
            self._compaction.put_row(
                session_id, StoredCheckpoint(checkpoint_id, event.seq, checkpoint.serialised())
            )
        notices.append(
            f"checkpoint {label}: its fast projection was damaged ({row_problem})"
            + (" and was rebuilt from its completion event" if repair else "")
        )
        return checkpoint, None

    def _drop_unreadable(self, session_id: str, event: Event, notices: list[str]) -> None:
        """A completion event that cannot be read takes its checkpoint with it (P-3): said so, and
        the row copied from it is deleted (it can no longer be checked against its source)."""
        row = self._compaction.row_for_event(session_id, event.seq)
        label = f"checkpoint {row.id[:12]}" if row is not None else "its checkpoint"
        notices.append(
            f"completion event {event.seq} is unreadable ({event.problem}); {label} is dropped"
            + ("; its fast projection was deleted" if row is not None else "")
        )
        if row is not None:
            self._compaction.delete_row(session_id, row.id)

    def _drop_stray_rows(self, session_id: str, control: Sequence[Event], notices: list[str]) -> None:
        """Delete rows that no completion event names (by id and seq): nothing can validate them."""
        named = {
            (checkpoint_id, event.seq)
            for event in control
            if event.kind is EventKind.COMPACTION_COMPLETED and (checkpoint_id := _event_checkpoint_id(event))
        }
        for row in self._compaction.rows(session_id):
            if (row.id, row.event_seq) not in named:
                self._compaction.delete_row(session_id, row.id)
                notices.append(
                    f"checkpoint row {row.id[:12]} has no completion event; its fast projection was deleted"
                )

    def _repair_rows(self, session_id: str, completions: Mapping[str, Event], notices: list[str]) -> None:
        """Rebuild damaged rows of the usable checkpoints that are not current (an undo may make
        them current again). Only a row that differs from its event is touched; the event's copy
        is checked for structure and id, not against history (that happens when it is read)."""
        for checkpoint_id, event in completions.items():
            row = self._compaction.row(session_id, checkpoint_id)
            try:
                checkpoint = parse_checkpoint(event.payload.get("checkpoint"))
            except CheckpointError:
                continue  # the event itself is damaged: reported by verify, dropped when read
            if checkpoint.id != checkpoint_id or (
                row is not None and row.event_seq == event.seq and row.body == checkpoint.serialised()
            ):
                continue
            self._compaction.put_row(
                session_id, StoredCheckpoint(checkpoint_id, event.seq, checkpoint.serialised())
            )
            notices.append(
                f"checkpoint {checkpoint_id[:12]}: its fast projection was damaged and was rebuilt "
                "from its completion event"
            )

    def all_records(self, session_id: str) -> list[CheckpointRecord]:
        """Every checkpoint the session ever committed, each re-validated (for `inspect` and `verify`).

        Nothing is repaired here: reading for a report must not change the store. A damaged row
        whose event is intact is reported as a problem too (the next read rebuilds it)."""
        control = self._compaction.control_events(session_id)
        last_rewind = max(
            (e.seq for e in control if e.kind is EventKind.REWIND and e.problem is None), default=0
        )
        records = []
        problem: str | None
        for event in control:
            if event.kind is not EventKind.COMPACTION_COMPLETED:
                continue
            checkpoint_id = _event_checkpoint_id(event)
            if event.problem is not None or checkpoint_id is None:
                problem = event.problem or "its completion event holds no checkpoint id"
                records.append(CheckpointRecord(f"(event {event.seq})", event.seq, None, problem, False))
                continue
            voided = event.seq < last_rewind
            if voided:
                # P-6: never used again; shown with its segments, not validated against new history.
                row = self._compaction.row_for_event(session_id, event.seq)
                try:
                    checkpoint = parse_checkpoint(
                        row.body if row is not None else event.payload.get("checkpoint")
                    )
                except CheckpointError:
                    checkpoint = None
                problem = f"voided by the rewind at seq {last_rewind}"  # P-6
                records.append(CheckpointRecord(checkpoint_id, event.seq, checkpoint, problem, False))
                continue
            notices: list[str] = []
            checkpoint, problem = self._load(session_id, checkpoint_id, event, notices, repair=False)
            if problem is None and notices:
                problem = notices[0]
            records.append(
                CheckpointRecord(checkpoint_id, event.seq, checkpoint, problem, checkpoint is not None)
            )
        return records
