"""Provides the Session: the turn loop over one conversation's event log.

A turn appends the user message (one transaction), then runs steps: compile the request from
valid history (SPEC X-5), stream the reply, append it with its usage (one transaction); when the
reply calls tools, run them (with approval), append each result, and take the next step. Every
step is reported as a RuntimeUpdate. Provider failures are classified; only rate limits and
connection errors that happen before any output are retried, with Foya's own backoff. A
cancelled turn closes every open tool call with a recorded result, so history never holds an
incomplete tool group.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from foya_tui.errors import InputError
from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.compaction.failures import Outcome, Stage, Trigger
from foya_tui.runtime.compaction.service import CompactionService
from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.model import EventKind, NewEvent, SessionInfo, ToolCall, Usage
from foya_tui.runtime.providers.client import (
    CancelToken,
    ProviderClient,
    ProviderRequest,
    ReasoningDelta,
    StreamFinished,
    TextDelta,
    ToolCallDelta,
)
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, output_limit_failure
from foya_tui.runtime.providers.litellm_client import retry_delay, sleep_unless_cancelled
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.providers.tool_charge import measure_tool_charge
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.text import clean_user_text
from foya_tui.runtime.tools.approval import ApprovalPolicy, ApprovalRequest
from foya_tui.runtime.tools.registry import Effect, ToolContext, ToolRegistry, ToolResult
from foya_tui.runtime.updates import (
    CompactionFinished,
    CompactionProgressed,
    ContextSnipped,
    ContextUpdated,
    HandoffRecorded,
    ReplyDelta,
    RetryScheduled,
    RuntimeUpdate,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)
from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.runtime.view.groups import group_split
from foya_tui.runtime.view.handoff import EpochStatus, handoff_event
from foya_tui.runtime.view.history import rewound
from foya_tui.runtime.view.snip import SnipPlan, cache_is_cold, plan_micro, plan_snip
from foya_tui.settings import DEFAULT_MAX_STEPS

TITLE_LENGTH = 60
CANCELLED_RESULT = "[cancelled by the user before this call finished]"
PARALLEL_READS = 4


class EmptyMessageError(InputError):
    """The user tried to send nothing."""


class RewindError(InputError):
    """A rewind target is not a place history can go back to (one line for the user)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_seconds: float = 1.0


@dataclass
class _Attempt:
    text: list[str]
    output_started: bool = False


@dataclass(frozen=True)
class ToolRuntime:
    """What a session needs to run tools: the registry, approvals, the workspace and the limits."""

    registry: ToolRegistry
    approval: ApprovalPolicy
    workdir: Path
    shell_timeout: float = 120.0
    max_steps: int = DEFAULT_MAX_STEPS
    shell_network: bool = False


def outcome_event(failed: TurnFailed) -> NewEvent:
    """The record of a turn that ended without its reply: the failure's kind (a FailureKind value,
    `cancelled` or `step_limit`) and its one-line reason, already redacted by the provider layer."""
    outcome = "cancelled" if failed.kind == "cancelled" else "failed"
    return NewEvent(
        EventKind.TURN_OUTCOME, {"outcome": outcome, "kind": failed.kind, "reason": failed.reason}
    )


def step_limit_reason(max_steps: int) -> str:
    """What a turn that reached the step limit says: what happened, and both ways on."""
    return (
        f"stopped after {max_steps:,} model calls in one turn (the step limit): send a message to let "
        "the agent continue, or raise [tools] max_steps in config.toml"
    )


