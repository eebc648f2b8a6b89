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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from foya_tui.runtime.compaction.acceptance import (
    GATE_MAX_TOKENS,
    GATE_WINDOW_SHARE,
    OVER_THE_LINE,
    acceptance_problems,
    effect_gate_problems,
    fit_problem,
    replacement_parts,
    replacement_tokens,
)
from foya_tui.runtime.compaction.attempt import (
    Attempt,
    CompactionError,
    CompactionResult,
    ProgressCallback,
    Proposal,
)
from foya_tui.runtime.compaction.chunking import (
    Chunk,
    ShrinkingTranscript,
    chunks_of,
    fits,
    merge_segments,
    summary_input_limit,
)
from foya_tui.runtime.compaction.failures import (
    BreakerState,
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
    Anchor,
    PreviousSummary,
    SummaryContext,
    context_tokens,
    earlier_context,
    request_anchor,
    request_messages,
)
from foya_tui.runtime.compaction.text import (
    CompactionCancelled,
    Compactor,
    RequestOverflow,
    SummaryFailed,
)
from foya_tui.runtime.context.budget import Budget
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import MessageSequence, RequestView
from foya_tui.runtime.model import Event, EventKind, NewEvent, Usage
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
from foya_tui.runtime.view.history import LogEntry, valid_events
from foya_tui.runtime.view.ledger import Ledger, extract_ledger, ledger_budget_chars
from foya_tui.runtime.view.snapshot import HistorySnapshot
from foya_tui.settings import CompactionSettings

SummaryRoutes = Callable[[Route], Sequence[Route]]
"""The routes a session's summaries are asked on, in order (a separate summary route first)."""
FALLBACK_SHARE = 0.35
"""Share of the input budget the deterministic fallback's checkpoint may fill (K-10)."""
FALLBACK_SOURCE_SHARE = 0.6
"""Share of the covered messages' tokens the fallback may keep: it must shrink what it replaces."""
ANCHOR_SHARE = 0.15
"""Share of a summary request's limit the anchor may take; a larger one keeps head and tail."""
EARLIER_SHARE = 0.1
"""Share of a summary request's limit reserved for the earlier segments whenever a request
summarises after an earlier segment; each request also gives them the room its chunk leaves, and
shows a digest when even that is not enough."""
_MESSAGE_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.IMPORTED_MESSAGE}
)


def _appends(base: Checkpoint | None, current: Checkpoint | None, plan: Plan) -> bool:
    """SPEC C-10: new coverage is appended as a segment while the text checkpoint it builds on is
    the current one, the anchor is unchanged and it has fewer than 4 segments."""
    return (
        base is not None
        and base is current
        and plan.anchor_seq == base.head_anchor_seq
        and len(base.segments) < MAX_SEGMENTS
    )


FALLBACK_ROUNDS = 4
"""Budgets the fallback tries, each tighter by what the last one left over the line (K-10)."""
FALLBACK_MIN_TOKENS = 256


@dataclass(frozen=True)
class _Measured:
    """A candidate with its sizes set, why it may not be committed, and how far its next request
    would be over the compaction line (negative when under)."""

    candidate: Checkpoint
    problems: list[str]
    over_line: int


def _size_only(problem: str) -> bool:
    """Whether a refusal is about size alone, which a smaller checkpoint can answer."""
    return problem.startswith((OVER_THE_LINE, "not enough reduction", "it would not shrink"))


