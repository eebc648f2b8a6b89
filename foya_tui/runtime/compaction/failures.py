"""Provides compaction failure handling: outcomes, failure fingerprints and diagnostic records
(SPEC C-14, C-15).

Compaction fails open: a failure never touches events or the current checkpoint. A deterministic
failure (the same input would fail the same way) leaves a fingerprint of everything that decides
the input, so the next equivalent attempt is suppressed instead of spending tokens again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foya_tui.runtime.digests import digest_of
from foya_tui.runtime.providers.summary_format import PROMPT_VERSION


class Trigger(StrEnum):
    """Why a compaction ran (SPEC C-2)."""

    BUDGET = "budget"
    PROVIDER = "provider"
    MANUAL = "manual"


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    """A valid candidate that acceptance refused (not smaller, stale lineage, changed source)."""
    SUPPRESSED = "suppressed"
    """An equivalent attempt already failed deterministically (SPEC C-14)."""
    FAILED = "failed"
    NOTHING_TO_COMPACT = "nothing_to_compact"
    CANCELLED = "cancelled"


class Stage(StrEnum):
    """Where a compaction is, for progress display and diagnostics (UX: planning, summarising …)."""

    PLANNING = "planning"
    SUMMARISING = "summarising"
    VALIDATING = "validating"
    COMMITTING = "committing"
    DONE = "done"


def failure_fingerprint(
    *, route_id: str, parent_id: str | None, source_digest: str, through_seq: int, anchor_seq: int | None
) -> str:
    """SPEC C-14: (prompt version, route, parent checkpoint, source digest, boundary, anchor)."""
    return digest_of(
        {
            "prompt": PROMPT_VERSION,
            "route": route_id,
            "parent": parent_id,
            "source": source_digest,
            "through_seq": through_seq,
            "anchor_seq": anchor_seq,
        }
    )[:32]


@dataclass(frozen=True)
class Diagnostic:
    """The structured record every compaction attempt leaves in history (SPEC C-15)."""

    trigger: Trigger
    phase: str | None
    stage: Stage
    outcome: Outcome
    messages_covered: int
    tokens_before: int
    tokens_after: int | None
    reason: str
    route_id: str
    model: str
    requests: int
    """Provider requests this attempt spent (chunks, repairs and back-offs)."""
    checkpoint_id: str | None = None
    fingerprint: str | None = None
    through_seq: int | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "trigger": str(self.trigger),
            "phase": self.phase,
            "stage": str(self.stage),
            "outcome": str(self.outcome),
            "messages_covered": self.messages_covered,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reason": self.reason,
            "route_id": self.route_id,
            "model": self.model,
            "requests": self.requests,
            "checkpoint_id": self.checkpoint_id,
            "fingerprint": self.fingerprint,
            "through_seq": self.through_seq,
        }