class Session:
    """One conversation: its store, its route and the turn loop."""

    def __init__(
        self,
        store: EventStore,
        info: SessionInfo,
        route: Route,
        client: ProviderClient,
        compiler: ContextCompiler,
        *,
        tools: ToolRuntime | None = None,
        retry: RetryPolicy = RetryPolicy(),
        compaction: CompactionService | None = None,
        preflight: Callable[[Route], None] | None = None,
    ) -> None:
        """Without `compaction`, nothing is ever compacted (the request goes as compiled).
        `preflight` raises an InputError for a route that cannot be sent (unknown model, missing
        key); a turn checks it before it writes anything."""
        self.store = store
        self.info = info
        self.route = route
        self._client = client
        self._compiler = compiler
        self._tools = tools
        self._retry = retry
        self._compaction = compaction
        self._preflight = preflight
        self._budget_compaction_blocked = False
        """Set when a budget compaction in this turn did not succeed: the turn does not retry it
        (the provider judges the request; a fingerprint suppresses the same attempt next turn)."""
        self._reactive_used = False
        """SPEC C-2 (K-6 resolved): automatic provider-overflow recovery runs at most once per turn
        (reset only when a turn starts)."""

    @property
    def id(self) -> str:
        return self.info.id

    def switch_route(self, route: Route) -> None:
        """Use another route from the next step on. Its own baseline applies (SPEC R-2); a switch
        alone never compacts, the next compile pre-flights the request against the new window."""
        self.route = route

    def context(self) -> RequestView:
        """Compile the next request without sending it (what `foya context` shows)."""
        return self._compiler.compile(self.id, self.route)

    def set_approval_mode(self, mode: str) -> None:
        """Hold this session's tool calls to approval `mode` from the next call on."""
        if self._tools is not None:
            self._tools.approval.mode = mode

    def send(self, text: str, cancel: CancelToken | None = None) -> Iterator[RuntimeUpdate]:
        """Run one turn. The generator always ends with TurnFinished or TurnFailed; a turn that
        failed or was cancelled is recorded first (a `turn_outcome` event), so that a resumed
        session shows it where it happened, as it was shown live."""
        for update in self._turn(text, cancel):
            if isinstance(update, TurnFailed):
                self.store.append(self.id, [outcome_event(update)])
                self.info = self.store.get_session(self.id)
            yield update

    def _turn(self, text: str, cancel: CancelToken | None) -> Iterator[RuntimeUpdate]:
        cancel = cancel or CancelToken()
        cleaned = clean_user_text(text)
        if not cleaned:
            raise EmptyMessageError("the message is empty")
        if self._preflight is not None:
            self._preflight(self.route)  # before the user message is written: nothing half-made
        (user_event,) = self.store.append(self.id, [NewEvent(EventKind.USER_MESSAGE, {"text": cleaned})])
        if not self.info.title:
            title = " ".join(cleaned.split())[:TITLE_LENGTH]
            self.store.set_title(self.id, title)
        self.info = self.store.get_session(self.id)
        self._budget_compaction_blocked = False
        self._reactive_used = False
        yield TurnStarted(self.id, user_event.seq, self.route.id, self.route.model)
        max_steps = self._tools.max_steps if self._tools else 1
        for number in range(1, max_steps + 1):
            yield StepStarted(self.id, number, max_steps)
            step = yield from self._step(cancel)
            if step is None:
                return  # the step ended the turn (failure or cancel), and said so
            finished, reply_seq = step
            if not finished.tool_calls:
                notice = output_limit_failure().message if finished.finish_reason == "length" else None
                yield TurnFinished(
                    self.id, reply_seq, finished.text, finished.finish_reason, finished.usage, notice
                )
                return
            completed = yield from self._run_tools(finished.tool_calls, cancel)
            if not completed:
                yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                return
        yield TurnFailed(self.id, step_limit_reason(max_steps), "step_limit")

    # -- one model call ---------------------------------------------------------------------

    def _prepare(self, cancel: CancelToken) -> Generator[RuntimeUpdate, None, RequestView | None]:
        """Before a step, in SPEC K-2's order: micro-compaction after a cold prompt cache (K-3),
        snip of old tool turns under pressure (K-4), the handoff reminder in the 70–80% band (K-1),
        then the LLM compaction at the compaction line. Micro and snip results are pending until
        the compaction succeeded or was not needed; a failed or cancelled compaction leaves them
        unwritten. Returns the view to send, or None when the turn ended here.

        Each compile here follows a change (a pending snip, a stored handoff record); when the
        pipeline ends with nothing pending and no compaction run, the last view is the request."""
        view = current = self.context()
        if self._compaction is None:
            return view
        settings = self._compaction.settings
        pending: dict[int, int] = {}  # seq → tokens its placeholder saves
        plans: list[SnipPlan] = []
        if cache_is_cold(
            self._compiler.last_provider_call(self.id), self.store.now(), settings.cache_ttl_seconds
        ):
            candidates = self._compiler.snip_candidates(self.id, self.route, current)
            micro = plan_micro(candidates)
            if micro is not None:
                plans.append(micro)
                pending.update((c.seq, c.tokens_saved) for c in candidates if c.seq in micro.seqs)
                view = self._compiler.compile(self.id, self.route, snips=frozenset(pending))
        if view.verdict is Verdict.COMPACT:
            candidates = tuple(
                candidate
                for candidate in self._compiler.snip_candidates(self.id, self.route, current)
                if candidate.seq not in pending
            )
            snip = plan_snip(candidates, view.pressure - view.budget.handoff_at)
            if snip is not None:
                plans.append(snip)
                pending.update((c.seq, c.tokens_saved) for c in candidates if c.seq in snip.seqs)
                view = self._compiler.compile(self.id, self.route, snips=frozenset(pending))
        # K-5: without a trustworthy token snapshot, neither the handoff nor an LLM compaction runs.
        if (
            view.snapshot_known
            and view.verdict is Verdict.HANDOFF
            and view.handoff_status is EpochStatus.NONE
        ):
            (record,) = self.store.append(self.id, [handoff_event(view.handoff_epoch)])
            yield HandoffRecorded(self.id, record.seq, view.handoff_epoch)
            view = self._compiler.compile(self.id, self.route, snips=frozenset(pending))
        compacted = False
        if view.verdict is Verdict.COMPACT and view.snapshot_known and not self._budget_compaction_blocked:
            # SPEC C-2 budget trigger: the estimate is over the high-water mark before a step.
            compacted = True
            # The view carries no pending snip here only if none was planned: then it is exactly
            # what the service would compile as the request it replaces.
            result = yield from self.compact(Trigger.BUDGET, cancel, current=None if pending else view)
            if cancel.cancelled:
                yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                return None
            # Nothing to compact yet is no failure: the next completed step may give it something.
            if not result.accepted and result.outcome is not Outcome.NOTHING_TO_COMPACT:
                self._budget_compaction_blocked = True
                plans = []  # K-2: a failed compaction leaves no half-updated state
        if plans:
            # Results the checkpoint this route applies now covers are not in the request anyway.
            state = self._compiler.checkpoint_state(self.id)
            applied = state.for_route(self.route.id) if state is not None else None
            through = applied.through_seq if applied is not None else 0
            events = []
            for plan in plans:
                seqs = tuple(seq for seq in plan.seqs if seq > through)
                if seqs:
                    saved = sum(pending[seq] for seq in seqs)
                    events.append(replace(plan, seqs=seqs, tokens_saved=saved))
            if events:
                self.store.append(self.id, [plan.event() for plan in events])
                for plan in events:
                    yield ContextSnipped(self.id, str(plan.mode), len(plan.seqs), plan.tokens_saved)
        if not pending and not compacted:
            return view  # nothing was written since it was compiled
        return self.context()

    def _step(self, cancel: CancelToken) -> Generator[RuntimeUpdate, None, tuple[StreamFinished, int] | None]:
        """Compile, stream and record one model call. Returns (its StreamFinished, the reply's
        seq), or None when the turn ended here (it then already yielded TurnFailed)."""
        view = yield from self._prepare(cancel)
        if view is None:
            return None
        yield ContextUpdated(self.id, view.report())
        request = view.provider_request()
        attempt = 0
        while True:
            attempt += 1
            progress = _Attempt(text=[])
            try:
                finished = yield from self._stream(request, cancel, progress)
            except ProviderError as error:
                failure = error.failure
                if (
                    failure.kind is FailureKind.INPUT_OVERFLOW
                    and not progress.output_started
                    and self._compaction is not None
                    and not self._reactive_used
                ):
                    # SPEC C-2, K-6: once per turn, and only before any output.
                    self._reactive_used = True
                    result = yield from self.compact(Trigger.PROVIDER, cancel, current=view)
                    if cancel.cancelled:
                        yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                        return None
                    if result.accepted:
                        view = self.context()
                        yield ContextUpdated(self.id, view.report())
                        request = view.provider_request()
                        attempt = 0
                        continue
                    yield TurnFailed(
                        self.id,
                        f"{view.too_large()}: compaction could not make room ({result.reason})",
                        str(failure.kind),
                    )
                    return None
                if failure.retryable and not progress.output_started and attempt <= self._retry.max_retries:
                    delay = retry_delay(failure, attempt, self._retry.backoff_seconds)
                    yield RetryScheduled(self.id, failure.message, attempt, delay)
                    if sleep_unless_cancelled(delay, cancel):
                        continue
                    yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                    return None
                # Whatever already streamed was seen by the user: keep it in history.
                self._append_reply("".join(progress.text), "", (), "error", None, view)
                message = failure.message
                if failure.kind is FailureKind.INPUT_OVERFLOW and progress.output_started:
                    # K-6: past the output boundary a replay could duplicate what was delivered.
                    message = (
                        f"{failure.message}; the reply had already started, so nothing was retried "
                        "or compacted: send a message to continue"
                    )
                elif failure.kind is FailureKind.INPUT_OVERFLOW and self._reactive_used:
                    # C-2: the one automatic recovery of this turn is spent; no loop of compactions.
                    message = (
                        f"{view.too_large()} ({failure.message}); the context was already compacted once "
                        "in this turn, so it was not compacted again: send a message to continue, or "
                        "compact by hand"
                    )
                elif failure.kind is FailureKind.INPUT_OVERFLOW:
                    # Nothing more could shrink and the provider is the final judge: say what is too large.
                    message = f"{view.too_large()} ({failure.message})"
                yield TurnFailed(self.id, message, str(failure.kind))
                return None
            if finished is None:  # cancelled mid-stream
                self._append_reply("".join(progress.text), "", (), "cancelled", None, view)
                yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                return None
            if self._tools is None:
                finished = replace(finished, tool_calls=())  # no tools were offered: none can run
            reply_seq = self._append_reply(
                finished.text,
                finished.reasoning,
                finished.tool_calls,
                finished.finish_reason,
                finished.usage,
                view,
                tool_charge=self._tool_charge(view, finished.usage, cancel),
            )
            yield ContextUpdated(self.id, self.context().report())
            return finished, reply_seq or view.through_seq

    def _stream(
        self, request: ProviderRequest, cancel: CancelToken, progress: _Attempt
    ) -> Generator[RuntimeUpdate, None, StreamFinished | None]:
        for event in self._client.stream(request, cancel):
            if isinstance(event, TextDelta):
                progress.output_started = True
                progress.text.append(event.text)
                yield ReplyDelta(self.id, event.text)
            elif isinstance(event, (ReasoningDelta, ToolCallDelta)):
                progress.output_started = True
            elif isinstance(event, StreamFinished):
                if event.finish_reason == "cancelled":
                    return None
                return event
        return None

    def _tool_charge(
        self, view: RequestView, usage: Usage | None, cancel: CancelToken
    ) -> dict[str, int | None] | None:
        """What the route's server charges for the tool definitions (real) against their local
        count, measured once per session and route when the route has its own `api_base`, its
        stream reported no usage and the count is an estimate (see providers/tool_charge.py); None
        when no probe was due."""
        # Only servers of their own (`api_base`): hosted providers report usage on streams, and a
        # provider's own endpoint is never probed behind the user's back.
        if (
            usage is not None
            or not view.route.endpoint
            or not view.tools
            or view.counted_exactly
            or cancel.cancelled
            or self._compiler.tool_charge_known(self.id, view.route.id)
        ):
            return None
        # Recorded even when it could not be measured (real: None), so that a server reporting no
        # usage at all is probed once per session, not after every turn.
        real = measure_tool_charge(self._client, view.route, view.tools, cancel)
        return {"real": real, "local": view.layers.tool_schema}

    def _append_reply(
        self,
        text: str,
        reasoning: str,
        tool_calls: Sequence[ToolCall],
        finish_reason: str,
        usage: Usage | None,
        view: RequestView,
        *,
        tool_charge: Mapping[str, int | None] | None = None,
    ) -> int | None:
        """Append the assistant message and the usage record in one transaction (SPEC H-5)."""
        if finish_reason in ("error", "cancelled") and not text:
            return None
        assistant: dict[str, Any] = {
            "text": text,
            "tool_calls": [call.to_payload() for call in tool_calls],
            "finish_reason": finish_reason,
            "route_id": view.route.id,
            "model": view.route.model,
        }
        if reasoning:
            assistant["reasoning"] = reasoning
        batch = [NewEvent(EventKind.ASSISTANT_MESSAGE, assistant)]
        if finish_reason not in ("error", "cancelled"):
            batch.append(
                NewEvent(
                    EventKind.PROVIDER_USAGE,
                    {
                        "route_id": view.route.id,
                        "model": view.route.model,
                        "through_seq": view.through_seq,
                        "revision": view.revision,
                        "fixed_tokens": view.layers.fixed,
                        "estimate": view.estimate.total,
                        # The uncalibrated local count of the same request: real / this is the
                        # route's calibration sample (tracker.calibration).
                        "local_tokens": view.layers.total,
                        "usage": usage.to_payload() if usage else None,
                        **({"tool_charge": dict(tool_charge)} if tool_charge else {}),
                    },
                )
            )
        appended = self.store.append(self.id, batch)
        self.info = self.store.get_session(self.id)
        if self._compaction is not None and finish_reason not in ("error", "cancelled"):
            # SPEC C-13: what this route accepted, for a compaction request that overflows later.
            self._compaction.record_boundary(
                self.id,
                view.route.id,
                view.through_seq,
                usage,
                view.payload_bytes,
            )
        return appended[0].seq

    # -- rewind -------------------------------------------------------------------------------

    def rewind(self, to_seq: int) -> int:
        """Append a rewind event: valid history then ends at `to_seq` (SPEC H-4). Nothing is deleted;
        checkpoints made before it stop counting (P-6). Returns the rewind event's seq.

        The cut may not separate a tool call from its results (SPEC C-4): the user is told where
        the enclosing group starts and ends instead."""
        last = self.store.last_seq(self.id)
        if not 0 <= to_seq < last:
            raise RewindError(
                f"seq {to_seq} is not before the end of this session (its last event is {last})"
            )
        if to_seq > 0:
            target = self.store.event(self.id, to_seq)
            if (
                target is None
                or target.problem is not None
                or rewound(to_seq, self.store.rewinds_after(self.id, to_seq))
            ):
                raise RewindError(f"seq {to_seq} is not an event of this session's valid history")
        split = group_split(self._compiler.snapshot(self.id, after_seq=to_seq).entries, to_seq)
        if split is not None:
            raise RewindError(split.refusal("rewind to", split.group.first_seq - 1))
        (event,) = self.store.append(self.id, [NewEvent(EventKind.REWIND, {"to_seq": to_seq})])
        self.info = self.store.get_session(self.id)
        return event.seq

    # -- compaction ---------------------------------------------------------------------------

    def compact(
        self,
        trigger: Trigger,
        cancel: CancelToken | None = None,
        phase: Phase | None = None,
        current: RequestView | None = None,
    ) -> Generator[CompactionProgressed | CompactionFinished, None, CompactionResult]:
        """Run one compaction, reporting its stages as they happen. Returns its CompactionResult.

        The service works in a helper thread so that its progress can be yielded live from this
        generator (which itself runs in the caller's worker, never on the UI's event loop).
        `current`: the request just compiled with nothing pending, which the service then reuses."""
        if self._compaction is None:
            raise RuntimeError("this session has no compaction service")
        service = self._compaction
        stages: queue.Queue[tuple[Stage, str] | CompactionResult | BaseException] = queue.Queue()
        cancel = cancel or CancelToken()

        def run() -> None:
            try:
                stages.put(
                    service.compact(
                        self.id,
                        self.route,
                        trigger,
                        phase=phase,
                        cancel=cancel,
                        progress=lambda stage, detail: stages.put((stage, detail)),
                        current=current,
                    )
                )
            except BaseException as exc:  # re-raised in the caller's thread
                stages.put(exc)

        worker = threading.Thread(target=run, name=f"foya-compaction-{self.id[:6]}", daemon=True)
        worker.start()
        while True:
            item = stages.get()
            if isinstance(item, BaseException):
                worker.join()
                raise item
            if isinstance(item, CompactionResult):
                worker.join()
                self.info = self.store.get_session(self.id)
                yield CompactionFinished(self.id, item)
                return item
            stage, detail = item
            yield CompactionProgressed(self.id, str(trigger), str(stage), detail)

    # -- tools --------------------------------------------------------------------------------

    def _run_tools(
        self, calls: Sequence[ToolCall], cancel: CancelToken
    ) -> Generator[RuntimeUpdate, None, bool]:
        """Run a batch of tool calls and append every result. Returns False when cancelled, after
        closing each call that did not finish with a recorded 'cancelled' result."""
        assert self._tools is not None
        tools = self._tools
        state = self._compiler.checkpoint_state(self.id)
        checkpoint = state.current if state is not None else None
        context = ToolContext(
            workdir=tools.workdir,
            session_id=self.id,
            store=self.store,
            cancel=cancel,
            timeout=tools.shell_timeout,
            shell_network=tools.shell_network,
            covered=(checkpoint.from_seq, checkpoint.through_seq) if checkpoint is not None else None,
        )
        results: dict[str, ToolResult] = {}
        # Read-only calls of a batch run in parallel; anything with an effect runs alone, in order,
        # after asking for approval, so the user is never asked two questions at once.
        reads = [call for call in calls if self._effect(call) is Effect.READ_ONLY]
        started: set[str] = set()
        for call in reads:
            started.add(call.id)
            yield ToolCallStarted(self.id, call.id, call.name, call.arguments)
        if reads and not cancel.cancelled:
            with ThreadPoolExecutor(max_workers=PARALLEL_READS) as pool:
                futures = {
                    call.id: pool.submit(tools.registry.call, call.name, call.arguments, context)
                    for call in reads
                }
                for call in reads:
                    results[call.id] = futures[call.id].result()
                    yield self._record(call, results[call.id])
        for call in calls:
            if call.id in results or cancel.cancelled:
                continue
            started.add(call.id)
            yield ToolCallStarted(self.id, call.id, call.name, call.arguments)
            refusal = tools.approval.refusal(ApprovalRequest(self.id, call, self._effect(call)), cancel)
            if cancel.cancelled:
                break
            if refusal is not None:
                results[call.id] = ToolResult(content=refusal, is_error=True, metadata={"refused": True})
            else:
                results[call.id] = tools.registry.call(call.name, call.arguments, context)
            yield self._record(call, results[call.id])
        if not cancel.cancelled:
            return True
        for call in calls:
            if call.id not in results:
                if call.id not in started:  # announced, so a UI can show what never ran
                    yield ToolCallStarted(self.id, call.id, call.name, call.arguments)
                cancelled = ToolResult(content=CANCELLED_RESULT, is_error=True, metadata={"cancelled": True})
                yield self._record(call, cancelled)
        return False

    def _effect(self, call: ToolCall) -> Effect:
        assert self._tools is not None
        tool = self._tools.registry.get(call.name)
        # An unknown tool runs nothing: the registry answers with an error, no approval needed.
        return tool.spec.effect if tool is not None else Effect.READ_ONLY

    def _record(self, call: ToolCall, result: ToolResult) -> ToolCallFinished:
        (event,) = self.store.append(
            self.id,
            [
                NewEvent(
                    EventKind.TOOL_RESULT,
                    {
                        "tool_call_id": call.id,
                        "name": call.name,
                        "content": result.content,
                        "is_error": result.is_error,
                        "metadata": dict(result.metadata),
                    },
                )
            ],
        )
        return ToolCallFinished(
            session_id=self.id,
            seq=event.seq,
            call_id=call.id,
            name=call.name,
            is_error=result.is_error,
            content=result.content,
            metadata=dict(result.metadata),
        )


__all__ = ["EmptyMessageError", "RetryPolicy", "RewindError", "Session", "ToolRuntime"]
