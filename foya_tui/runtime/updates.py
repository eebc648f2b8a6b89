"""Provides the typed updates a running turn emits; the CLI prints them, the UI renders them.

Names are past tense where something happened. The CLI's `cli_json.update_json` gives the
`foya run --json` line of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.context.report import ContextReport
from foya_tui.runtime.model import Usage


@dataclass(frozen=True)
class TurnStarted:
    session_id: str
    user_seq: int
    route_id: str
    model: str


@dataclass(frozen=True)
class StepStarted:
    """A model call of the running turn begins: the `number`-th of at most `max_steps`."""

    session_id: str
    number: int
    max_steps: int


@dataclass(frozen=True)
class ContextUpdated:
    """The compiled context of the next (or current) request: layers, budget, verdict.

    Emitted before each model call and after each reply, so the budget meter follows every step.
    """

    session_id: str
    report: ContextReport


@dataclass(frozen=True)
class ReplyDelta:
    session_id: str
    text: str


@dataclass(frozen=True)
class RetryScheduled:
    """A retryable failure (rate limit, connection) before any output; Foya waits and tries again."""

    session_id: str
    reason: str
    attempt: int
    delay_seconds: float


@dataclass(frozen=True)
class ToolCallStarted:
    """A tool call is about to run (or to ask for approval)."""

    session_id: str
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallFinished:
    """A tool call's result was recorded at `seq` (its full text stays in canonical history)."""

    session_id: str
    seq: int
    call_id: str
    name: str
    is_error: bool
    content: str
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class TurnFinished:
    session_id: str
    assistant_seq: int
    text: str
    finish_reason: str
    usage: Usage | None
    notice: str | None = None
    """Something the user must know although the turn succeeded (e.g. cut at the output limit)."""


@dataclass(frozen=True)
class TurnFailed:
    session_id: str
    reason: str
    """One line, secrets redacted."""
    kind: str
    """A FailureKind value, `cancelled`, or `step_limit` (too many model calls in one turn)."""


@dataclass(frozen=True)
class CompactionProgressed:
    """A running compaction reached a stage (planning, summarising 2/3, validating, committing)."""

    session_id: str
    trigger: str
    stage: str
    detail: str = ""


@dataclass(frozen=True)
class CompactionFinished:
    """A compaction ended: how (outcome, sizes, reason, the checkpoint it made)."""

    session_id: str
    result: CompactionResult


@dataclass(frozen=True)
class ContextSnipped:
    """Tool results left the model's view before a step: micro-compaction after a cold prompt
    cache (SPEC K-3) or a snip of old tool turns under pressure (K-4). History keeps them all."""

    session_id: str
    mode: str
    """`micro` or `snip`."""
    results: int
    tokens_saved: int


@dataclass(frozen=True)
class HandoffRecorded:
    """The session entered the handoff band and stored the hidden continuation reminder (K-1)."""

    session_id: str
    seq: int
    epoch: str


RuntimeUpdate = (
    TurnStarted
    | StepStarted
    | CompactionProgressed
    | ContextSnipped
    | HandoffRecorded
    | CompactionFinished
    | ContextUpdated
    | ReplyDelta
    | RetryScheduled
    | ToolCallStarted
    | ToolCallFinished
    | TurnFinished
    | TurnFailed
)
