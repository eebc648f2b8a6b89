"""Provides the context report: what a compiled request says about itself to the faces (the meter,
`foya context`), as typed values (SPEC X-6, X-7, B-4, K-1).
"""

from __future__ import annotations

from enum import StrEnum

from foya_tui.runtime.context.budget import Verdict


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
