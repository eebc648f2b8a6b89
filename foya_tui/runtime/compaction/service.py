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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from foya_tui.runtime.compaction.acceptance import (
    GATE_MAX_TOKENS,
    GATE_WINDOW_SHARE,
    OVER_THE_LINE,
    acceptance_problems,
    effect_gate_problems,
    fit_problem,
    refused_for_size,
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
from foya_tui.runtime.compaction.candidates import (
    appends,
    candidate_checkpoint,
    fallback_candidate,
    text_candidate,
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
from foya_tui.runtime.compaction.hook import hook_veto
from foya_tui.runtime.compaction.native import NativeCompactor, NativeUnavailable
from foya_tui.runtime.compaction.planner import NothingToCompact, Plan, plan_compaction
from foya_tui.runtime.compaction.text import (
    CompactionCancelled,
    Compactor,
    RequestOverflow,
    SummaryFailed,
)
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import MessageSequence, RequestView
from foya_tui.runtime.model import Event, EventKind, NewEvent, Usage
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.providers.summary_format import HANDOFF_MARKER
from foya_tui.runtime.store import CompactionStore, EventStore
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, counter_for_model, message_text
from foya_tui.runtime.view.checkpoint import (
    Checkpoint,
    CheckpointError,
    Phase,
    ProjectionKind,
    check_structure,
)
from foya_tui.runtime.view.history import valid_events
from foya_tui.runtime.view.ledger import CHARS_PER_TOKEN as LEDGER_CHARS_PER_TOKEN
from foya_tui.runtime.view.ledger import extract_ledger, ledger_budget_chars
from foya_tui.runtime.view.snapshot import HistorySnapshot
from foya_tui.settings import CompactionSettings

SummaryRoutes = Callable[[Route], Sequence[Route]]
"""The routes a session's summaries are asked on, in order (a separate summary route first)."""
FALLBACK_SHARE = 0.35
"""Share of the input budget the deterministic fallback's checkpoint may fill (K-10)."""
FALLBACK_SOURCE_SHARE = 0.6
"""Share of the covered messages' tokens the fallback may keep: it must shrink what it replaces."""
_MESSAGE_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.IMPORTED_MESSAGE}
)


FALLBACK_LEDGER_SHARE = 0.4
"""Share of the fallback's token budget its evidence ledger may take (the rest: its own text and
the messages it keeps verbatim)."""
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
    growth: int = 0
    """How much larger its projection is than the one it would replace (negative: smaller)."""


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
            snapshot.units,
            anchor_seq=snapshot.anchor_seq,
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
                candidate = text_candidate(
                    snapshot,
                    base,
                    plan,
                    summary_route,
                    budget,
                    source,
                    cancel,
                    attempt,
                    covered=self._covered_events(session_id, plan),
                    compactor=self._compactor,
                    settings=self._settings,
                    now=self._events.timestamp,
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
            too_large = all(refused_for_size(problem) for problem in measured.problems)
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
        return _Measured(
            candidate,
            problems,
            view.estimate.total - view.budget.high_water,
            growth=view.unshrunk_tokens - before.unshrunk_tokens,
        )

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
        candidate = candidate_checkpoint(
            snapshot,
            applicable,
            plan,
            route,
            source,
            Producer.NATIVE,
            ledger,
            created_at=self._events.timestamp(),
            native_state=native.state,
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
        ledger_chars = ledger_budget_chars(before.budget.window, self._settings.ledger_chars)
        append = appends(base, current, plan)
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
        anchor = snapshot.anchor
        attempt.note = why
        smallest: _Measured | None = None
        ledger_budget = ledger_chars
        for _ in range(FALLBACK_ROUNDS):
            ledger = extract_ledger(covered, ledger_budget, earlier=base.ledger if base is not None else None)
            try:
                candidate = fallback_candidate(
                    snapshot,
                    base,
                    plan,
                    route,
                    source,
                    ledger,
                    anchor,
                    absorbed,
                    why,
                    append,
                    budget_tokens,
                    created_at=self._events.timestamp(),
                )
            except CheckpointError as exc:
                return self._end(attempt, Outcome.FAILED, f"the fallback made an invalid checkpoint: {exc}")
            measured = self._measure(snapshot, candidate, route, before, source, attempt, gates=False)
            if not measured.problems:
                return self._proposal(snapshot, measured.candidate, attempt)
            if not all(refused_for_size(problem) for problem in measured.problems):
                break
            # SPEC K-10, C-12 extended: larger than what it replaces, or smaller but over the line: a
            # tighter budget, by what is too much. Only a candidate that shrinks may be kept as the
            # smallest one (committed when nothing smaller can be made).
            if all(problem.startswith(OVER_THE_LINE) for problem in measured.problems):
                smallest = measured
            too_much = max(measured.over_line, measured.growth + 1)
            tighter = max(FALLBACK_MIN_TOKENS, budget_tokens - int(too_much * 1.05) - 16)
            # SPEC K-10, K-12: the ledger is part of what the fallback adds. At its usual size it
            # may be larger than a short prefix on a small window: from the second round on it takes
            # at most its share of the fallback's budget, so the checkpoint can shrink at all.
            tighter_ledger = min(ledger_budget, int(tighter * FALLBACK_LEDGER_SHARE * LEDGER_CHARS_PER_TOKEN))
            if tighter >= budget_tokens and tighter_ledger >= ledger_budget:
                break
            budget_tokens, ledger_budget = tighter, tighter_ledger
        if smallest is not None:
            # Nothing more can shrink: the smallest fallback still replaces more than it adds, and the
            # provider is the final judge of what fits (SPEC C-1, 001).
            attempt.note = f"{why}; even the smallest checkpoint leaves the request over the compaction line"
            return self._proposal(snapshot, smallest.candidate, attempt)
        try:
            return self._accept(snapshot, candidate, route, before, source, attempt, gates=False)
        except _PathFailed as failed:
            return failed.result

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
