"""Provides the compaction service: plan, summarise, validate, accept and commit a checkpoint, or
fail open with a diagnostic and, for deterministic failures, a fingerprint (SPEC C-1..C-15, P-1).

A compaction request never overflows by construction: it is planned against the route's window
minus the summary's own output reserve; a prefix that does not fit one request is summarised in
chunks that do (each a segment, merged as in C-10); a provider that still says "too long" makes
the plan back off to the route's accepted boundary (C-13), or to half its units, and try again.
Every path spends at most `[compaction] max_requests` provider requests beyond the necessary ones
(one per chunk and per merge), so no failure mode can loop.

The paths, in order (SPEC C-11, K-7..K-11): a configured hook may veto the compaction (nothing
else happens then); a route that offers provider-native compaction tries it first; the text
compactor tries the separate summary route (`[compaction] model`), then the session's own; every
model-made candidate passes the effect gates (K-9) and acceptance (C-12). When all of that fails in
an automatic compaction — or the circuit breaker of this (workspace, session) is open after
`breaker_threshold` consecutive summariser failures (K-11) — the deterministic fallback (K-10)
makes the checkpoint without a model.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from foya_tui.errors import InputError
from foya_tui.runtime.compaction.acceptance import (
    GATE_MAX_TOKENS,
    GATE_WINDOW_SHARE,
    acceptance_problems,
    effect_gate_problems,
    replacement_tokens,
)
from foya_tui.runtime.compaction.failures import (
    BreakerState,
    Diagnostic,
    Outcome,
    Producer,
    Stage,
    Trigger,
    breaker_state,
    failure_fingerprint,
    normalised_workspace,
)
from foya_tui.runtime.compaction.fallback import fallback_summary
from foya_tui.runtime.compaction.hook import hook_veto
from foya_tui.runtime.compaction.native import NativeCompactor, NativeUnavailable
from foya_tui.runtime.compaction.planner import NothingToCompact, Plan, plan_compaction
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
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import MessageSequence, RequestView
from foya_tui.runtime.model import Event, EventKind, NewEvent, Role, Usage
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.providers.summary_format import HANDOFF_MARKER
from foya_tui.runtime.store import CompactionStore, EventStore
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, TokenCounter, counter_for_model, message_text
from foya_tui.runtime.view.checkpoint import (
    MAX_SEGMENTS,
    Checkpoint,
    CheckpointError,
    Phase,
    ProjectionKind,
    Segment,
    check_structure,
)
from foya_tui.runtime.view.groups import Unit
from foya_tui.runtime.view.history import LogEntry, valid_events
from foya_tui.runtime.view.ledger import Ledger, extract_ledger
from foya_tui.runtime.view.snapshot import HistorySnapshot
from foya_tui.settings import CompactionSettings

ProgressCallback = Callable[[Stage, str], None]
SummaryRoutes = Callable[[Route], Sequence[Route]]
"""The routes a session's summaries are asked on, in order (a separate summary route first)."""
REQUEST_SAFETY = 0.9
"""Share of the room left for a summary request that its local estimate may fill (tokenizers differ)."""
MIN_MESSAGE_CHARS = 200
FALLBACK_SHARE = 0.35
"""Share of the input budget the deterministic fallback's checkpoint may fill (K-10)."""
FALLBACK_SOURCE_SHARE = 0.6
"""Share of the covered messages' tokens the fallback may keep: it must shrink what it replaces."""
REREADABLE_TOOLS = frozenset({"read_file"})
"""Tools whose successful output is file content the agent can read again (K-8 drops it first)."""
_MESSAGE_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.IMPORTED_MESSAGE}
)


class CompactionError(InputError):
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
    """Provider requests the whole compaction spent, over every path it tried."""
    producer: str | None = None
    """The path that made the checkpoint (or the last one tried): llm, repaired, native, fallback."""

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
            "producer": self.producer,
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
    units: tuple[Unit, ...]
    chars: int
    """The (lowest) per-message character cap its lines were made with."""
    error_seqs: frozenset[int]


