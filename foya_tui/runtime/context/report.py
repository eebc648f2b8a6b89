"""Provides the context report: what a compiled request says about itself to the faces (the meter,
`foya context`, `foya run --json`), as typed values end to end (SPEC X-6, X-7, B-2..B-5, K-1..K-5,
C-11, R-2).

Every field is always present and typed, so a face never guesses: the meter reads enums, not
strings it has to recognise, and a missing number cannot pass for zero. The CLI turns a report into
JSON in one place (`foya_tui/cli_json.py`), whose keys are these field names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.context.tracker import Estimate
from foya_tui.runtime.view.handoff import EpochStatus

if TYPE_CHECKING:
    # A type only: the checkpoint model pulls in the ledger and the store, which the TUI's meter
    # (it imports this module before its first frame) does not need then.
    from foya_tui.runtime.view.checkpoint import Checkpoint

LAYER_NAMES = ("pinned", "history", "working_set", "tool_schema", "native_state")


@dataclass(frozen=True)
class LayerTokens:
    """Tokens per layer of SPEC X-7, counted locally. Layering is for diagnosis: it deletes nothing."""

    pinned: int
    history: int
    working_set: int
    tool_schema: int
    native_state: int

    @property
    def total(self) -> int:
        return self.pinned + self.history + self.working_set + self.tool_schema + self.native_state

    @property
    def fixed(self) -> int:
        """The context that is not conversation: its growth is added to a measured baseline (B-6)."""
        return self.pinned + self.tool_schema + self.native_state

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in LAYER_NAMES}


class HandoffState(StrEnum):
    """Where a request's estimate sits relative to the handoff band (SPEC B-4, K-1)."""

    BELOW_HANDOFF = "below_handoff"
    HANDOFF_BAND = "handoff_band"
    COMPACTION_DUE = "compaction_due"


_STATES = {
    Verdict.OK: HandoffState.BELOW_HANDOFF,
    Verdict.HANDOFF: HandoffState.HANDOFF_BAND,
    Verdict.COMPACT: HandoffState.COMPACTION_DUE,
}


def handoff_state(verdict: Verdict) -> HandoffState:
    return _STATES[verdict]


@dataclass(frozen=True)
class RouteSummary:
    """Where the request goes (SPEC R-1)."""

    id: str
    model: str
    connection: str
    simulator: bool


@dataclass(frozen=True)
class CheckpointSummary:
    """The checkpoint a request applies, as the faces name it."""

    id: str
    level: int
    segments: int
    through_seq: int
    phase: str
    producer: str
    """Who made it: llm, repaired, native or fallback."""
    tokens_before: int
    tokens_after: int

    @classmethod
    def of(cls, checkpoint: Checkpoint | None) -> CheckpointSummary | None:
        if checkpoint is None:
            return None
        return cls(
            id=checkpoint.id,
            level=checkpoint.level,
            segments=len(checkpoint.segments),
            through_seq=checkpoint.through_seq,
            phase=str(checkpoint.phase),
            producer=checkpoint.producer,
            tokens_before=checkpoint.tokens_before,
            tokens_after=checkpoint.tokens_after,
        )


@dataclass(frozen=True)
class SnipSummary:
    """Tool results the model sees as placeholders (SPEC K-3, K-4) and what that saves."""

    count: int
    tokens_saved: int


@dataclass(frozen=True)
class HandoffSummary:
    """The handoff band (SPEC K-1): where the estimate is, the epoch, and whether its record is stored."""

    state: HandoffState
    epoch: str
    status: EpochStatus


@dataclass(frozen=True)
class NativeSummary:
    """A provider-native checkpoint in force: bound to `bound_model`'s route; `sent` False means the
    request's route may not use it (SPEC C-11, R-2)."""

    checkpoint_id: str
    bound_model: str
    sent: bool


@dataclass(frozen=True)
class ContextReport:
    """One compiled request as the meter, `foya context` and `foya run --json` show it."""

    session: str
    route: RouteSummary
    window: int | None
    window_source: str
    max_input: int | None
    output_reserve: int
    reserve_basis: str
    input_budget: int
    handoff_at: int
    high_water: int
    estimate: Estimate
    layers: LayerTokens
    counter: str
    counted_exactly: bool
    verdict: Verdict
    through_seq: int
    anchor_seq: int | None
    checkpoint_id: str | None
    checkpoint: CheckpointSummary | None
    messages: int
    tools: tuple[str, ...]
    shortened_seqs: tuple[int, ...]
    snipped: SnipSummary
    snapshot_known: bool
    """Whether the token snapshot is known (SPEC K-5): without it the handoff and LLM compaction wait."""
    handoff: HandoffSummary
    native: NativeSummary | None
    notices: tuple[str, ...]
    shortened_messages: tuple[int, ...] = ()
    """Seqs of messages the model sees cut because each alone is over half the input budget."""
    brief_tools: bool = False
    """The tool definitions are sent brief on this small window; the recall tools wait for
    tool_search."""


__all__ = [
    "LAYER_NAMES",
    "CheckpointSummary",
    "ContextReport",
    "HandoffState",
    "HandoffSummary",
    "LayerTokens",
    "NativeSummary",
    "RouteSummary",
    "SnipSummary",
    "handoff_state",
]