class _PathFailed(Exception):
    """One model path (native, or text on one route) produced no acceptable candidate; its
    diagnostic is already recorded. The next path, or the fallback, takes over."""

    def __init__(self, result: CompactionResult, *, too_large: bool = False) -> None:
        super().__init__(result.reason)
        self.result = result
        self.too_large = too_large
        """Refused for its size alone (over the compaction line, or K-9's 80% gate): a smaller
        checkpoint from the deterministic fallback may still help, a manual compaction too."""


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
        current: RequestView | None = None,
    ) -> CompactionResult:
        """Plan, summarise, validate and commit (or fail open, recording why)."""
        proposed = self.propose(
            session_id,
            route,
            trigger,
            phase=phase,
            cancel=cancel,
            progress=progress,
            use_model=use_model,
            current=current,
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
        current: RequestView | None = None,
    ) -> Proposal | CompactionResult:
        """A validated candidate, or the result that ends the attempt (recorded as a diagnostic).

        `use_model=False` asks for the deterministic fallback directly (`foya compact --fallback`).
        `current` is the route's request as the caller just compiled it (no pending snips): when
        nothing was written since, it is what the model sees now and is not compiled again."""
        cancel = cancel or CancelToken()
        snapshot = self._compiler.snapshot(session_id, route)
        fresh = (
            current is not None
            and current.route == route
            and current.through_seq == self._events.last_seq(session_id)
        )
        before = current if fresh and current is not None else self._compiler.compile(session_id, route)
        info = self._events.get_session(session_id)
        workspace = normalised_workspace(info.workspace)
        attempt = Attempt(session_id, route, trigger, before.layers.total, progress, workspace=workspace)
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
                # A candidate refused only for its size: the fallback offers a smaller one, for a
                # manual compaction too, instead of a bare refusal (SPEC C-12 extended, K-9, K-10).
                offered = failed.too_large
            if failure.outcome is Outcome.CANCELLED or not (
                (automatic or offered) and self._settings.fallback
            ):
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
        attempt: Attempt,
    ) -> Proposal:
        """Native first where the route offers it, then text on each summary route. Raises
        _PathFailed with the last failure when none produced an acceptable candidate."""
        failure: _PathFailed | None = None
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
                    failure = failed
                    if failure.result.outcome is Outcome.CANCELLED:
                        raise
        for summary_route in self._summary_routes(route):
            attempt.restart(Producer.LLM, summary_route)
            attempt.plan = text_plan
            try:
                return self._text_path(snapshot, text_base, route, summary_route, before, cancel, attempt)
            except _PathFailed as failed:
                failure = failed
                if failure.result.outcome is Outcome.CANCELLED:
                    raise
        assert failure is not None
        raise failure

    def _text_path(
        self,
        snapshot: HistorySnapshot,
        base: Checkpoint | None,
        route: Route,
        summary_route: Route,
        before: RequestView,
        cancel: CancelToken,
        attempt: Attempt,
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
        attempt: Attempt,
        *,
        gates: bool,
    ) -> Proposal:
        """K-9's effect gates (for a model's result), C-12's acceptance and the fit, measured on
        `route`. A refusal is recorded (stage and reason) before the pipeline goes on."""
        measured = self._measure(snapshot, candidate, route, before, source, attempt, gates=gates)
        if measured.problems:
            stale = any("lineage is stale" in problem for problem in measured.problems)
            too_large = all(_size_only(problem) for problem in measured.problems)
            raise _PathFailed(
                self._end(
                    attempt,
                    Outcome.REJECTED,
                    "; ".join(measured.problems),
                    deterministic=True,
                    tokens_after=measured.candidate.tokens_after,
                    # Over the line is no fault of the summary: the working set may be what is large.
                    summariser_failed=gates
                    and not stale
                    and not all(problem.startswith(OVER_THE_LINE) for problem in measured.problems),
                ),
                too_large=too_large,
            )
        return self._proposal(snapshot, measured.candidate, attempt)

    def _proposal(self, snapshot: HistorySnapshot, candidate: Checkpoint, attempt: Attempt) -> Proposal:
        control = snapshot.checkpoints.control_seq if snapshot.checkpoints is not None else 0
        return Proposal(candidate, control, attempt)

    def _measure(
        self,
        snapshot: HistorySnapshot,
        candidate: Checkpoint,
        route: Route,
        before: RequestView,
        source: str,
        attempt: Attempt,
        *,
        gates: bool,
        require_fit: bool = True,
    ) -> _Measured:
        """The candidate with its sizes, and why it may not be committed (empty when it may).

        Smaller is judged on both projections before the elastic step (which makes any request
        fill the room it has, SPEC T-4); the fit on the request as it would be sent (C-12)."""
        attempt.report(Stage.VALIDATING)
        current = snapshot.current
        candidate = replace(candidate, tokens_before=attempt.tokens_before)
        view = self._compiler.compile(snapshot.session_id, route, candidate=candidate)
        candidate = replace(candidate, tokens_after=view.layers.total).with_id()
        problems = acceptance_problems(
            candidate,
            current_checkpoint_id=current.id if current is not None else None,
            source_digest_now=source,
            projection_before=before.unshrunk_tokens,
            projection_after=view.unshrunk_tokens,
        )
        if gates and not problems:
            counter = counter_for_model(route.model)
            replacement = replacement_tokens(candidate, counter)
            problems = effect_gate_problems(
                replacement=replacement,
                source=before.unshrunk_tokens - view.unshrunk_tokens + replacement,
                window=before.budget.window or before.budget.input_budget,
                parts=replacement_parts(candidate, snapshot.current, counter),
            )
        if require_fit and not problems:
            fit = fit_problem(
                estimate=view.estimate.total,
                compaction_line=view.budget.high_water,
                input_budget=view.budget.input_budget,
            )
            problems = [fit] if fit is not None else []
        return _Measured(candidate, problems, view.estimate.total - view.budget.high_water)

    def _fail(self, attempt: Attempt, reason: str, *, deterministic: bool) -> CompactionResult:
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
        attempt: Attempt,
    ) -> Checkpoint:
        """A text checkpoint made by the summariser on `route` (the summary route), building on the
        portable text checkpoint `base`; its lineage parent is the session's current checkpoint."""
        current = snapshot.current
        requests = attempt.requests
        counter = counter_for_model(route.model)
        limit = summary_input_limit(budget, self._settings.summary_max_tokens)
        covered = self._covered_events(snapshot.session_id, plan)
        ledger_chars = ledger_budget_chars(budget.window, self._settings.ledger_chars)
        ledger = extract_ledger(covered, ledger_chars, earlier=base.ledger if base is not None else None)
        append = _appends(base, current, plan)
        previous = [
            PreviousSummary(s.index, s.from_seq, s.through_seq, s.level, s.text)
            for s in (base.segments if base is not None else ())
        ]
        # K-12: every request carries the anchor, and the earlier segments read-only; their room is
        # planned here, so that no request exceeds the limit whatever it carries.
        anchor = self._anchor(snapshot, plan, counter, int(limit * ANCHOR_SHARE))
        overhead = (
            counter.count(SYSTEM_PROMPT)
            + counter.count("\n".join(t for _, t in ledger.must_mention()))
            + context_tokens(SummaryContext(anchor), counter)
            + 64
        )
        message_chars = self._settings.transcript_message_chars
        chunks = chunks_of(snapshot, plan, covered, counter, limit - overhead, message_chars)
        earlier_room = 0
        # Reserved for the segments of the checkpoint this one extends; the summaries of earlier
        # chunks of this compaction get the room their own chunk leaves.
        if previous:
            earlier_room = int(limit * EARLIER_SHARE)
            chunks = chunks_of(
                snapshot, plan, covered, counter, limit - overhead - earlier_room, message_chars
            )
        # The segments before the next chunk's: the base's, then those made so far here.
        earlier: list[PreviousSummary] = list(previous)
        # Chunks (and merges, see `chunking.merge_segments`) are necessary requests; `max_requests`
        # bounds repairs and back-offs on top of them.
        requests.limit = self._settings.max_requests + len(chunks)
        repaired = False
        total = len(chunks)
        # Progress counts every summary request of this compaction, chunks then merges: "143/174"
        # goes on to "175/176", never back to "1/174" when the merging starts.
        done, planned = 0, total

        def plan_more(merges: int) -> None:
            nonlocal planned
            planned = max(planned, done) + merges

        def summarise(index: int, previous_part: Sequence[PreviousSummary], chunk: Chunk | None) -> str:
            nonlocal repaired, done
            if cancel.cancelled:
                raise CompactionCancelled()
            done += 1
            planned_now = max(planned, done)
            attempt.report(Stage.SUMMARISING, f"{done}/{planned_now}" if planned_now > 1 else "")
            chunk_ledger = (
                extract_ledger(chunk.events, ledger_chars).requiring(
                    ledger, chunk.from_seq, chunk.through_seq
                )
                if chunk is not None and not previous_part
                else ledger
            )
            # The events this summary stands for: its chunk, and the summaries it merges.
            first = previous_part[0].from_seq if previous_part else chunk.from_seq  # type: ignore[union-attr]
            last = chunk.through_seq if chunk is not None else previous_part[-1].through_seq
            inputs = ShrinkingTranscript(snapshot.entries, chunk, counter) if chunk is not None else None
            # A chunk summarised on its own reads the segments before it, in the reserve and in
            # whatever room its transcript leaves; a rewrite or a merge has them as its input already.
            spare = (
                max(0, limit - overhead - earlier_room - counter.count("\n".join(chunk.lines)))
                if chunk is not None
                else 0
            )
            shown, digest = (
                earlier_context(earlier, counter, earlier_room + spare) if not previous_part else ((), False)
            )
            context = SummaryContext(anchor, shown, digest)

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
                    context=context,
                )

            summary = self._compactor.summarise(route, build, chunk_ledger, (first, last), cancel, requests)
            repaired = repaired or summary.repaired
            return summary.text

        segments: list[tuple[int, int, int, str]]  # (from, through, level, text)
        top_level = base.level if base is not None else 0
        if not append and previous and total == 1 and fits(previous, chunks[0], counter, limit - overhead):
            # One session-level rewrite over the old summary and the new events (C-10).
            text = summarise(1, previous, chunks[0])
            segments = [(previous[0].from_seq, plan.through_seq, top_level + 1, text)]
        else:
            fresh = []
            for i, c in enumerate(chunks, start=1):
                made = (c.from_seq, c.through_seq, 0, summarise(i, (), c))
                fresh.append(made)
                earlier.append(PreviousSummary(len(earlier) + 1, *made))
            segments = [(s.from_seq, s.through_seq, s.level, s.text) for s in previous] + fresh
            # More than 4 segments, or an anchor change: one session-level summary over them all.
            if len(segments) > MAX_SEGMENTS or (previous and not append):
                segments = [
                    merge_segments(segments, counter, limit - overhead, requests, summarise, plan_more)
                ]
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
        attempt: Attempt,
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
            ledger_budget_chars(before.budget.window, self._settings.ledger_chars),
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
        attempt: Attempt,
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
            covered,
            ledger_budget_chars(before.budget.window, self._settings.ledger_chars),
            earlier=base.ledger if base is not None else None,
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
        attempt.note = why
        smallest: _Measured | None = None
        for _ in range(FALLBACK_ROUNDS):
            try:
                candidate = self._fallback_candidate(
                    snapshot, base, plan, route, source, ledger, anchor, absorbed, why, append, budget_tokens
                )
            except CheckpointError as exc:
                return self._end(attempt, Outcome.FAILED, f"the fallback made an invalid checkpoint: {exc}")
            measured = self._measure(snapshot, candidate, route, before, source, attempt, gates=False)
            if not measured.problems:
                return self._proposal(snapshot, measured.candidate, attempt)
            if not all(problem.startswith(OVER_THE_LINE) for problem in measured.problems):
                break
            # SPEC K-10, C-12 extended: smaller but over the line: a tighter budget, by what is over.
            smallest = measured
            tighter = max(FALLBACK_MIN_TOKENS, budget_tokens - int(measured.over_line * 1.05) - 16)
            if tighter >= budget_tokens:
                break
            budget_tokens = tighter
        if smallest is not None:
            # Nothing more can shrink: the smallest fallback still replaces more than it adds, and the
            # provider is the final judge of what fits (SPEC C-1, 001).
            attempt.note = f"{why}; even the smallest checkpoint leaves the request over the compaction line"
            return self._proposal(snapshot, smallest.candidate, attempt)
        try:
            return self._accept(snapshot, candidate, route, before, source, attempt, gates=False)
        except _PathFailed as failed:
            return failed.result

    def _fallback_candidate(
        self,
        snapshot: HistorySnapshot,
        base: Checkpoint | None,
        plan: Plan,
        route: Route,
        source: str,
        ledger: Ledger,
        anchor: LogEntry | None,
        absorbed: str,
        why: str,
        append: bool,
        budget_tokens: int,
    ) -> Checkpoint:
        """One deterministic checkpoint for `plan` within `budget_tokens` (raises CheckpointError)."""
        counter = counter_for_model(route.model)
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
        check_structure(candidate)
        return candidate

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

    def _anchor(
        self, snapshot: HistorySnapshot, plan: Plan, counter: TokenCounter, room: int
    ) -> Anchor | None:
        """The plan's head anchor as summary requests carry it (None: the session has no request)."""
        index = snapshot.anchor_index
        if plan.anchor_seq is None or index is None or index >= len(snapshot.entries):
            return None
        entry = snapshot.entries[index]
        text = content_text(entry.openai.get("content"))
        return request_anchor(entry.seq, text, counter, room) if text.strip() else None

    def _covered_events(self, session_id: str, plan: Plan) -> list[Event]:
        """The valid message events the plan newly covers, as stored."""
        later = self._events.events(session_id, after_seq=plan.from_seq - 1)
        return [
            event
            for event in valid_events(later)
            if event.seq <= plan.through_seq and event.kind in _MESSAGE_KINDS
        ]

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
        attempt: Attempt,
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


class _Stale(Exception):
    """Raised inside the commit transaction to abort it."""
