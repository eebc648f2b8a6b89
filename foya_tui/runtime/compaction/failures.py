"""Provides compaction failure handling: outcomes, failure fingerprints and diagnostic records
(SPEC C-14, C-15).

Compaction fails open: a failure never touches events or the current checkpoint. A deterministic
failure (the same input would fail the same way) leaves a fingerprint of everything that decides
the input, so the next equivalent attempt is suppressed instead of spending tokens again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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
    BLOCKED = "blocked"
    """The compaction hook vetoed it (SPEC K-7): the context is kept, no fallback is made."""


class Producer(StrEnum):
    """Which path made (or tried to make) a checkpoint; shown per checkpoint in the inspector."""

    LLM = "llm"
    REPAIRED = "repaired"
    """The summariser's second answer, after one repair request (SPEC C-9)."""
    NATIVE = "native"
    """The provider's own opaque context state (SPEC C-11)."""
    FALLBACK = "fallback"
    """The deterministic fallback, no model (SPEC K-10)."""


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
    producer: Producer | None = None
    """The path this attempt took (None when it ended before choosing one)."""
    workspace: str = ""
    """The normalised workspace: with the session, the circuit breaker's key (SPEC K-11)."""
    summariser_failed: bool = False
    """True when a model's summary failed here: it counts toward the circuit breaker (K-11)."""
    calibration: tuple[tuple[str, int, int], ...] = ()
    """(route id, real input tokens, local estimate) of the summary replies that reported usage."""

    def to_payload(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.calibration:
            extra["calibration"] = [
                {"route_id": route_id, "input_tokens": real, "local_tokens": local}
                for route_id, real, local in self.calibration
            ]
        return {
            **extra,
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
            "producer": str(self.producer) if self.producer is not None else None,
            "workspace": self.workspace,
            "summariser_failed": self.summariser_failed,
        }


@dataclass(frozen=True)
class BreakerState:
    """The circuit breaker of one (workspace, session) (SPEC K-11), derived from its diagnostics."""

    failures: int
    """Consecutive summariser failures since the last summary that was accepted."""
    threshold: int
    reasons: tuple[str, ...] = ()
    """The failures' reasons, newest first."""

    @property
    def open(self) -> bool:
        """Open: automatic compactions use the deterministic fallback without asking a model."""
        return self.failures >= self.threshold


def breaker_state(diagnostics: list[Mapping[str, Any]], workspace: str, threshold: int) -> BreakerState:
    """Count consecutive summariser failures in `workspace`, newest first, until a model-made
    checkpoint was accepted. Attempts that never asked a model (blocked, cancelled, suppressed,
    nothing to compact, the fallback itself) neither count nor reset the count."""
    failures = 0
    reasons: list[str] = []
    for payload in reversed(diagnostics):
        if payload.get("workspace", "") != workspace:
            continue
        if payload.get("summariser_failed") is True:
            failures += 1
            reasons.append(str(payload.get("reason", ""))[:200])
        elif payload.get("outcome") == str(Outcome.ACCEPTED) and payload.get("producer") in (
            str(Producer.LLM),
            str(Producer.REPAIRED),
            str(Producer.NATIVE),
        ):
            break
    return BreakerState(failures, threshold, tuple(reasons[:threshold]))


def normalised_workspace(path: str) -> str:
    """A workspace path as the breaker keys it: absolute, symlinks resolved, case per platform."""
    if not path:
        return ""
    return os.path.normcase(os.path.realpath(path))
