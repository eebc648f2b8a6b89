"""Provides the compaction service: plan, summarise, validate, accept and commit a checkpoint, or
fail open with a diagnostic and, for deterministic failures, a fingerprint (SPEC C-1..C-15, P-1).

A compaction request never overflows by construction: it is planned against the route's window
minus the summary's own output reserve; a prefix that does not fit one request is summarised in
chunks that do (each a segment, merged as in C-10); a provider that still says "too long" makes
the plan back off to the route's accepted boundary (C-13), or to half its units, and try again.
Every path spends at most `[compaction] max_requests` provider requests beyond the necessary ones
(one per chunk and per merge), so no failure mode can loop.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from foya_tui.runtime.compaction.acceptance import acceptance_problems
from foya_tui.runtime.compaction.checkpoint import (
    MAX_SEGMENTS,
    Checkpoint,
    CheckpointError,
    Phase,
    ProjectionKind,
    Segment,
    check_structure,
)
from foya_tui.runtime.compaction.failures import Diagnostic, Outcome, Stage, Trigger, failure_fingerprint
from foya_tui.runtime.compaction.ledger import extract_ledger
from foya_tui.runtime.compaction.planner import NothingToCompact, Plan, Unit, plan_compaction
from foya_tui.runtime.compaction.summary import (
    SYSTEM_PROMPT,
    PreviousSummary,
    request_messages,
    transcript_lines,
)
from foya_tui.runtime.compaction.text import (
    CompactionCancelled,
    Compactor,
    RequestBudget,
    RequestOverflow,
    SummaryFailed,
)
from foya_tui.runtime.context.budget import Budget
from foya_tui.runtime.context.compiler import ContextCompiler, HistorySnapshot
from foya_tui.runtime.context.tokens import TokenCounter, counter_for_model
from foya_tui.runtime.history import valid_events
from foya_tui.runtime.model import Event, EventKind, NewEvent, Usage
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.store import CompactionStore, EventStore
from foya_tui.settings import CompactionSettings

ProgressCallback = Callable[[Stage, str], None]
REQUEST_SAFETY = 0.9
"""Share of the room left for a summary request that its local estimate may fill (tokenizers differ)."""
MIN_MESSAGE_CHARS = 200
_MESSAGE_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.IMPORTED_MESSAGE}
)


class CompactionError(Exception):
    """A compaction operation cannot start (one line for the user)."""


@dataclass(frozen=True)
class CompactionResult:
    """How one compaction attempt ended; `report()` is `foya compact --json`."""

    outcome: Outcome
    trigger: Trigger
    reason: str
    tokens_before: int
    tokens_after: int | None = None
    checkpoint: Checkpoint | None = None
    phase: str | None = None
    requests: int = 0

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED

    def report(self) -> dict[str, Any]:
        return {
            "outcome": str(self.outcome),
            "checkpoint_id": self.checkpoint.id if self.checkpoint is not None else None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reason": self.reason,
            "trigger": str(self.trigger),
            "phase": self.phase,
            "requests": self.requests,
            "segments": len(self.checkpoint.segments) if self.checkpoint is not None else None,
            "level": self.checkpoint.level if self.checkpoint is not None else None,
        }


@dataclass(frozen=True)
class Proposal:
    """A candidate that passed validation but is not committed yet (the TUI asks first)."""

    checkpoint: Checkpoint
    control_seq: int
    """The newest completion/undo/rewind seq when it was made: commit refuses if that changed."""
    attempt: _Attempt

    @property
    def session_id(self) -> str:
        return self.attempt.session_id

    @property
    def tokens_before(self) -> int:
        return self.checkpoint.tokens_before

    @property
    def tokens_after(self) -> int:
        return self.checkpoint.tokens_after


@dataclass(frozen=True)
class _Chunk:
    """Whole units summarised by one request; its seq range joins the previous chunk's, so the
    segments made from chunks are continuous even where non-message events lie between units."""

    from_seq: int
    through_seq: int
    lines: tuple[str, ...]
    events: tuple[Event, ...]


def summary_input_limit(budget: Budget, summary_max_tokens: int) -> int:
    """Tokens one compaction request may carry on a route: its window minus the summary's reserve."""
    room = budget.window - summary_max_tokens if budget.window else budget.input_budget
    if budget.max_input is not None:
        room = min(room, budget.max_input)
    return max(256, int(room * REQUEST_SAFETY))


