"""Provides the context report: what a compiled request says about itself to the faces (the meter,
`foya context`), as typed values (SPEC X-6, X-7, B-4, K-1).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.view.checkpoint import Checkpoint


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


def checkpoint_summary(checkpoint: Checkpoint | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    return {
        "id": checkpoint.id,
        "level": checkpoint.level,
        "segments": len(checkpoint.segments),
        "through_seq": checkpoint.through_seq,
        "phase": str(checkpoint.phase),
        "producer": checkpoint.producer,
        "tokens_before": checkpoint.tokens_before,
        "tokens_after": checkpoint.tokens_after,
    }
