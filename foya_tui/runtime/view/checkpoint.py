"""Provides Checkpoint V3: the validated, versioned projection that replaces a history prefix
(SPEC C-5..C-7, P-2, P-4), its id, strict parsing, and the checks against current history.

A checkpoint is stored twice: in its `compaction_completed` event (canonical, immutable) and in
the `checkpoint` table (the fast projection, rebuilt from the event when it is damaged: P-3).
Both hold `to_payload()`; `parse_checkpoint` accepts only what this version wrote (C-7).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from foya_tui.errors import FoyaError
from foya_tui.runtime.digests import canonical_json, digest_of
from foya_tui.runtime.view.ledger import Ledger

SCHEMA = "foya.checkpoint"
FORMAT_VERSION = 3
MAX_MESSAGES = 4096
"""P-4: messages a checkpoint's projection may carry (segments + kept messages)."""
MAX_SERIALISED_BYTES = 16 * 1024 * 1024
"""P-4: a checkpoint's serialised size."""
MAX_SEGMENTS = 4
"""C-10: at this many segments the next compaction rewrites one session-level summary."""


class Phase(StrEnum):
    """The safe boundary a checkpoint was planned with (SPEC C-3)."""

    PRE_TURN = "pre_turn"
    MID_TURN = "mid_turn"
    STANDALONE = "standalone"


class ProjectionKind(StrEnum):
    TEXT = "text"
    NATIVE = "native"


class CheckpointError(FoyaError, ValueError):
    """A stored or candidate checkpoint is invalid; the message says which rule it breaks."""


@dataclass(frozen=True)
class Segment:
    """One summary piece covering the contiguous seq range from_seq..through_seq (SPEC C-10)."""

    index: int
    from_seq: int
    through_seq: int
    level: int
    text: str
    tokens: int

    def to_payload(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "from_seq": self.from_seq,
            "through_seq": self.through_seq,
            "level": self.level,
            "text": self.text,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class Checkpoint:
    """Every field of SPEC C-5, plus what acceptance and the inspector need."""

    id: str
    previous_id: str | None
    session_id: str
    through_seq: int
    """The last event seq the checkpoint covers; events after it are shown verbatim."""
    source_digest: str
    """Digest of the valid message events 1..through_seq as stored (`EventStore.source_digest`)."""
    head_anchor_seq: int | None
    """The user message to re-insert verbatim when it lies inside the covered prefix (mid_turn)."""
    phase: Phase
    projection_kind: ProjectionKind
    level: int
    segments: tuple[Segment, ...]
    route_id: str
    model: str
    created_at: str
    tokens_before: int
    """The effective projection this checkpoint replaced, as the model would have seen it (C-12)."""
    tokens_after: int
    covered_messages: int
    producer: str
    """Which path made it: `llm`, `repaired` (after one repair request), later `fallback`, `native`."""
    ledger: Ledger = field(default_factory=Ledger)
    native_state: Mapping[str, Any] | None = None
    """Opaque provider state (SPEC C-11), only for projection kind `native`, bound to `route_id`."""
    kept_messages: tuple[Mapping[str, Any], ...] = ()
    """Messages kept verbatim in the projection (the deterministic fallback keeps whole units)."""
    schema: str = SCHEMA
    version: int = FORMAT_VERSION

    @property
    def from_seq(self) -> int:
        return self.segments[0].from_seq if self.segments else 1

    def key_payload(self) -> dict[str, Any]:
        """Every field but the id: the id is their digest, so changing any of them changes it (C-6)."""
        return {
            "schema": self.schema,
            "version": self.version,
            "previous_id": self.previous_id,
            "session_id": self.session_id,
            "through_seq": self.through_seq,
            "source_digest": self.source_digest,
            "head_anchor_seq": self.head_anchor_seq,
            "phase": str(self.phase),
            "projection_kind": str(self.projection_kind),
            "level": self.level,
            "segments": [segment.to_payload() for segment in self.segments],
            "route_id": self.route_id,
            "model": self.model,
            "created_at": self.created_at,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "covered_messages": self.covered_messages,
            "producer": self.producer,
            "ledger": self.ledger.to_payload(),
            "native_state": self.native_state,
            "kept_messages": [dict(message) for message in self.kept_messages],
        }

    def to_payload(self) -> dict[str, Any]:
        return {"id": self.id, **self.key_payload()}

    def serialised(self) -> str:
        return canonical_json(self.to_payload())

    def with_id(self) -> Checkpoint:
        """This checkpoint with its id computed from its fields."""
        return replace(self, id=digest_of(self.key_payload()))


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CheckpointError(message)


def _integer(raw: Mapping[str, Any], key: str, *, minimum: int = 0, optional: bool = False) -> Any:
    value = raw.get(key)
    if value is None and optional:
        return None
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        f"field {key!r} must be an integer ≥ {minimum}",
    )
    return value