class _ShrinkingTranscript:
    """A chunk's transcript, and strictly smaller versions of it for a summary request the provider
    rejected as too long (SPEC K-8): re-readable file contents dropped, then the oldest complete
    unit, then a lower per-message cap, again and again. `at(k)` is the k-th version (0 = as
    chunked), each with fewer tokens than the one before; None when nothing smaller is left."""

    def __init__(self, entries: Sequence[LogEntry], chunk: _Chunk, counter: TokenCounter) -> None:
        self._entries = entries
        self._chunk = chunk
        self._counter = counter
        self._versions: list[tuple[Sequence[str], int]] = []
        """Versions made so far with their tokens; counted only once a request overflowed."""
        self._ladder = self._steps()

    def _lines(self, skip_units: int, chars: int, omit_reads: bool) -> tuple[str, ...]:
        entries = [
            entry
            for unit in self._chunk.units[skip_units:]
            for entry in self._entries[unit.first : unit.last + 1]
        ]
        # Imported results often carry no tool name: the call that asked for them does.
        names = {call.id: call.name for entry in entries for call in entry.message.tool_calls}
        reread = frozenset(
            entry.seq
            for entry in entries
            if omit_reads
            and entry.message.role is Role.TOOL
            and (entry.message.name or names.get(entry.message.tool_call_id or "")) in REREADABLE_TOOLS
            and entry.seq not in self._chunk.error_seqs
        )
        return tuple(transcript_lines(entries, chars, self._chunk.error_seqs, reread))

    def _steps(self) -> Iterator[tuple[str, ...]]:
        chars = self._chunk.chars
        yield self._lines(0, chars, True)
        units = len(self._chunk.units)
        for skip in range(1, units):
            yield self._lines(skip, chars, True)
            if chars > MIN_MESSAGE_CHARS:
                chars = max(MIN_MESSAGE_CHARS, chars // 2)
                yield self._lines(skip, chars, True)

    def at(self, level: int) -> Sequence[str] | None:
        if level == 0:
            return self._chunk.lines
        if not self._versions:
            self._versions.append((self._chunk.lines, self._counter.count("\n".join(self._chunk.lines))))
        while len(self._versions) <= level:
            smaller = next(
                (
                    (lines, tokens)
                    for lines in self._ladder
                    if (tokens := self._counter.count("\n".join(lines))) < self._versions[-1][1]
                ),
                None,
            )
            if smaller is None:
                return None
            self._versions.append(smaller)
        return self._versions[level][0]


def summary_input_limit(budget: Budget, summary_max_tokens: int) -> int:
    """Tokens one compaction request may carry on a route: its window minus the summary's reserve."""
    room = budget.window - summary_max_tokens if budget.window else budget.input_budget
    if budget.max_input is not None:
        room = min(room, budget.max_input)
    return max(256, int(room * REQUEST_SAFETY))


def _appends(base: Checkpoint | None, current: Checkpoint | None, plan: Plan) -> bool:
    """SPEC C-10: new coverage is appended as a segment while the text checkpoint it builds on is
    the current one, the anchor is unchanged and it has fewer than 4 segments."""
    return (
        base is not None
        and base is current
        and plan.anchor_seq == base.head_anchor_seq
        and len(base.segments) < MAX_SEGMENTS
    )


class _PathFailed(Exception):
    """One model path (native, or text on one route) produced no acceptable candidate; its
    diagnostic is already recorded. The next path, or the fallback, takes over."""

    def __init__(self, result: CompactionResult) -> None:
        super().__init__(result.reason)
        self.result = result


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
        native: NativeCompactor | None = None,
        summary_routes: SummaryRoutes | None = None,
    ) -> None:
        """`native` offers provider-native compaction where a route supports it; `summary_routes`
        names the routes summaries are asked on (default: the session's route only)."""
        self._events = events
        self._store = compaction
        self._compiler = compiler
        self._compactor = compactor
        self._settings = settings
        self._native = native
        self._summary_routes = summary_routes or (lambda route: (route,))

    @property
    def settings(self) -> CompactionSettings:
        return self._settings

    def breaker(self, session_id: str) -> BreakerState:
        """The circuit breaker of this session in its workspace (SPEC K-11)."""
        workspace = normalised_workspace(self._events.get_session(session_id).workspace)
        payloads = [event.payload for event in self._store.diagnostics(session_id) if event.problem is None]
        return breaker_state(payloads, workspace, self._settings.breaker_threshold)

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
        use_model: bool = True,
    ) -> CompactionResult:
        """Plan, summarise, validate and commit (or fail open, recording why)."""
        proposed = self.propose(
            session_id, route, trigger, phase=phase, cancel=cancel, progress=progress, use_model=use_model
        )
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
        use_model: bool = True,
    ) -> Proposal | CompactionResult:
        """A validated candidate, or the result that ends the attempt (recorded as a diagnostic).

        `use_model=False` asks for the deterministic fallback directly (`foya compact --fallback`)."""
        cancel = cancel or CancelToken()
        snapshot = self._compiler.snapshot(session_id, route)
        before = self._compiler.compile(session_id, route)
        info = self._events.get_session(session_id)
        workspace = normalised_workspace(info.workspace)
        attempt = _Attempt(session_id, route, trigger, before.layers.total, progress, workspace=workspace)
        attempt.report(Stage.PLANNING)
        # What this route sees now: a native checkpoint stands only on its own route; text
        # compaction builds on the newest portable text checkpoint.
        applicable = snapshot.checkpoint
        text_base = (
            applicable
            if applicable is None or applicable.projection_kind is ProjectionKind.TEXT
            else (snapshot.checkpoints.portable if snapshot.checkpoints is not None else None)
        )
        planned = self._plan(snapshot, text_base, phase)
        if isinstance(planned, NothingToCompact):
            attempt.phase = str(phase) if phase else None
            return self._end(attempt, Outcome.NOTHING_TO_COMPACT, planned.reason)
        attempt.plan = planned
        if self._settings.hook:
            veto = hook_veto(
                self._settings.hook,
                {
                    "session": session_id,
                    "trigger": str(trigger),
                    "phase": str(planned.phase),
                    "from_seq": planned.from_seq,
                    "through_seq": planned.through_seq,
                    "tokens_before": before.layers.total,
                    "model": route.model,
                    "workspace": info.workspace,
                },
                cwd=info.workspace,
                timeout=self._settings.hook_timeout,
            )
            if veto is not None:
                # K-7: the context stays as it is; no fallback is faked in the hook's place.
                return self._end(attempt, Outcome.BLOCKED, veto)
        automatic = trigger is not Trigger.MANUAL
        breaker = self.breaker(session_id)
        failure: CompactionResult | None = None
        if use_model and not (automatic and breaker.open):
            try:
                return self._model_paths(
                    snapshot, applicable, text_base, planned, route, before, cancel, attempt
                )
            except _PathFailed as failed:
                failure = failed.result
            if failure.outcome is Outcome.CANCELLED or not (automatic and self._settings.fallback):
                return failure
        attempt.restart(Producer.FALLBACK)
        attempt.plan = planned
        why = (
            "asked for without a model"
            if not use_model
            else f"the circuit breaker is open after {breaker.failures} summariser failures"
            if failure is None
            else failure.reason
        )
        return self._fallback(snapshot, text_base, planned, route, before, why, attempt)

    def _plan(
        self, snapshot: HistorySnapshot, base: Checkpoint | None, phase: Phase | None
    ) -> Plan | NothingToCompact:
        return plan_compaction(
            snapshot.entries,
            open_group_seq=snapshot.open_group_seq,
            anchor_index=snapshot.anchor_index,
            covered_through=base.through_seq if base is not None else 0,
            phase=phase,
            mid_turn_min_steps=self._settings.mid_turn_min_steps,
        )

    def _model_paths(
        self,
        snapshot: HistorySnapshot,
        applicable: Checkpoint | None,
        text_base: Checkpoint | None,
        text_plan: Plan,
        route: Route,
        before: RequestView,
        cancel: CancelToken,
        attempt: _Attempt,
    ) -> Proposal:
        """Native first where the route offers it, then text on each summary route. Raises
        _PathFailed with the last failure when none produced an acceptable candidate."""
        failure: CompactionResult | None = None
        if self._native is not None and self._native.supports(route):
            native_plan = self._plan(snapshot, applicable, text_plan.phase)
            if not isinstance(native_plan, NothingToCompact):
                attempt.restart(Producer.NATIVE)
                attempt.plan = native_plan
                try:
                    return self._native_candidate(
                        snapshot, applicable, native_plan, route, before, cancel, attempt
                    )
                except _PathFailed as failed:
                    failure = failed.result
                    if failure.outcome is Outcome.CANCELLED:
                        raise
        for summary_route in self._summary_routes(route):
            attempt.restart(Producer.LLM, summary_route)
            attempt.plan = text_plan
            try:
                return self._text_path(snapshot, text_base, route, summary_route, before, cancel, attempt)
            except _PathFailed as failed:
                failure = failed.result
                if failure.outcome is Outcome.CANCELLED:
                    raise
        assert failure is not None
        raise _PathFailed(failure)

    def _text_path(
        self,
        snapshot: HistorySnapshot,
        base: Checkpoint | None,
        route: Route,
        summary_route: Route,
        before: RequestView,
        cancel: CancelToken,
        attempt: _Attempt,
    ) -> Proposal:
        """The text compactor on one summary route, with C-13 back-off, K-9 gates and C-12."""
        session_id = snapshot.session_id
        current = snapshot.current
        budget = before.budget if summary_route == route else self._compiler.first_budget(summary_route)
        while True:
            plan = attempt.plan
            assert plan is not None
            source = self._store.source_digest(session_id, plan.through_seq)
            attempt.fingerprint = failure_fingerprint(
                route_id=summary_route.id,
                parent_id=current.id if current is not None else None,
                source_digest=source,
                through_seq=plan.through_seq,
                anchor_seq=plan.anchor_seq,
            )
            known = {item.fingerprint: item.reason for item in self._store.fingerprints(session_id)}
            if attempt.fingerprint in known:
                reason = f"cannot reduce further: an equivalent attempt failed ({known[attempt.fingerprint]})"
                raise _PathFailed(self._end(attempt, Outcome.SUPPRESSED, reason))
            try:
                candidate = self._candidate(
                    snapshot, base, plan, summary_route, budget, source, cancel, attempt
                )
            except RequestOverflow as overflow:
                smaller = self._backed_off(session_id, summary_route, plan)
                if smaller is None:
                    reason = (
                        "cannot reduce further: the summary request overflows even for the smallest "
                        f"prefix ({overflow})"
                    )
                    raise _PathFailed(self._fail(attempt, reason, deterministic=True)) from None
                attempt.plan = smaller
                continue
            except SummaryFailed as failure:
                raise _PathFailed(
                    self._fail(attempt, failure.reason, deterministic=failure.deterministic)
                ) from None
            except CompactionCancelled:
                raise _PathFailed(
                    self._end(attempt, Outcome.CANCELLED, "cancelled by the user; nothing was written")
                ) from None
            except CheckpointError as exc:
                raise _PathFailed(
                    self._fail(attempt, f"invalid candidate: {exc}", deterministic=True)
                ) from None
            return self._accept(snapshot, candidate, route, before, source, attempt, gates=True)

    def _accept(
        self,
        snapshot: HistorySnapshot,
        candidate: Checkpoint,
        route: Route,
        before: RequestView,
        source: str,
        attempt: _Attempt,
        *,
        gates: bool,
    ) -> Proposal:
        """K-9's effect gates (for a model's result) and C-12's acceptance, measured on `route`."""
        attempt.report(Stage.VALIDATING)
        current = snapshot.current
        candidate = replace(candidate, tokens_before=attempt.tokens_before)
        after = self._compiler.compile(snapshot.session_id, route, candidate=candidate).layers.total
        candidate = replace(candidate, tokens_after=after).with_id()
        problems = acceptance_problems(
            candidate,
            current_checkpoint_id=current.id if current is not None else None,
            source_digest_now=source,
            projection_before=attempt.tokens_before,
            projection_after=after,
        )
        if gates and not problems:
            replacement = replacement_tokens(candidate, counter_for_model(route.model))
            problems = effect_gate_problems(
                replacement=replacement,
                source=attempt.tokens_before - after + replacement,
                window=before.budget.window or before.budget.input_budget,
            )
        if problems:
            stale = any("lineage is stale" in problem for problem in problems)
            raise _PathFailed(
                self._end(
                    attempt,
                    Outcome.REJECTED,
                    "; ".join(problems),
                    deterministic=True,
                    tokens_after=after,
                    summariser_failed=gates and not stale,
                )
            )
        control = snapshot.checkpoints.control_seq if snapshot.checkpoints is not None else 0
        return Proposal(candidate, control, attempt)

    def _fail(self, attempt: _Attempt, reason: str, *, deterministic: bool) -> CompactionResult:
        """A model path failed: recorded, and counted toward the circuit breaker (K-11)."""
        return self._end(attempt, Outcome.FAILED, reason, deterministic=deterministic, summariser_failed=True)

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
            f"{checkpoint.producer}: {len(checkpoint.segments)} segment(s), level {checkpoint.level}, "
            f"{checkpoint.tokens_before:,} → {checkpoint.tokens_after:,} tokens"
            + (f" (fallback because {attempt.note})" if attempt.note else "")
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
        base: Checkpoint | None,
        plan: Plan,
        route: Route,
        budget: Budget,
        source: str,
        cancel: CancelToken,
        attempt: _Attempt,
    ) -> Checkpoint:
        """A text checkpoint made by the summariser on `route` (the summary route), building on the
        portable text checkpoint `base`; its lineage parent is the session's current checkpoint."""
        current = snapshot.current
        requests = attempt.requests
        counter = counter_for_model(route.model)
        limit = summary_input_limit(budget, self._settings.summary_max_tokens)
        covered = self._covered_events(snapshot.session_id, plan)
        ledger = extract_ledger(
            covered, self._settings.ledger_chars, earlier=base.ledger if base is not None else None
        )
        append = _appends(base, current, plan)
        previous = [
            PreviousSummary(s.index, s.from_seq, s.through_seq, s.level, s.text)
            for s in (base.segments if base is not None else ())
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
            inputs = _ShrinkingTranscript(snapshot.entries, chunk, counter) if chunk is not None else None

            def build(reasons: Sequence[str], shrink: int) -> tuple[dict[str, Any], ...] | None:
                lines: Sequence[str] = ()
                if inputs is not None:
                    found = inputs.at(shrink)
                    if found is None:
                        return None
                    lines = found
                elif shrink:
                    return None  # a merge has no transcript to shrink: the plan backs off instead
                return request_messages(
                    from_seq=chunk.from_seq if chunk is not None else first,
                    through_seq=last,
                    transcript=lines,
                    previous=previous_part,
                    ledger=chunk_ledger,
                    repair_reasons=reasons,
                )

            summary = self._compactor.summarise(route, build, chunk_ledger, (first, last), cancel, requests)
            repaired = repaired or summary.repaired
            return summary.text

        segments: list[tuple[int, int, int, str]]  # (from, through, level, text)
        top_level = base.level if base is not None else 0
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
        producer = Producer.REPAIRED if repaired else Producer.LLM
        checkpoint = self._checkpoint(
            snapshot,
            base,
            plan,
            route,
            source,
            producer,
            ledger,
            segments=tuple(
                Segment(index, from_seq, through_seq, level, text, counter.count(text))
                for index, (from_seq, through_seq, level, text) in enumerate(segments, start=1)
            ),
        )
        check_structure(checkpoint)
        attempt.producer = producer
        return checkpoint

    def _native_candidate(
        self,
        snapshot: HistorySnapshot,
        applicable: Checkpoint | None,
        plan: Plan,
        route: Route,
        before: RequestView,
        cancel: CancelToken,
        attempt: _Attempt,
    ) -> Proposal:
        """A provider-native checkpoint (SPEC C-11): the route's provider compacts what it sees of
        the covered prefix into its own state, bound to that route. Unsupported or invalid →
        _PathFailed (not a summariser failure), and the text compactor takes over."""
        assert self._native is not None
        session_id = snapshot.session_id
        source = self._store.source_digest(session_id, plan.through_seq)
        attempt.requests.limit = 1
        attempt.report(Stage.SUMMARISING, "native")
        # What the model sees of the covered prefix now (snipped, shortened, checkpoint applied);
        # the state it compacts from comes with it, on its own route only.
        # The hidden handoff reminder is a control message, never compaction input (K-1).
        previous_state = before.native_state
        assert isinstance(before.messages, MessageSequence)
        messages = [
            message
            for message in before.messages.through(plan.through_seq)
            if not (
                message.get("role") == "user"
                and content_text(message.get("content")).startswith(HANDOFF_MARKER)
            )
        ]
        try:
            native = self._native.compact(route, messages, previous_state, cancel, attempt.requests)
        except CompactionCancelled:
            raise _PathFailed(
                self._end(attempt, Outcome.CANCELLED, "cancelled by the user; nothing was written")
            ) from None
        except (NativeUnavailable, RequestOverflow, SummaryFailed) as exc:
            reason = f"native compaction unavailable, the text compactor takes over: {exc}"
            raise _PathFailed(self._end(attempt, Outcome.FAILED, reason)) from None
        covered = self._covered_events(session_id, plan)
        ledger = extract_ledger(
            covered,
            self._settings.ledger_chars,
            earlier=applicable.ledger if applicable is not None else None,
        )
        candidate = self._checkpoint(
            snapshot, applicable, plan, route, source, Producer.NATIVE, ledger, native_state=native.state
        )
        try:
            check_structure(candidate)
        except CheckpointError as exc:
            raise _PathFailed(
                self._end(attempt, Outcome.FAILED, f"invalid native candidate: {exc}")
            ) from None
        return self._accept(snapshot, candidate, route, before, source, attempt, gates=True)

    def _fallback(
        self,
        snapshot: HistorySnapshot,
        base: Checkpoint | None,
        plan: Plan,
        route: Route,
        before: RequestView,
        why: str,
        attempt: _Attempt,
    ) -> Proposal | CompactionResult:
        """The deterministic fallback (SPEC K-10): no model, within a token budget, the same
        acceptance as any candidate."""
        attempt.report(Stage.SUMMARISING, "fallback")
        session_id = snapshot.session_id
        current = snapshot.current
        counter = counter_for_model(route.model)
        source = self._store.source_digest(session_id, plan.through_seq)
        covered = self._covered_events(session_id, plan)
        ledger = extract_ledger(
            covered, self._settings.ledger_chars, earlier=base.ledger if base is not None else None
        )
        append = _appends(base, current, plan)
        absorbed = "" if append or base is None else "\n\n".join(s.text for s in base.segments)
        covered_tokens = sum(
            TOKENS_PER_MESSAGE + counter.count(message_text(entry.openai))
            for unit in plan.units
            for entry in snapshot.entries[unit.first : unit.last + 1]
        )
        window = before.budget.window or before.budget.input_budget
        # Well inside every K-9 gate, so that what the fallback keeps leaves room to work in.
        budget_tokens = max(
            256,
            min(
                int(before.budget.input_budget * FALLBACK_SHARE),
                int(window * GATE_WINDOW_SHARE),
                GATE_MAX_TOKENS,
                int(covered_tokens * FALLBACK_SOURCE_SHARE),
            ),
        )
        anchor = (
            snapshot.entries[snapshot.anchor_index]
            if snapshot.anchor_index is not None and snapshot.anchor_index < len(snapshot.entries)
            else None
        )
        made = fallback_summary(
            snapshot.entries,
            plan,
            active_task=anchor,
            previous_text=absorbed,
            reason=why,
            counter=counter,
            budget_tokens=budget_tokens,
            count_ledger=lambda: counter.count(ledger.render()),
        )
        if append and base is not None:
            segments = [
                *base.segments,
                Segment(
                    len(base.segments) + 1,
                    plan.from_seq,
                    plan.through_seq,
                    0,
                    made.text,
                    counter.count(made.text),
                ),
            ]
        else:
            first = base.segments[0].from_seq if base is not None and base.segments else plan.from_seq
            level = base.level + 1 if base is not None else 0
            segments = [Segment(1, first, plan.through_seq, level, made.text, counter.count(made.text))]
        candidate = self._checkpoint(
            snapshot,
            base,
            plan,
            route,
            source,
            Producer.FALLBACK,
            ledger,
            segments=tuple(segments),
            kept=made.kept_messages,
        )
        attempt.note = why
        try:
            check_structure(candidate)
            return self._accept(snapshot, candidate, route, before, source, attempt, gates=False)
        except CheckpointError as exc:
            return self._end(attempt, Outcome.FAILED, f"the fallback made an invalid checkpoint: {exc}")
        except _PathFailed as failed:
            return failed.result

    def _checkpoint(
        self,
        snapshot: HistorySnapshot,
        base: Checkpoint | None,
        plan: Plan,
        route: Route,
        source: str,
        producer: Producer,
        ledger: Ledger,
        *,
        segments: tuple[Segment, ...] = (),
        kept: tuple[Mapping[str, Any], ...] = (),
        native_state: Mapping[str, Any] | None = None,
    ) -> Checkpoint:
        """A candidate (id set, sizes still 0) covering `plan` on top of `base`, whose lineage parent
        is the session's current checkpoint, whichever path made it."""
        current = snapshot.current
        return Checkpoint(
            id="",
            previous_id=current.id if current is not None else None,
            session_id=snapshot.session_id,
            through_seq=plan.through_seq,
            source_digest=source,
            head_anchor_seq=plan.anchor_seq,
            phase=plan.phase,
            projection_kind=ProjectionKind.TEXT if native_state is None else ProjectionKind.NATIVE,
            level=max((segment.level for segment in segments), default=0),
            segments=segments,
            route_id=route.id,
            model=route.model,
            created_at=self._events.timestamp(),
            tokens_before=0,
            tokens_after=0,
            covered_messages=(base.covered_messages if base is not None else 0)
            + sum(unit.last - unit.first + 1 for unit in plan.units),
            producer=str(producer),
            ledger=ledger,
            native_state=native_state,
            kept_messages=kept,
        ).with_id()

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
        chunk_chars = self._settings.transcript_message_chars
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
                chunks.append(
                    self._chunk(chunks, plan, units, lines, covered, covered_seqs, chunk_chars, error_seqs)
                )
                units, lines, used = [], [], 0
                chunk_chars = self._settings.transcript_message_chars
            units.append(unit)
            lines.extend(unit_lines)
            used += tokens
            chunk_chars = min(chunk_chars, chars)
        if units:
            chunks.append(
                self._chunk(chunks, plan, units, lines, covered, covered_seqs, chunk_chars, error_seqs)
            )
        return chunks

    @staticmethod
    def _chunk(
        before: Sequence[_Chunk],
        plan: Plan,
        units: Sequence[Unit],
        lines: Sequence[str],
        covered: Sequence[Event],
        covered_seqs: Sequence[int],
        chars: int,
        error_seqs: frozenset[int],
    ) -> _Chunk:
        first = before[-1].through_seq + 1 if before else plan.from_seq
        last = units[-1].last_seq
        # `covered` is in seq order: slicing by bisection keeps chunking linear in the prefix.
        events = covered[bisect.bisect_left(covered_seqs, first) : bisect.bisect_right(covered_seqs, last)]
        return _Chunk(first, last, tuple(lines), tuple(events), tuple(units), chars, error_seqs)

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
        summariser_failed: bool = False,
    ) -> CompactionResult:
        """End an attempt that wrote no checkpoint: fail open (SPEC C-14) with its diagnostic (C-15)
        and, for a deterministic failure, a fingerprint that suppresses the same attempt.
        `summariser_failed` counts it toward the circuit breaker (K-11)."""
        fingerprint = attempt.fingerprint if deterministic else None
        if fingerprint is not None:
            self._store.add_fingerprint(
                attempt.session_id, fingerprint, reason[:300], self._settings.max_fingerprints
            )
        diagnostic = attempt.diagnostic(
            outcome,
            reason,
            tokens_after=tokens_after,
            fingerprint=fingerprint,
            summariser_failed=summariser_failed,
        )
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
    """Provider requests spent on the current path; `_candidate` sets the limit once it knows the chunks."""
    workspace: str = ""
    producer: Producer | None = None
    summary_route: Route | None = None
    """The route a text summary is asked on (the separate summary route, or the session's)."""
    note: str = ""
    """Why the fallback was used, for the accepted checkpoint's diagnostic."""
    earlier_requests: int = 0
    """Requests spent on the paths tried before this one (native, another summary route)."""

    def restart(self, producer: Producer, summary_route: Route | None = None) -> None:
        """Begin the next path (native, text on a route, fallback) of the same compaction."""
        self.earlier_requests += self.requests.spent
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
            route_id=asked.id,
            model=asked.model,
            requests=self.requests.spent,
            checkpoint_id=checkpoint_id,
            fingerprint=fingerprint,
            through_seq=plan.through_seq if plan is not None else None,
            producer=self.producer,
            workspace=self.workspace,
            summariser_failed=summariser_failed,
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


class _Stale(Exception):
    """Raised inside the commit transaction to abort it."""