class CompactionService:
    """Runs compactions for every session of one database."""

    def __init__(
        self,
        *,
        events: EventStore,
        compaction: CompactionStore,
        compiler: ContextCompiler,
        compactor: Compactor,
        settings: CompactionSettings,
    ) -> None:
        self._events = events
        self._store = compaction
        self._compiler = compiler
        self._compactor = compactor
        self._settings = settings

    # -- the whole attempt ----------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        route: Route,
        trigger: Trigger,
        *,
        phase: Phase | None = None,
        cancel: CancelToken | None = None,
        progress: ProgressCallback | None = None,
    ) -> CompactionResult:
        """Plan, summarise, validate and commit (or fail open, recording why)."""
        proposed = self.propose(session_id, route, trigger, phase=phase, cancel=cancel, progress=progress)
        if isinstance(proposed, CompactionResult):
            return proposed
        return self.commit(proposed, progress=progress)

    def propose(
        self,
        session_id: str,
        route: Route,
        trigger: Trigger,
        *,
        phase: Phase | None = None,
        cancel: CancelToken | None = None,
        progress: ProgressCallback | None = None,
    ) -> Proposal | CompactionResult:
        """A validated candidate, or the result that ends the attempt (recorded as a diagnostic)."""
        cancel = cancel or CancelToken()
        snapshot = self._compiler.snapshot(session_id)
        current = snapshot.checkpoint
        before = self._compiler.compile(session_id, route)
        attempt = _Attempt(session_id, route, trigger, before.layers.total, progress)
        attempt.report(Stage.PLANNING)
        planned = plan_compaction(
            snapshot.entries,
            open_group_seq=snapshot.open_group_seq,
            anchor_index=snapshot.anchor_index,
            covered_through=current.through_seq if current is not None else 0,
            phase=phase,
            mid_turn_min_steps=self._settings.mid_turn_min_steps,
        )
        if isinstance(planned, NothingToCompact):
            attempt.phase = str(phase) if phase else None
            return self._end(attempt, Outcome.NOTHING_TO_COMPACT, planned.reason)
        attempt.plan = planned
        while True:
            plan = attempt.plan
            source = self._store.source_digest(session_id, plan.through_seq)
            attempt.fingerprint = failure_fingerprint(
                route_id=route.id,
                parent_id=current.id if current is not None else None,
                source_digest=source,
                through_seq=plan.through_seq,
                anchor_seq=plan.anchor_seq,
            )
            known = {item.fingerprint: item.reason for item in self._store.fingerprints(session_id)}
            if attempt.fingerprint in known:
                reason = f"cannot reduce further: an equivalent attempt failed ({known[attempt.fingerprint]})"
                return self._end(attempt, Outcome.SUPPRESSED, reason)
            try:
                candidate = self._candidate(snapshot, plan, route, before.budget, source, cancel, attempt)
            except RequestOverflow as overflow:
                smaller = self._backed_off(session_id, route, plan)
                if smaller is None:
                    reason = (
                        "cannot reduce further: the summary request overflows even for the smallest "
                        f"prefix ({overflow})"
                    )
                    return self._end(attempt, Outcome.FAILED, reason, deterministic=True)
                attempt.plan = smaller
                continue
            except SummaryFailed as failure:
                return self._end(attempt, Outcome.FAILED, failure.reason, deterministic=failure.deterministic)
            except CompactionCancelled:
                return self._end(attempt, Outcome.CANCELLED, "cancelled by the user; nothing was written")
            except CheckpointError as exc:
                return self._end(attempt, Outcome.FAILED, f"invalid candidate: {exc}", deterministic=True)
            break
        attempt.report(Stage.VALIDATING)
        candidate = replace(candidate, tokens_before=attempt.tokens_before)
        after = self._compiler.compile(session_id, route, candidate=candidate).layers.total
        candidate = replace(candidate, tokens_after=after).with_id()
        problems = acceptance_problems(
            candidate,
            current_checkpoint_id=current.id if current is not None else None,
            source_digest_now=source,
            projection_before=attempt.tokens_before,
            projection_after=after,
        )
        if problems:
            return self._end(
                attempt, Outcome.REJECTED, "; ".join(problems), deterministic=True, tokens_after=after
            )
        control = snapshot.checkpoints.control_seq if snapshot.checkpoints is not None else 0
        return Proposal(candidate, control, attempt)

    def commit(self, proposal: Proposal, *, progress: ProgressCallback | None = None) -> CompactionResult:
        """Commit a proposal: checkpoint row, completion and diagnostic events in one transaction
        (SPEC P-1), after re-checking lineage and source inside it (C-12)."""
        attempt = proposal.attempt
        attempt.progress = progress
        attempt.report(Stage.COMMITTING)
        checkpoint = proposal.checkpoint
        session_id = attempt.session_id

        def check() -> None:
            # C-12's lineage and source conditions, re-checked under the write lock. The candidate
            # passed all six when it was made; since then only a completion, an undo or a rewind
            # can change the current checkpoint or the covered events (events are immutable, and
            # appends after the prefix do not touch its digest), and each is a control event. So
            # comparing the newest control seq is exact, and holds the lock for one indexed query
            # rather than re-hashing the whole prefix (0.65 s at 100,000 events).
            if self._store.last_control_seq(session_id) != proposal.control_seq:
                raise _Stale("another checkpoint, undo or rewind happened meanwhile (lineage is stale)")

        reason = (
            f"{len(checkpoint.segments)} segment(s), level {checkpoint.level}, "
            f"{checkpoint.tokens_before:,} → {checkpoint.tokens_after:,} tokens"
        )
        diagnostic = attempt.diagnostic(
            Outcome.ACCEPTED, reason, tokens_after=checkpoint.tokens_after, checkpoint_id=checkpoint.id
        )
        try:
            self._store.commit(
                session_id,
                checkpoint.id,
                checkpoint.serialised(),
                [
                    NewEvent(
                        EventKind.COMPACTION_COMPLETED,
                        {"checkpoint": checkpoint.to_payload(), "trigger": str(attempt.trigger)},
                    ),
                    NewEvent(EventKind.COMPACTION_DIAGNOSTIC, diagnostic.to_payload()),
                ],
                check,
            )
        except _Stale as stale:
            return self._end(attempt, Outcome.REJECTED, str(stale), tokens_after=checkpoint.tokens_after)
        attempt.report(Stage.DONE)
        return attempt.result(Outcome.ACCEPTED, reason, checkpoint.tokens_after, checkpoint)

    def decline(self, proposal: Proposal) -> CompactionResult:
        """The user looked at a candidate and said no: recorded, nothing else written."""
        return self._end(
            proposal.attempt, Outcome.REJECTED, "declined by the user", tokens_after=proposal.tokens_after
        )

    def undo(self, session_id: str) -> tuple[str, str | None]:
        """Make the previous checkpoint (or none) current again by a new event; nothing is deleted.
        Returns (undone id, restored id or None)."""
        state = self._compiler.checkpoint_state(session_id)
        if state is None or state.current is None:
            raise CompactionError("this session has no current checkpoint to undo")
        current = state.current
        restored = current.previous_id if current.previous_id in state.lineage else None
        control_seq = state.control_seq

        def check() -> None:
            if self._store.last_control_seq(session_id) != control_seq:
                raise CompactionError("the session's checkpoints changed meanwhile; look again and retry")

        self._store.append_checked(
            session_id,
            [NewEvent(EventKind.COMPACTION_UNDONE, {"undone_id": current.id, "restored_id": restored})],
            check,
        )
        return current.id, restored

    def record_boundary(
        self, session_id: str, route_id: str, through_seq: int, usage: Usage | None, payload_bytes: int
    ) -> None:
        """SPEC C-13: after a successful ordinary request, what this route accepted."""
        self._store.record_boundary(
            session_id,
            route_id,
            through_seq,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            payload_bytes,
        )

    # -- making a candidate ---------------------------------------------------------------

    def _candidate(
        self,
        snapshot: HistorySnapshot,
        plan: Plan,
        route: Route,
        budget: Budget,
        source: str,
        cancel: CancelToken,
        attempt: _Attempt,
    ) -> Checkpoint:
        current = snapshot.checkpoint
        requests = attempt.requests
        counter = counter_for_model(route.model)
        limit = summary_input_limit(budget, self._settings.summary_max_tokens)
        covered = self._covered_events(snapshot.session_id, plan)
        ledger = extract_ledger(
            covered, self._settings.ledger_chars, earlier=current.ledger if current is not None else None
        )
        # SPEC C-10: append while the anchor is unchanged and there are fewer than 4 segments.
        append = (
            current is not None
            and current.projection_kind is ProjectionKind.TEXT
            and plan.anchor_seq == current.head_anchor_seq
            and len(current.segments) < MAX_SEGMENTS
        )
        previous = [
            PreviousSummary(s.index, s.from_seq, s.through_seq, s.level, s.text)
            for s in (current.segments if current is not None else ())
        ]
        overhead = (
            counter.count(SYSTEM_PROMPT) + counter.count("\n".join(t for _, t in ledger.must_mention())) + 64
        )
        chunks = self._chunks(snapshot, plan, covered, counter, limit - overhead)
        # Chunks (and merges, see `_merge`) are necessary requests; `max_requests` bounds repairs
        # and back-offs on top of them.
        requests.limit = self._settings.max_requests + len(chunks)
        repaired = False
        total = len(chunks)

        def summarise(index: int, previous_part: Sequence[PreviousSummary], chunk: _Chunk | None) -> str:
            nonlocal repaired
            if cancel.cancelled:
                raise CompactionCancelled()
            attempt.report(Stage.SUMMARISING, f"{index}/{total}" if total > 1 else "")
            chunk_ledger = (
                extract_ledger(chunk.events, self._settings.ledger_chars)
                if chunk is not None and not previous_part
                else ledger
            )
            # The events this summary stands for: its chunk, and the summaries it merges.
            first = previous_part[0].from_seq if previous_part else chunk.from_seq  # type: ignore[union-attr]
            last = chunk.through_seq if chunk is not None else previous_part[-1].through_seq
            summary = self._compactor.summarise(
                route,
                lambda reasons: request_messages(
                    from_seq=chunk.from_seq if chunk is not None else first,
                    through_seq=last,
                    transcript=chunk.lines if chunk is not None else (),
                    previous=previous_part,
                    ledger=chunk_ledger,
                    repair_reasons=reasons,
                ),
                chunk_ledger,
                (first, last),
                cancel,
                requests,
            )
            repaired = repaired or summary.repaired
            return summary.text

        segments: list[tuple[int, int, int, str]]  # (from, through, level, text)
        top_level = current.level if current is not None else 0
        if (
            not append
            and previous
            and total == 1
            and self._fits(previous, chunks[0], counter, limit - overhead)
        ):
            # One session-level rewrite over the old summary and the new events (C-10).
            text = summarise(1, previous, chunks[0])
            segments = [(previous[0].from_seq, plan.through_seq, top_level + 1, text)]
        else:
            fresh = [
                (c.from_seq, c.through_seq, 0, summarise(i, (), c)) for i, c in enumerate(chunks, start=1)
            ]
            segments = [(s.from_seq, s.through_seq, s.level, s.text) for s in previous] + fresh
            # More than 4 segments, or an anchor change: one session-level summary over them all.
            if len(segments) > MAX_SEGMENTS or (previous and not append):
                segments = [self._merge(segments, counter, limit - overhead, requests, summarise)]
        checkpoint = Checkpoint(
            id="",
            previous_id=current.id if current is not None else None,
            session_id=snapshot.session_id,
            through_seq=plan.through_seq,
            source_digest=source,
            head_anchor_seq=plan.anchor_seq,
            phase=plan.phase,
            projection_kind=ProjectionKind.TEXT,
            level=max(level for _, _, level, _ in segments),
            segments=tuple(
                Segment(index, from_seq, through_seq, level, text, counter.count(text))
                for index, (from_seq, through_seq, level, text) in enumerate(segments, start=1)
            ),
            route_id=route.id,
            model=route.model,
            created_at=self._events.timestamp(),
            tokens_before=0,
            tokens_after=0,
            covered_messages=(current.covered_messages if current is not None else 0)
            + sum(unit.last - unit.first + 1 for unit in plan.units),
            producer="repaired" if repaired else "llm",
            ledger=ledger,
        ).with_id()
        check_structure(checkpoint)
        return checkpoint

    def _merge(
        self,
        segments: Sequence[tuple[int, int, int, str]],
        counter: TokenCounter,
        room: int,
        requests: RequestBudget,
        summarise: Callable[[int, Sequence[PreviousSummary], _Chunk | None], str],
    ) -> tuple[int, int, int, str]:
        """One session-level summary over segments (SPEC C-10), merging in groups that fit one
        request when all of them do not (so the merge itself never overflows). Every round has
        fewer items than the last, so this ends; its requests are necessary ones, added to the
        budget, which still bounds repairs."""
        items = [PreviousSummary(i, f, t, lvl, text) for i, (f, t, lvl, text) in enumerate(segments, start=1)]
        while True:
            groups: list[list[PreviousSummary]] = [[]]
            used = 0
            for item in items:
                tokens = counter.count(item.text) + 16
                if groups[-1] and used + tokens > room:
                    groups.append([])
                    used = 0
                groups[-1].append(item)
                used += tokens
            requests.limit += sum(1 for group in groups if len(group) > 1 or len(groups) == 1)
            merged = [
                PreviousSummary(
                    index,
                    group[0].from_seq,
                    group[-1].through_seq,
                    max(g.level for g in group) + 1,
                    summarise(index, group, None),
                )
                if len(group) > 1 or len(groups) == 1
                else replace(group[0], index=index)
                for index, group in enumerate(groups, start=1)
            ]
            if len(merged) == 1:
                only = merged[0]
                return (only.from_seq, only.through_seq, only.level, only.text)
            if len(merged) >= len(items):
                raise SummaryFailed(
                    "cannot reduce further: the summaries do not merge into one request", deterministic=True
                )
            items = merged

    def _fits(
        self, previous: Sequence[PreviousSummary], chunk: _Chunk, counter: TokenCounter, room: int
    ) -> bool:
        used = sum(counter.count(item.text) + 16 for item in previous)
        return used + counter.count("\n".join(chunk.lines)) <= room

    def _covered_events(self, session_id: str, plan: Plan) -> list[Event]:
        """The valid message events the plan newly covers, as stored."""
        later = self._events.events(session_id, after_seq=plan.from_seq - 1)
        return [
            event
            for event in valid_events(later)
            if event.seq <= plan.through_seq and event.kind in _MESSAGE_KINDS
        ]

    def _chunks(
        self,
        snapshot: HistorySnapshot,
        plan: Plan,
        covered: Sequence[Event],
        counter: TokenCounter,
        room: int,
    ) -> list[_Chunk]:
        """The plan's units as transcript chunks that each fit one request (whole units only)."""
        error_seqs = frozenset(
            event.seq
            for event in covered
            if event.kind is EventKind.TOOL_RESULT and event.payload.get("is_error") is True
        )
        covered_seqs = [event.seq for event in covered]
        chunks: list[_Chunk] = []
        units: list[Unit] = []
        lines: list[str] = []
        used = 0
        for unit in plan.units:
            entries = snapshot.entries[unit.first : unit.last + 1]
            chars = self._settings.transcript_message_chars
            unit_lines = transcript_lines(entries, chars, error_seqs)
            tokens = counter.count("\n".join(unit_lines))
            # K-8: a unit too large for one request is read with a lower per-message cap.
            while tokens > room and chars > MIN_MESSAGE_CHARS:
                chars = max(MIN_MESSAGE_CHARS, chars // 2)
                unit_lines = transcript_lines(entries, chars, error_seqs)
                tokens = counter.count("\n".join(unit_lines))
            if units and used + tokens > room:
                chunks.append(self._chunk(chunks, plan, units, lines, covered, covered_seqs))
                units, lines, used = [], [], 0
            units.append(unit)
            lines.extend(unit_lines)
            used += tokens
        if units:
            chunks.append(self._chunk(chunks, plan, units, lines, covered, covered_seqs))
        return chunks

    @staticmethod
    def _chunk(
        before: Sequence[_Chunk],
        plan: Plan,
        units: Sequence[Unit],
        lines: Sequence[str],
        covered: Sequence[Event],
        covered_seqs: Sequence[int],
    ) -> _Chunk:
        first = before[-1].through_seq + 1 if before else plan.from_seq
        last = units[-1].last_seq
        # `covered` is in seq order: slicing by bisection keeps chunking linear in the prefix.
        events = covered[bisect.bisect_left(covered_seqs, first) : bisect.bisect_right(covered_seqs, last)]
        return _Chunk(first, last, tuple(lines), tuple(events))

    def _backed_off(self, session_id: str, route: Route, plan: Plan) -> Plan | None:
        """SPEC C-13: cover no more than the route's accepted boundary; without one, half the units."""
        boundary = self._store.boundary(session_id, route.id)
        if boundary is not None and plan.from_seq <= boundary.through_seq < plan.through_seq:
            smaller = plan.backed_off(boundary.through_seq)
            if smaller is not None and smaller.through_seq < plan.through_seq:
                return smaller
        return plan.halved()

    # -- ending an attempt ----------------------------------------------------------------

    def _end(
        self,
        attempt: _Attempt,
        outcome: Outcome,
        reason: str,
        *,
        deterministic: bool = False,
        tokens_after: int | None = None,
    ) -> CompactionResult:
        """End an attempt that wrote no checkpoint: fail open (SPEC C-14) with its diagnostic (C-15)
        and, for a deterministic failure, a fingerprint that suppresses the same attempt."""
        fingerprint = attempt.fingerprint if deterministic else None
        if fingerprint is not None:
            self._store.add_fingerprint(
                attempt.session_id, fingerprint, reason[:300], self._settings.max_fingerprints
            )
        diagnostic = attempt.diagnostic(outcome, reason, tokens_after=tokens_after, fingerprint=fingerprint)
        self._events.append(
            attempt.session_id, [NewEvent(EventKind.COMPACTION_DIAGNOSTIC, diagnostic.to_payload())]
        )
        return attempt.result(outcome, reason, tokens_after)


@dataclass
class _Attempt:
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
    """Provider requests spent; `_candidate` sets the limit once it knows the chunks."""

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
    ) -> Diagnostic:
        plan = self.plan
        return Diagnostic(
            trigger=self.trigger,
            phase=str(plan.phase) if plan is not None else self.phase,
            stage=self.stage,
            outcome=outcome,
            messages_covered=sum(unit.last - unit.first + 1 for unit in plan.units)
            if plan is not None
            else 0,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            reason=reason,
            route_id=self.route.id,
            model=self.route.model,
            requests=self.requests.spent,
            checkpoint_id=checkpoint_id,
            fingerprint=fingerprint,
            through_seq=plan.through_seq if plan is not None else None,
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
            self.requests.spent,
        )


class _Stale(Exception):
    """Raised inside the commit transaction to abort it."""