def _text(raw: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = raw.get(key)
    if value is None and optional:
        return None
    _require(isinstance(value, str) and value != "", f"field {key!r} is missing or empty")
    return value


def _segment(raw: Any, position: int) -> Segment:
    _require(isinstance(raw, Mapping), f"segment {position} is not an object")
    segment = Segment(
        index=_integer(raw, "index", minimum=1),
        from_seq=_integer(raw, "from_seq", minimum=1),
        through_seq=_integer(raw, "through_seq", minimum=1),
        level=_integer(raw, "level"),
        text=_text(raw, "text"),
        tokens=_integer(raw, "tokens"),
    )
    _require(segment.index == position, f"segment {position} carries index {segment.index}")
    _require(segment.from_seq <= segment.through_seq, f"segment {position} has an empty seq range")
    return segment


def parse_checkpoint(raw: Any) -> Checkpoint:
    """Strictly parse a stored checkpoint (SPEC C-7, P-2, P-4). Raises CheckpointError.

    Only V3 is accepted; a missing version, id, model, created time, projection kind or required
    segment is invalid, and nothing is migrated. The id must be the digest of the other fields.
    """
    if isinstance(raw, str):
        _require(len(raw.encode("utf-8", "surrogatepass")) <= MAX_SERIALISED_BYTES, "larger than 16 MiB")
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise CheckpointError(f"not valid JSON ({exc})") from None
    _require(isinstance(raw, Mapping), "not a JSON object")
    _require(raw.get("schema") == SCHEMA, f"schema is {raw.get('schema')!r}, not {SCHEMA!r}")
    _require(
        raw.get("version") == FORMAT_VERSION,
        # C-7: no legacy migration.
        f"format version {raw.get('version')!r} is not {FORMAT_VERSION} (older formats are not migrated)",
    )
    try:
        phase = Phase(raw.get("phase"))
    except ValueError:
        raise CheckpointError(f"unknown phase {raw.get('phase')!r}") from None
    try:
        kind = ProjectionKind(raw.get("projection_kind"))
    except ValueError:
        raise CheckpointError(f"unknown projection kind {raw.get('projection_kind')!r}") from None
    segments_raw = raw.get("segments")
    _require(isinstance(segments_raw, list), "segments must be a list")
    segments = tuple(_segment(item, position) for position, item in enumerate(segments_raw, start=1))
    kept_raw = raw.get("kept_messages")
    _require(isinstance(kept_raw, list), "kept_messages must be a list")
    _require(all(isinstance(message, Mapping) for message in kept_raw), "kept messages must be objects")
    native_state = raw.get("native_state")
    _require(native_state is None or isinstance(native_state, Mapping), "native state must be an object")
    try:
        ledger = Ledger.from_payload(raw.get("ledger"))
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    checkpoint = Checkpoint(
        id=_text(raw, "id"),
        previous_id=_text(raw, "previous_id", optional=True),
        session_id=_text(raw, "session_id"),
        through_seq=_integer(raw, "through_seq", minimum=1),
        source_digest=_text(raw, "source_digest"),
        head_anchor_seq=_integer(raw, "head_anchor_seq", minimum=1, optional=True),
        phase=phase,
        projection_kind=kind,
        level=_integer(raw, "level"),
        segments=segments,
        route_id=_text(raw, "route_id"),
        model=_text(raw, "model"),
        created_at=_text(raw, "created_at"),
        tokens_before=_integer(raw, "tokens_before"),
        tokens_after=_integer(raw, "tokens_after"),
        covered_messages=_integer(raw, "covered_messages"),
        producer=_text(raw, "producer"),
        ledger=ledger,
        native_state=native_state,
        kept_messages=tuple(kept_raw),
    )
    check_structure(checkpoint)
    _require(
        digest_of(checkpoint.key_payload()) == checkpoint.id,
        "its id does not match its content (changed or forged)",  # C-6
    )
    return checkpoint


def check_structure(checkpoint: Checkpoint) -> None:
    """The context-free rules: projection kind and fields, segment continuity, size (C-7, P-2, P-4)."""
    if checkpoint.projection_kind is ProjectionKind.TEXT:
        _require(bool(checkpoint.segments), "a text checkpoint needs at least one segment")
        _require(checkpoint.native_state is None, "a text checkpoint carries no native state")
    else:
        _require(checkpoint.native_state is not None, "a native checkpoint needs its provider state")
    previous_through = None
    for segment in checkpoint.segments:
        if previous_through is not None:
            _require(
                segment.from_seq == previous_through + 1,
                f"segment {segment.index} starts at seq {segment.from_seq}, not {previous_through + 1} "
                "(segments must be continuous)",
            )
        previous_through = segment.through_seq
    if checkpoint.segments:
        _require(
            checkpoint.segments[-1].through_seq == checkpoint.through_seq,
            "the last segment does not end at the checkpoint's through seq",
        )
        _require(
            checkpoint.level == max(segment.level for segment in checkpoint.segments),
            "the checkpoint's level is not its highest segment level",
        )
    _require(
        len(checkpoint.segments) + len(checkpoint.kept_messages) <= MAX_MESSAGES,
        f"more than {MAX_MESSAGES} messages",  # P-4
    )
    _require(
        len(checkpoint.serialised().encode("utf-8", "surrogatepass")) <= MAX_SERIALISED_BYTES,
        "larger than 16 MiB serialised",
    )


@dataclass(frozen=True)
class HistoryFacts:
    """What P-2 checks a checkpoint against: the session's valid history as it is now."""

    session_id: str
    anchor_is_valid_user_message: bool
    """Whether the checkpoint's head anchor seq names a valid (readable, not rewound) user message."""
    source_digest: str
    """`EventStore.source_digest` up to the checkpoint's through seq."""
    last_seq: int
    first_seq: int | None = None
    """The session's first valid event (None: none lies at or before the first segment's start)."""
    extends_through: int | None = None
    """The through seq of the checkpoint it extends (its previous one), when that one is known."""


def check_against_history(checkpoint: Checkpoint, facts: HistoryFacts) -> None:
    """P-2: session, source digest, through seq and user anchor still describe valid history."""
    _require(checkpoint.session_id == facts.session_id, "it belongs to another session")
    _require(checkpoint.through_seq <= facts.last_seq, "it covers events that do not exist")
    if checkpoint.head_anchor_seq is not None:
        _require(facts.anchor_is_valid_user_message, "its head anchor is not a valid user message")
    _require(
        checkpoint.source_digest == facts.source_digest,
        "the covered events no longer match its source digest (history changed or was rewound)",
    )
    if checkpoint.segments:
        # Segment continuity from the start: nothing valid may lie before the first segment, else
        # the model would see neither those events nor a summary of them.
        start = checkpoint.segments[0].from_seq
        _require(
            facts.first_seq is None
            or start <= facts.first_seq
            or (facts.extends_through is not None and start == facts.extends_through + 1),
            f"its first segment starts at seq {start}, not at the first valid event ({facts.first_seq})"
            + (
                f" or after the coverage it extends (through seq {facts.extends_through})"
                if facts.extends_through is not None
                else ""
            ),
        )
