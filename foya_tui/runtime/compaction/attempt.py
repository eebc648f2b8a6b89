"""Provides one compaction attempt's bookkeeping and how it ends: the attempt as it goes (stage,
requests spent, producer, plan), the result every way of ending produces alike (SPEC C-15), and a
proposal that waits for the user before it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from foya_tui.errors import InputError
from foya_tui.runtime.compaction.failures import (
    Diagnostic,
    Outcome,
    Producer,
    Stage,
    Trigger,
)
from foya_tui.runtime.compaction.planner import Plan
from foya_tui.runtime.compaction.text import (
    RequestBudget,
)
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.view.checkpoint import (
    Checkpoint,
)

_E = TypeVar("_E", bound=StrEnum)

ProgressCallback = Callable[[Stage, str], object]  # what it returns is ignored


class CompactionError(InputError):
    """A compaction operation cannot start (one line for the user)."""


@dataclass(frozen=True)
class CompactionResult:
    """How one compaction attempt ended (`foya compact --json` is `cli_json.compaction_json`)."""

    outcome: Outcome
    trigger: Trigger
    reason: str
    tokens_before: int
    tokens_after: int | None = None
    checkpoint: Checkpoint | None = None
    phase: str | None = None
    requests: int = 0
    """Provider requests the whole compaction spent, over every path it tried."""
    producer: str | None = None
    """The path that made the checkpoint (or the last one tried): llm, repaired, native, fallback."""

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED

    @property
    def checkpoint_id(self) -> str | None:
        return self.checkpoint.id if self.checkpoint is not None else None

    @property
    def segments(self) -> int | None:
        """How many segments the checkpoint has (None without a checkpoint)."""
        return len(self.checkpoint.segments) if self.checkpoint is not None else None

    @property
    def level(self) -> int | None:
        return self.checkpoint.level if self.checkpoint is not None else None

    @classmethod
    def from_diagnostic(cls, payload: Mapping[str, Any]) -> CompactionResult:
        """How a stored attempt ended, read back from its diagnostic event (SPEC C-15) for a resumed
        session. Stored payloads come from older versions too: a value that is not what this
        version writes reads as the most cautious one (failed, manual, no sizes) instead of raising."""
        after = payload.get("tokens_after")
        return cls(
            outcome=_enum(Outcome, payload.get("outcome"), Outcome.FAILED),
            trigger=_enum(Trigger, payload.get("trigger"), Trigger.MANUAL),
            reason=_text(payload.get("reason")) or "",
            tokens_before=_count(payload.get("tokens_before")) or 0,
            tokens_after=_count(after),
            phase=_text(payload.get("phase")),
            requests=_count(payload.get("requests")) or 0,
            producer=_text(payload.get("producer")),
        )


def _enum(kind: type[_E], value: object, default: _E) -> _E:
    try:
        return kind(value) if isinstance(value, str) else default
    except ValueError:
        return default


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class Proposal:
    """A candidate that passed validation but is not committed yet (the TUI asks first)."""

    checkpoint: Checkpoint
    control_seq: int
    """The newest completion/undo/rewind seq when it was made: commit refuses if that changed."""
    attempt: Attempt

    @property
    def session_id(self) -> str:
        return self.attempt.session_id

    @property
    def tokens_before(self) -> int:
        return self.checkpoint.tokens_before

    @property
    def tokens_after(self) -> int:
        return self.checkpoint.tokens_after


@dataclass
class Attempt:
    """One compaction attempt as it goes: every way it ends is recorded alike (SPEC C-15)."""

    session_id: str
    route: Route
    trigger: Trigger
    tokens_before: int
    progress: ProgressCallback | None = None
    phase: str | None = None
    plan: Plan | None = None
    stage: Stage = Stage.PLANNING
    """The stage reached: a failure's diagnostic says where it happened."""
    fingerprint: str | None = None
    requests: RequestBudget = field(default_factory=lambda: RequestBudget(0))
    """Provider requests spent on the current path; `_candidate` sets the limit once it knows the chunks."""
    workspace: str = ""
    producer: Producer | None = None
    summary_route: Route | None = None
    """The route a text summary is asked on (the separate summary route, or the session's)."""
    note: str = ""
    """Why the fallback was used, for the accepted checkpoint's diagnostic."""
    earlier_requests: int = 0
    """Requests spent on the paths tried before this one (native, another summary route)."""
    earlier_calibration: list[tuple[str, int, int]] = field(default_factory=list)
    """The calibration samples of those paths' summary replies (see RequestBudget.calibration)."""
    calibration_recorded: int = 0
    """How many of the samples a diagnostic already carries: a later path's diagnostic (the
    fallback after a refused summary) must not record them again, or a route calibrates twice."""

    def restart(self, producer: Producer, summary_route: Route | None = None) -> None:
        """Begin the next path (native, text on a route, fallback) of the same compaction."""
        self.earlier_requests += self.requests.spent
        self.earlier_calibration += self.requests.calibration
        self.requests = RequestBudget(0)
        self.producer = producer
        self.summary_route = summary_route
        self.fingerprint = None
        self.stage = Stage.PLANNING

    @property
    def total_requests(self) -> int:
        return self.earlier_requests + self.requests.spent

    def report(self, stage: Stage, detail: str = "") -> None:
        self.stage = stage
        if self.progress is not None:
            self.progress(stage, detail)

    def diagnostic(
        self,
        outcome: Outcome,
        reason: str,
        *,
        tokens_after: int | None = None,
        checkpoint_id: str | None = None,
        fingerprint: str | None = None,
        summariser_failed: bool = False,
    ) -> Diagnostic:
        plan = self.plan
        asked = self.summary_route or self.route
        samples = (*self.earlier_calibration, *self.requests.calibration)
        unrecorded, self.calibration_recorded = samples[self.calibration_recorded :], len(samples)
        return Diagnostic(
            trigger=self.trigger,
            phase=str(plan.phase) if plan is not None else self.phase,
            stage=self.stage,
            outcome=outcome,
            messages_covered=plan.message_count if plan is not None else 0,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            reason=reason,
            route_id=asked.id,
            model=asked.model,
            requests=self.requests.spent,
            checkpoint_id=checkpoint_id,
            fingerprint=fingerprint,
            through_seq=plan.through_seq if plan is not None else None,
            producer=self.producer,
            workspace=self.workspace,
            summariser_failed=summariser_failed,
            calibration=unrecorded,
        )

    def result(
        self, outcome: Outcome, reason: str, tokens_after: int | None, checkpoint: Checkpoint | None = None
    ) -> CompactionResult:
        return CompactionResult(
            outcome,
            self.trigger,
            reason,
            self.tokens_before,
            tokens_after,
            checkpoint,
            str(self.plan.phase) if self.plan is not None else self.phase,
            self.total_requests,
            str(self.producer) if self.producer is not None else None,
        )
